"""convert -> verify -> the reference MoE layer gives the same answer from source and converted weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from pack_helpers import assert_moe_equal, source_experts
from safetensors import safe_open

from chord_kernels.packed import get_layout
from chord_pack.convert import convert, partial_dir
from chord_pack.demo import kimi_config, kimi_tensors, write_checkpoint, write_tiny_kimi_checkpoint
from chord_pack.detect import CHORD_FORMAT, EXPERT_RE
from chord_pack.errors import CheckpointError, ChordPackError, OutputError
from chord_pack.load import read_packed
from chord_pack.names import experts_label
from chord_pack.st import read_header
from chord_pack.verify import verify

SMALL_SHARDS = 200_000  # several output shards from a ~1.7 MB checkpoint


@pytest.mark.parametrize("style", ["k2-thinking", "k2.5"])
def test_convert_verify_and_moe_output_match(tmp_path: Path, style: str, layout: tuple[str, str]) -> None:
    name, profile = layout
    src = write_tiny_kimi_checkpoint(tmp_path / "src", style, layers=2, experts=4, seed=11)
    before = {p.name: p.read_bytes() for p in src.iterdir()}
    result = convert(str(src), tmp_path / "out", name, profile, max_shard_bytes=SMALL_SHARDS)
    out = result.output
    assert {p.name: p.read_bytes() for p in src.iterdir()} == before, "the source was modified"
    assert not partial_dir(out).exists()
    assert len(result.shards) >= 3
    assert result.peak_held_bytes <= result.plan.memory_bound

    prefix = "language_model." if style == "k2.5" else ""
    assert result.plan.info.prefix == prefix
    assert result.plan.info.family == ("kimi-k2.5" if style == "k2.5" else "kimi-k2-thinking")
    config = json.loads((out / "config.json").read_text())
    qc = config["text_config"]["quantization_config"] if style == "k2.5" else config["quantization_config"]
    assert qc["format"] == CHORD_FORMAT
    assert "pack-quantized" not in json.dumps(qc)
    block = config["chord_pack"]
    target = get_layout(name)
    ranged = target.family in ("indexed", "grouped")  # what chord-vllm serves: expert ranges by default
    assert (block["layout"], block["profile"], block["schema_version"]) == (name, profile, 2 if ranged else 1)
    assert (block["family"], block["mode"]) == (target.family, target.mode)
    assert block["layout_version"] == target.version
    assert ("expert_ranges" in block) == ranged
    assert block["source"]["family"] == result.plan.info.family
    assert set(block["shards"]) == set(result.shards)

    static = {k: v for k, v in block.items() if k not in ("shards", "source_digests")}
    # The local source path is recorded in config.json only (never in shard headers).
    assert block["source"].pop("local_path") == str(src.resolve())
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == result.plan.total_bytes
    for shard in block["shards"]:
        header = read_header(out / shard)
        assert json.loads(header.metadata["chord_pack"]) == static
        assert header.metadata["format"] == "pt"
    # No per-expert source tensor survives; every non-expert source tensor is byte-identical.
    src_map = json.loads((src / "model.safetensors.index.json").read_text())["weight_map"]
    assert not [n for n in index["weight_map"] if EXPERT_RE.match(n)]
    for tensor in [n for n in src_map if not EXPERT_RE.match(n)]:
        with safe_open(str(src / src_map[tensor]), "pt") as a, \
                safe_open(str(out / index["weight_map"][tensor]), "pt") as b:
            x, y = a.get_tensor(tensor), b.get_tensor(tensor)
        assert x.dtype == y.dtype and torch.equal(x.view(torch.uint8), y.view(torch.uint8)), tensor

    report = verify(out)
    assert report.ok, report.problems
    assert report.source is not None and report.experts_compared == 2 * 3 * 4
    for layer in (1, 2):
        assert_moe_equal(src, out, layer, prefix, seed=layer)
    # Packed tensors are really permuted (not the source bytes relabelled), and unpack exactly.
    w13 = read_packed(out, 1, "w13")
    assert w13.layout == name and w13.profile == profile and w13.num_experts == 4
    src_w13, _ = source_experts(src, 1, prefix)
    from chord_kernels.packed import unpack
    got_packed, got_scales = unpack(w13)
    assert torch.equal(got_packed, src_w13[0]) and torch.equal(got_scales, src_w13[1])
    only = next(iter(w13.tensors.values()))
    assert only.numel() != src_w13[0].numel() or not torch.equal(only.reshape(-1)[:64], src_w13[0].reshape(-1)[:64])

    card = (out / "README.md").read_text()
    assert f"**{name}**" in card and CHORD_FORMAT in card
    assert (out / "generation_config.json").read_bytes() == (src / "generation_config.json").read_bytes()


def test_compressed_tensors_written_checkpoint(tmp_path: Path, layout: tuple[str, str]) -> None:
    """A checkpoint whose experts come from compressed-tensors' own pack-quantized compressor."""
    ct = pytest.importorskip("compressed_tensors")
    from compressed_tensors.compressors import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

    scheme = QuantizationScheme(
        targets=["Linear"],
        weights=QuantizationArgs(num_bits=4, type="int", strategy="group", group_size=32, symmetric=True),
    )
    dims = {"layers": 2, "experts": 4, "hidden": 128, "intermediate": 64}
    tensors = kimi_tensors("k2-thinking", **dims, seed=3)
    g = torch.Generator().manual_seed(5)
    floats = {}
    for name in [n for n in tensors if n.endswith(".weight_packed")]:
        base = name[: -len("weight_packed")]
        n, k = tensors[base + "weight_shape"].tolist()
        w = (torch.randn(n, k, generator=g) * 0.02).to(torch.bfloat16)
        scale = (w.float().reshape(n, k // 32, 32).abs().amax(-1) / 7).clamp_min(1e-6).to(torch.bfloat16)
        compressed = PackedQuantizationCompressor.compress({"weight": w, "weight_scale": scale}, scheme)
        for kind in ("weight_packed", "weight_scale", "weight_shape"):
            tensors[base + kind] = compressed[kind]
        floats[base] = compressed
    assert tensors[base + "weight_shape"].dtype == torch.int64  # what compressed-tensors writes
    src = write_checkpoint(tmp_path / "src", kimi_config("k2-thinking", **dims), tensors, shards=3)
    name, profile = layout
    out = convert(str(src), tmp_path / "out", name, profile, max_shard_bytes=100_000).output
    assert verify(out).ok
    assert_moe_equal(src, out, 1)
    # compressed-tensors' own decompression agrees with chord-kernels' dequant of the converted weights.
    from chord_kernels.packed import unpack
    from chord_kernels.reference import dequantize_weight

    w13 = dequantize_weight(unpack(read_packed(out, 2, "w13")))
    for e in range(4):
        state = floats[f"model.layers.2.mlp.experts.{e}.gate_proj."]
        ref = PackedQuantizationCompressor.decompress(dict(state), scheme)["weight"]
        assert torch.equal(ref.to(torch.bfloat16), w13[e, :64]), f"expert {e} gate_proj"
    assert ct.__version__


def test_unknown_layout_fails_before_any_work(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ChordPackError, match=r"unknown layout 'masked2'; valid layouts: .*contiguous, indexed, masked"):
        convert("nobody/never-downloaded", tmp_path / "out", "masked2")
    assert list(tmp_path.iterdir()) == []


def test_output_that_exists_is_refused(tiny: Path, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(OutputError, match="already exists"):
        convert(str(tiny), tmp_path / "out", "test-reversed", "test_a")
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"


def test_truncated_source_shard_names_file_and_tensor(tiny: Path, tmp_path: Path) -> None:
    shard = sorted(tiny.glob("*.safetensors"))[-1]
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) - 1000])
    with pytest.raises(CheckpointError, match=rf"{shard.name} is truncated: tensor \S+ needs bytes"):
        convert(str(tiny), tmp_path / "out", "test-reversed", "test_a")
    assert not (tmp_path / "out").exists() and not partial_dir(tmp_path / "out").exists()


def test_missing_expert_tensor_is_named(tiny: Path, tmp_path: Path) -> None:
    index_path = tiny / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    del index["weight_map"]["model.layers.2.mlp.experts.3.down_proj.weight_scale"]
    index_path.write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=r"model\.layers\.2\.mlp\.experts\.3\.down_proj\.weight_scale is missing"):
        convert(str(tiny), tmp_path / "out", "test-reversed", "test_a")


def test_wrong_dtype_and_weight_shape_are_named(tmp_path: Path) -> None:
    dims = {"layers": 1, "experts": 2, "hidden": 64, "intermediate": 32}
    tensors = kimi_tensors("k2-thinking", **dims)
    bad = "model.layers.1.mlp.experts.1.up_proj.weight_scale"
    tensors[bad] = tensors[bad].float()
    src = write_checkpoint(tmp_path / "a", kimi_config("k2-thinking", **dims), tensors)
    with pytest.raises(CheckpointError, match=rf"tensor {bad} has dtype F32, expected BF16"):
        convert(str(src), tmp_path / "out-a", "test-reversed", "test_a")

    tensors = kimi_tensors("k2-thinking", **dims)
    lie = "model.layers.1.mlp.experts.0.down_proj.weight_shape"
    tensors[lie] = torch.tensor([64, 64], dtype=torch.int32)
    src = write_checkpoint(tmp_path / "b", kimi_config("k2-thinking", **dims), tensors)
    with pytest.raises(CheckpointError, match=rf"tensor {lie} says \[64, 64\] but .* \[N=64, K=32\]"):
        convert(str(src), tmp_path / "out-b", "test-reversed", "test_a")
    assert not (tmp_path / "out-b").exists()  # a failed run leaves nothing that looks complete


class StopAfter:
    """Progress sink that simulates a crash after ``n`` finished shards."""

    def __init__(self, n: int) -> None:
        self.n, self.done, self.notes = n, [], []

    def start(self, description: str, total_bytes: int) -> None:
        pass

    def advance(self, nbytes: int) -> None:
        pass

    def note(self, message: str) -> None:
        self.notes.append(message)

    def shard_done(self, name: str) -> None:
        self.done.append(name)
        if len(self.done) == self.n:
            raise KeyboardInterrupt


def test_interrupt_and_resume(tiny: Path, tmp_path: Path, layout: tuple[str, str]) -> None:
    name, profile = layout
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        convert(str(tiny), out, name, profile, max_shard_bytes=SMALL_SHARDS, progress=StopAfter(2))
    partial = partial_dir(out)
    assert not out.exists() and partial.is_dir()
    finished = sorted(p.name for p in partial.glob("*.safetensors"))
    assert len(finished) == 2 and not list(partial.glob("*.incomplete"))
    first_stat = (partial / finished[0]).stat()

    with pytest.raises(OutputError, match="--resume"):
        convert(str(tiny), out, name, profile, max_shard_bytes=SMALL_SHARDS)
    with pytest.raises(OutputError, match="other settings"):
        convert(str(tiny), out, name, profile, max_shard_bytes=SMALL_SHARDS * 2, resume=True)

    # Damage the second finished shard: resume must notice (sha256) and redo it, keep the first.
    damaged = partial / finished[1]
    damaged.write_bytes(damaged.read_bytes()[:-10] + b"0123456789")
    sink = StopAfter(10**6)
    result = convert(str(tiny), out, name, profile, max_shard_bytes=SMALL_SHARDS, resume=True, progress=sink)
    assert result.reused_shards == [finished[0]]
    assert any(finished[1] in note and "redoing" in note for note in sink.notes)
    assert finished[0] not in sink.done and finished[1] in sink.done
    assert (out / finished[0]).stat().st_ino == first_stat.st_ino
    assert not partial.exists()
    assert verify(out).ok
    assert_moe_equal(tiny, out, 2)


class CrashMidShard(StopAfter):
    """Simulates a crash in the middle of writing a shard (after ``limit`` bytes)."""

    def __init__(self, limit: int) -> None:
        super().__init__(10**6)
        self.limit, self.seen = limit, 0

    def advance(self, nbytes: int) -> None:
        self.seen += nbytes
        if self.seen > self.limit:
            raise KeyboardInterrupt


def test_crash_inside_a_shard_leaves_no_partial_shard(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        convert(tiny, out, "test-reversed", "test_a", max_shard_bytes=SMALL_SHARDS, progress=CrashMidShard(300_000))
    partial = partial_dir(out)
    journal = json.loads((partial / ".chord-pack-journal.json").read_text())
    on_disk = sorted(p.name for p in partial.iterdir() if not p.name.startswith("."))
    assert on_disk == sorted(journal["finished"]) and on_disk  # no *.incomplete left
    result = convert(tiny, out, "test-reversed", "test_a", max_shard_bytes=SMALL_SHARDS, resume=True)
    assert result.reused_shards == on_disk
    assert verify(out).ok


def test_layout_that_cannot_run_on_meta_is_probed_with_one_expert(tiny: Path, tmp_path: Path) -> None:
    result = convert(tiny, tmp_path / "out", "test-needs-data", "test_a", max_shard_bytes=SMALL_SHARDS)
    assert result.plan.projections["w13"].tensors["codes"] == ("I32", (4, 256, 32))
    assert verify(result.output).ok
    assert_moe_equal(tiny, result.output, 1)


def change_source_tensor(src: Path, name: str) -> None:
    """Change the bytes of source tensor ``name`` in place (same size: the index stays the same)."""
    weight_map = json.loads((src / "model.safetensors.index.json").read_text())["weight_map"]
    path = src / weight_map[name]
    info = read_header(path).tensors[name]
    data = bytearray(path.read_bytes())
    data[info.begin:info.begin + 16] = bytes(b ^ 0x5A for b in data[info.begin:info.begin + 16])
    path.write_bytes(bytes(data))


def test_resume_redoes_shards_whose_source_changed(tiny: Path, tmp_path: Path, layout: tuple[str, str]) -> None:
    from chord_pack.plan import PackedItem, make_plan
    from chord_pack.source import Source

    name, profile = layout
    out = tmp_path / "out"
    shards = make_plan(Source(tiny), name, profile, max_shard_bytes=SMALL_SHARDS).shards
    first_packed = next(i for i, s in enumerate(shards) if any(isinstance(t, PackedItem) for t in s.items))
    with pytest.raises(KeyboardInterrupt):
        convert(tiny, out, name, profile, max_shard_bytes=SMALL_SHARDS, progress=StopAfter(first_packed + 1))
    kept = sorted(p.name for p in partial_dir(out).glob("*.safetensors"))
    assert kept == [s.name for s in shards[:first_packed + 1]]
    # The source changes under the interrupted conversion: one copied tensor, one expert.
    change_source_tensor(tiny, "model.embed_tokens.weight")
    packed = next(t for t in shards[first_packed].items if isinstance(t, PackedItem))
    source_proj = "gate_proj" if packed.proj == "w13" else "down_proj"
    expert = packed.experts.start if packed.experts is not None else 0  # one the shard holds
    change_source_tensor(tiny, f"model.layers.{packed.layer}.mlp.experts.{expert}.{source_proj}.weight_packed")

    sink = StopAfter(10**6)
    result = convert(tiny, out, name, profile, max_shard_bytes=SMALL_SHARDS, resume=True, progress=sink)
    redone = {shards[0].name, shards[first_packed].name}
    assert set(sink.done) >= redone and not set(result.reused_shards) & redone
    assert set(result.reused_shards) == set(kept) - redone
    assert any(shards[0].name in n and "source has changed" in n and "embed_tokens" in n for n in sink.notes)
    stale = f"layer {packed.layer} {source_proj}{experts_label(packed.experts)} differs"
    assert any(shards[first_packed].name in n and stale in n for n in sink.notes)
    report = verify(out)
    assert report.ok and report.source is not None, report.problems
    assert_moe_equal(tiny, out, packed.layer)


def test_failure_after_a_shard_says_what_was_kept(tmp_path: Path, monkeypatch) -> None:
    import chord_pack.convert as convert_module

    dims = {"layers": 2, "experts": 2, "hidden": 64, "intermediate": 32}
    src = write_checkpoint(tmp_path / "src", kimi_config("k2-thinking", **dims), kimi_tensors("k2-thinking", **dims))
    bad, real = "model.layers.2.mlp.experts.1.down_proj.weight_packed", convert_module.load_experts

    def load_experts(plan, layer, spec, *args, **kwargs):
        if layer == 2 and spec.proj == "w2":  # e.g. a disk error, found only when the bytes are read
            raise CheckpointError(f"{src}: tensor {bad} is cut short (3 of 8192 bytes)")
        return real(plan, layer, spec, *args, **kwargs)

    monkeypatch.setattr(convert_module, "load_experts", load_experts)
    out = tmp_path / "out"
    with pytest.raises(CheckpointError) as err:
        convert(src, out, "test-reversed", "test_a", max_shard_bytes=10_000)
    partial = partial_dir(out)
    finished = sorted(p.name for p in partial.glob("*.safetensors"))
    assert finished and str(err.value).endswith(
        f"Kept {len(finished)} finished shards in {partial}; fix the problem, then rerun the same command "
        "with --resume")
    assert f"tensor {bad} is cut short" in str(err.value) and "\n" not in str(err.value)


def test_every_weight_shape_is_checked_before_anything_is_written(tmp_path: Path) -> None:
    dims = {"layers": 2, "experts": 8, "hidden": 256, "intermediate": 128}
    tensors = kimi_tensors("k2-thinking", **dims)
    lie = "model.layers.2.mlp.experts.7.down_proj.weight_shape"  # the last expert converted
    tensors[lie] = torch.tensor([128, 512], dtype=torch.int32)
    src = write_checkpoint(tmp_path / "src", kimi_config("k2-thinking", **dims), tensors, shards=3)
    with pytest.raises(CheckpointError, match=rf"tensor {lie} says \[128, 512\] but weight_packed/weight_scale are "
                                              r"\[N=256, K=128\]"):
        convert(src, tmp_path / "out", "indexed", max_shard_bytes=SMALL_SHARDS)
    assert not partial_dir(tmp_path / "out").exists() and not (tmp_path / "out").exists()


def test_weight_packed_with_too_few_rows_is_blamed_itself(tmp_path: Path) -> None:
    dims = {"layers": 1, "experts": 2, "hidden": 256, "intermediate": 128}
    tensors = kimi_tensors("k2-thinking", **dims)
    short = "model.layers.1.mlp.experts.0.gate_proj.weight_packed"
    tensors[short] = tensors[short][:-1].clone()
    src = write_checkpoint(tmp_path / "src", kimi_config("k2-thinking", **dims), tensors)
    with pytest.raises(CheckpointError, match=rf"tensor {short} has shape \[127, 32\], expected \[128, 32\] \(\[N, "
                                              r"K/8\] for N=128, K=256 from config\.json"):
        convert(src, tmp_path / "out", "test-reversed", "test_a")


def test_shard_size_must_be_positive(tiny: Path, tmp_path: Path) -> None:
    from chord_pack.errors import ChordPackError

    for bad in (0, -1):
        with pytest.raises(ChordPackError, match=rf"max_shard_bytes: expected a positive number of bytes, got {bad}"):
            convert(tiny, tmp_path / "out", "test-reversed", "test_a", max_shard_bytes=bad)
    assert not (tmp_path / "out").exists()


def test_symlink_or_file_output_is_refused_before_any_work(tiny: Path, tmp_path: Path) -> None:
    target = tmp_path / "symtarget"
    target.mkdir()
    link = tmp_path / "outlink"
    link.symlink_to(target)
    with pytest.raises(OutputError, match=rf"output {link} is a symbolic link \(to {target}\)"):
        convert(tiny, link, "test-reversed", "test_a")
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    with pytest.raises(OutputError, match=rf"output {a_file} is a file, not a directory"):
        convert(tiny, a_file, "test-reversed", "test_a")
    assert not partial_dir(link).exists() and not partial_dir(a_file).exists() and not any(target.iterdir())


def test_failed_final_rename_is_resumable(tiny: Path, tmp_path: Path, monkeypatch) -> None:
    """The journal outlives the rename of the partial directory: a failure there loses nothing."""
    import os

    out, real_replace = tmp_path / "out", os.replace

    def replace(src, dst) -> None:
        if Path(dst) == out:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OutputError) as err:
        convert(tiny, out, "test-reversed", "test_a", max_shard_bytes=SMALL_SHARDS)
    partial = partial_dir(out)
    n = len(list(partial.glob("*.safetensors")))
    assert str(err.value) == (f"cannot rename {partial} to {out}: No space left on device. Kept {n} finished "
                              f"shards in {partial}; free disk space, then rerun the same command with --resume")
    monkeypatch.setattr(os, "replace", real_replace)
    result = convert(tiny, out, "test-reversed", "test_a", max_shard_bytes=SMALL_SHARDS, resume=True)
    assert len(result.reused_shards) == n and not partial.exists() and verify(out).ok
    assert not (out / ".chord-pack-journal.json").exists()


def test_resume_finishes_a_finished_conversion_left_without_journal(tiny: Path, tmp_path: Path, monkeypatch) -> None:
    """A partial directory holding a whole conversion but no journal (as chord-pack left it when it
    removed the journal before the final rename) is finished by --resume, its shards checked."""
    import os

    out, real_replace = tmp_path / "out", os.replace
    monkeypatch.setattr(os, "replace", lambda s, d: (_ for _ in ()).throw(KeyboardInterrupt) if Path(d) == out
                        else real_replace(s, d))
    with pytest.raises(KeyboardInterrupt):
        convert(tiny, out, "test-reversed", "test_a", max_shard_bytes=SMALL_SHARDS)
    monkeypatch.setattr(os, "replace", real_replace)
    partial = partial_dir(out)
    (partial / ".chord-pack-journal.json").unlink()
    shards = sorted(p.name for p in partial.glob("*.safetensors"))
    damaged = partial / shards[-1]
    damaged.write_bytes(damaged.read_bytes()[:-4] + b"oops")
    sink = StopAfter(10**6)
    result = convert(tiny, out, "test-reversed", "test_a", max_shard_bytes=SMALL_SHARDS, resume=True, progress=sink)
    assert result.reused_shards == shards[:-1] and sink.done == shards[-1:]
    assert not partial.exists() and verify(out).ok

    # Without --resume, or for another plan, such a directory is never taken as finished.
    for other in (tmp_path / "other-a", tmp_path / "other-b"):
        partial_dir(other).mkdir()
        (partial_dir(other) / "config.json").write_text((out / "config.json").read_text())
    with pytest.raises(OutputError, match="--resume"):
        convert(tiny, tmp_path / "other-a", "test-reversed", "test_a", max_shard_bytes=SMALL_SHARDS)
    with pytest.raises(OutputError, match="has no .chord-pack-journal.json"):
        convert(tiny, tmp_path / "other-b", "test-reversed", "test_b", max_shard_bytes=SMALL_SHARDS, resume=True)


def test_interrupt_after_the_final_rename_says_the_output_is_complete(tiny: Path, tmp_path: Path,
                                                                     monkeypatch) -> None:
    """Stopped between the rename and the journal's removal: the output is whole, the message says
    so, and the journal left inside it is a dot-file that verify ignores and upload never sends."""
    from typer.testing import CliRunner

    from chord_pack.cli import app
    from chord_pack.upload import _operations

    out, real_unlink = tmp_path / "out", Path.unlink

    def unlink(self, missing_ok=False):
        if self == out / ".chord-pack-journal.json":
            raise KeyboardInterrupt
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    res = CliRunner().invoke(app, ["convert", str(tiny), "--layout", "test-reversed", "--output", str(out)])
    monkeypatch.setattr(Path, "unlink", real_unlink)
    assert res.exit_code == 130, res.output
    assert f"The conversion had finished: {out} is complete" in " ".join(res.output.split())
    assert "Nothing was kept" not in res.output
    assert (out / ".chord-pack-journal.json").is_file() and not partial_dir(out).exists()
    assert verify(out).ok
    sent = [op.path_in_repo for op in _operations(out)]
    assert "config.json" in sent and not [name for name in sent if "journal" in name]


@pytest.mark.parametrize("journal", ['{"fingerprint": "x", "fin', "[]", "damaged-record"])
def test_damaged_journal_is_one_clean_error(tiny: Path, tmp_path: Path, journal: str) -> None:
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        convert(tiny, out, "test-reversed", "test_a", max_shard_bytes=SMALL_SHARDS, progress=StopAfter(1))
    path = partial_dir(out) / ".chord-pack-journal.json"
    if journal == "damaged-record":  # a finished shard recorded without its size
        doc = json.loads(path.read_text())
        del next(iter(doc["finished"].values()))["size"]
        journal = json.dumps(doc)
    path.write_text(journal)
    with pytest.raises(OutputError, match=rf"^{path} is (unreadable|damaged).*; delete {partial_dir(out)}, then "
                                          "rerun without --resume$"):
        convert(tiny, out, "test-reversed", "test_a", max_shard_bytes=SMALL_SHARDS, resume=True)
    from chord_pack.convert import kept_summary

    assert "journal.json is unreadable" in kept_summary(out)


def test_resume_disk_errors_are_one_line(tiny: Path, tmp_path: Path, monkeypatch) -> None:
    """Re-hashing or removing a finished shard on resume can fail (a read-only remount): a typed
    error naming the shard and what was kept, not a traceback."""
    import errno

    import chord_pack.convert as convert_module

    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        convert(tiny, out, "test-reversed", "test_a", max_shard_bytes=SMALL_SHARDS, progress=StopAfter(2))
    partial = partial_dir(out)
    first, second = sorted(partial.glob("*.safetensors"))
    second.write_bytes(second.read_bytes()[:-4] + b"oops")
    real_unlink = Path.unlink

    def unlink(self, missing_ok=False):
        if self == second:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    with pytest.raises(OutputError) as err:
        convert(tiny, out, "test-reversed", "test_a", max_shard_bytes=SMALL_SHARDS, resume=True)
    assert str(err.value) == (f"cannot remove {second}: Read-only file system. Kept 2 finished shards in "
                              f"{partial}; make it writable, then rerun the same command with --resume")
    monkeypatch.setattr(Path, "unlink", real_unlink)

    def sha256_file(path):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(convert_module, "sha256_file", sha256_file)
    with pytest.raises(OutputError, match=rf"^cannot read {first}: Input/output error\. Kept 2 finished shards"):
        convert(tiny, out, "test-reversed", "test_a", max_shard_bytes=SMALL_SHARDS, resume=True)


def test_journal_and_config_are_synced_before_they_replace_the_old_ones(tiny: Path, tmp_path: Path,
                                                                        monkeypatch) -> None:
    import os

    synced, replaced, real_fsync, real_replace = set(), [], os.fsync, os.replace

    def fsync(fd: int) -> None:
        synced.add(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def replace(src, dst) -> None:
        replaced.append((str(src), str(src) in synced))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    convert(tiny, tmp_path / "out", "test-reversed", "test_a", max_shard_bytes=SMALL_SHARDS)
    tmps = [(src, ok) for src, ok in replaced if src.endswith(".tmp")]
    assert any(src.endswith(".chord-pack-journal.json.tmp") for src, _ in tmps)
    assert any(src.endswith("config.json.tmp") for src, _ in tmps)
    assert all(ok for _, ok in tmps), [src for src, ok in tmps if not ok]


def test_interrupt_while_a_shard_header_is_written_leaves_no_incomplete_shard(tiny: Path, tmp_path: Path,
                                                                             monkeypatch) -> None:
    from chord_pack.st import ShardWriter

    real_write = ShardWriter._write

    def write(self, data) -> None:
        if self.size == 0 and "-00002-of-" in self.path.name:  # the second shard's header
            raise KeyboardInterrupt
        real_write(self, data)

    monkeypatch.setattr(ShardWriter, "_write", write)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        convert(tiny, out, "test-reversed", "test_a", max_shard_bytes=SMALL_SHARDS)
    left = sorted(p.name for p in partial_dir(out).iterdir())
    assert not [n for n in left if n.endswith(".incomplete")], left
    assert [n for n in left if n.endswith(".safetensors")] and ".chord-pack-journal.json" in left
