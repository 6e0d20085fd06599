"""The grouped family's layouts (contiguous, masked): the block they record, expert ranges that
let an EP rank read only its experts, inspect, and the refusals that keep a weight with its mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from pack_helpers import assert_moe_equal, source_experts
from typer.testing import CliRunner

from chord_kernels.errors import ChordLayoutError
from chord_kernels.grouped import GroupedLayout
from chord_kernels.indexed import check_weight
from chord_kernels.packed import PackedWeight, get_layout, unpack
from chord_pack.cli import app
from chord_pack.convert import convert
from chord_pack.demo import write_tiny_kimi_checkpoint
from chord_pack.errors import CheckpointError, ChordPackError
from chord_pack.load import read_packed
from chord_pack.st import read_header
from chord_pack.verify import verify

runner = CliRunner()
EXPERTS = 12  # gcd(12, 64) = 4 ranges of 3 experts by default: ranges hold several experts


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_kimi_checkpoint(tmp_path_factory.mktemp("grouped") / "src", experts=EXPERTS, seed=5)


@pytest.fixture(scope="module", params=["contiguous", "masked"])
def packed(request, source: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """(layout, output), converted once per module and only read by the tests."""
    out = tmp_path_factory.mktemp(request.param) / "out"
    convert(source, out, request.param, max_shard_bytes=150_000)
    return request.param, out


def _weight_map(out: Path) -> dict[str, str]:
    return json.loads((out / "model.safetensors.index.json").read_text())["weight_map"]


def test_block_names_family_mode_version_and_ranges(packed: tuple[str, Path]) -> None:
    name, out = packed
    block = json.loads((out / "config.json").read_text())["chord_pack"]
    layout = get_layout(name)
    assert isinstance(layout, GroupedLayout)
    assert (block["schema_version"], block["format"], block["layout"]) == (2, "chord-packed", name)
    assert (block["family"], block["mode"], block["layout_version"]) == ("grouped", name, layout.version)
    assert block["expert_ranges"] == [[0, 2], [3, 5], [6, 8], [9, 11]]
    assert block["tensor_names"] == "model.layers.{layer}.mlp.experts.chord.{proj}.experts_{first}_{last}.{tensor}"
    for spec in block["projections"].values():
        record = spec["packed_weight"]
        assert (record["chord.layout"], record["chord.family"], record["chord.mode"]) == (name, "grouped", name)
        assert record["chord.num_experts"] == str(EXPERTS)
        assert spec["tensors"]["tiles"]["shape"][0] == EXPERTS  # the shape over all experts
        for layer in block["moe_layers"]:
            for first, last in block["expert_ranges"]:
                for sproj in spec["sources"]:
                    assert len(block["source_digests"][f"layers.{layer}.{sproj}.experts_{first}_{last}"]) == 64
    assert len(block["source_digests"]) == 2 * 3 * 4  # layers x source projections x ranges

    weight_map = _weight_map(out)
    packed_names = [n for n in weight_map if ".experts.chord." in n]
    assert len(packed_names) == 2 * 2 * 4  # layers x projections x ranges
    tiles = "model.layers.1.mlp.experts.chord.w13.experts_3_5.tiles"
    info = read_header(out / weight_map[tiles]).tensors[tiles]
    assert info.dtype == "I32" and info.shape[0] == 3
    static = {k: v for k, v in block.items() if k not in ("shards", "source_digests")}
    static["source"] = {k: v for k, v in static["source"].items() if k != "local_path"}
    for shard in block["shards"]:
        assert json.loads(read_header(out / shard).metadata["chord_pack"]) == static


def test_verify_inspect_and_moe_output(packed: tuple[str, Path], source: Path) -> None:
    name, out = packed
    report = verify(out)
    assert report.ok, report.problems
    assert report.projections_checked == 4 and report.experts_compared == 2 * 3 * EXPERTS
    assert_moe_equal(source, out, 2)

    res = runner.invoke(app, ["inspect", str(out), "--json"])
    assert res.exit_code == 0, res.output
    facts = json.loads(res.stdout)
    assert (facts["layout"], facts["family"], facts["mode"], facts["schema_version"]) == (name, "grouped", name, 2)
    assert facts["experts_per_tensor"] == "3 (4 expert ranges per projection)"
    res = runner.invoke(app, ["verify", str(out)])
    assert res.exit_code == 0 and "4 projections unpacked" in res.output, res.output


def test_an_ep_rank_reads_only_its_experts(packed: tuple[str, Path], source: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """With linear placement each rank of EP2 or EP4 holds whole ranges: it opens only their tensors,
    whose bytes are exactly its share, and gets exactly its experts."""
    import chord_pack.load as load

    _, out = packed
    weight_map = _weight_map(out)
    full = unpack(read_packed(out, 1, "w13"))
    want_src = source_experts(source, 1)[0]
    assert torch.equal(full[0], want_src[0]) and torch.equal(full[1], want_src[1])
    opened: list[str] = []
    real_open = load.safe_open

    class Recording:
        def __init__(self, path: str, framework: str) -> None:
            self.f = real_open(path, framework=framework)

        def __enter__(self):
            inner = self.f.__enter__()

            class Handle:
                def get_tensor(self, name: str) -> torch.Tensor:
                    opened.append(name)
                    return inner.get_tensor(name)

                def get_slice(self, name: str):
                    opened.append(name)
                    return inner.get_slice(name)
            return Handle()

        def __exit__(self, *exc) -> None:
            self.f.__exit__(*exc)

    monkeypatch.setattr(load, "safe_open", Recording)
    all_bytes = sum(read_header(out / weight_map[n]).tensors[n].nbytes for n in weight_map if "layers.1.mlp.experts.chord.w13." in n)
    for ep in (2, 4):
        per_rank = EXPERTS // ep
        for rank in range(ep):
            mine = range(rank * per_rank, (rank + 1) * per_rank)
            opened.clear()
            weight = read_packed(out, 1, "w13", experts=mine)
            assert weight.num_experts == per_rank and weight.mode == packed[0]
            got = unpack(weight)
            assert torch.equal(got[0], full[0][mine.start:mine.stop])
            assert torch.equal(got[1], full[1][mine.start:mine.stop])
            firsts = range(mine.start, mine.stop, 3)
            assert opened == [f"model.layers.1.mlp.experts.chord.w13.experts_{f}_{f + 2}.tiles" for f in firsts]
            nbytes = sum(read_header(out / weight_map[n]).tensors[n].nbytes for n in opened)
            assert nbytes * ep == all_bytes
    # Experts across a range boundary: only the two ranges that hold them, sliced.
    opened.clear()
    got = unpack(read_packed(out, 1, "w13", experts=range(2, 5)))
    assert torch.equal(got[0], full[0][2:5]) and len(opened) == 2
    with pytest.raises(CheckpointError, match="not a consecutive range of the 12 experts"):
        read_packed(out, 1, "w13", experts=range(10, 13))


def test_masked_weight_is_refused_by_other_modes(packed: tuple[str, Path]) -> None:
    """A chord-packed grouped weight comes back as a chord_kernels PackedWeight that only its own
    mode's entry point takes (the bytes are the indexed tiles; the record is what differs)."""
    name, out = packed
    weight = read_packed(out, 2, "w2")
    assert isinstance(weight, PackedWeight)
    assert (weight.layout, weight.family, weight.mode, weight.num_experts) == (name, "grouped", name, EXPERTS)
    assert check_weight(weight, mode=name) is weight  # shapes and record fit the grouped entry point
    with pytest.raises(ChordLayoutError, match=rf"chord_kernels\.indexed\.gemm needs a weight packed with "
                                               rf"family in \['indexed'\], got .*mode={name}"):
        check_weight(weight)
    other = "masked" if name == "contiguous" else "contiguous"
    with pytest.raises(ChordLayoutError, match=rf"mode in \['{other}'\], got .*mode={name}"):
        check_weight(weight, mode=other, what=f"chord_kernels.grouped.{other}")
    # The same bytes as the indexed layout's tiles, under another record.
    indexed = get_layout("indexed").pack(*unpack(weight), weight.profile)
    assert torch.equal(indexed.tensors["tiles"], weight.tensors["tiles"])


def test_verify_names_a_relabelled_layout(source: Path, tmp_path: Path) -> None:
    """A contiguous checkpoint whose config.json was relabelled masked fails verify, naming both."""
    out = convert(source, tmp_path / "out", "contiguous").output
    config = json.loads((out / "config.json").read_text())
    block = config["chord_pack"]
    block["layout"], block["mode"] = "masked", "masked"
    for spec in block["projections"].values():
        spec["packed_weight"]["chord.layout"] = "masked"  # its chord.mode still says contiguous
    (out / "config.json").write_text(json.dumps(config))
    problems = verify(out, use_recorded_source=False).problems
    assert "chord_pack.projections.w13.packed_weight says mode 'contiguous' but the block says 'masked'" in problems
    assert any("header metadata chord_pack does not match" in p for p in problems)
    refused = [p for p in problems if "chord-kernels could not unpack it (ChordLayoutError" in p]
    assert len(refused) == 2 * 2 * 4  # every range of every projection
    assert "mode in ['masked']" in refused[0] and "mode=contiguous" in refused[0]
    res = runner.invoke(app, ["verify", str(out)])
    assert res.exit_code == 1 and "says mode 'contiguous' but the block says 'masked'" in res.output

    config["chord_pack"]["expert_ranges"] = [[0, 2], [3, 5], [6, 8]]  # experts 9..11 would go unchecked
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(ChordPackError, match=r"expert_ranges \[\[0, 2\], \[3, 5\], \[6, 8\]\] do not cover "
                                             r"experts 0\.\.11 in order, each once"):
        verify(out)
    config["chord_pack"]["schema_version"] = 3
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(ChordPackError, match="schema_version is 3; this chord-pack reads 1 and 2"):
        verify(out)


@pytest.mark.parametrize(("layout", "per_tensor", "ranges"), [
    ("indexed", 5, [[0, 4], [5, 9], [10, 11]]),  # any expert-separable layout, a short last range
    ("masked", EXPERTS, None),  # all experts per tensor: schema 1
])
def test_experts_per_tensor(source: Path, tmp_path: Path, layout: str, per_tensor: int, ranges) -> None:
    result = convert(source, tmp_path / "out", layout, experts_per_tensor=per_tensor, expert_chunk_bytes=30_000)
    block = json.loads((result.output / "config.json").read_text())["chord_pack"]
    assert block.get("expert_ranges") == ranges and block["schema_version"] == (1 if ranges is None else 2)
    assert result.peak_held_bytes <= result.plan.memory_bound
    assert verify(result.output).ok
    assert_moe_equal(source, result.output, 1)
    if ranges is None:
        with pytest.raises(CheckpointError, match="holds all 12 experts in each packed tensor"):
            read_packed(result.output, 1, "w13", experts=range(0, 6))
    with pytest.raises(ChordPackError, match="experts_per_tensor: expected a positive number"):
        convert(source, tmp_path / "bad", layout, experts_per_tensor=0)


def test_cli_converts_masked_in_expert_ranges(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "masked"
    res = runner.invoke(app, ["convert", str(source), "--layout", "masked", "--profile", "h200_tp8",
                              "--experts-per-tensor", "6", "--output", str(out)])
    assert res.exit_code == 0, res.output
    assert "layout masked/h200_tp8, 2 expert ranges of 6" in res.output
    assert json.loads((out / "config.json").read_text())["chord_pack"]["expert_ranges"] == [[0, 5], [6, 11]]


def test_multi_tensor_layout_in_expert_ranges_survives_an_interrupt(source: Path, tmp_path: Path) -> None:
    """``reference`` has two tensors per projection: each range is held until both are written
    (they may straddle shards), and a resumed run redoes only the unfinished shards."""
    from test_convert import StopAfter

    from chord_pack.convert import partial_dir

    out = tmp_path / "out"
    args = {"experts_per_tensor": 5, "max_shard_bytes": 60_000, "expert_chunk_bytes": 20_000, "copy_chunk": 4096}
    with pytest.raises(KeyboardInterrupt):
        convert(source, out, "reference", progress=StopAfter(3), **args)
    kept = sorted(p.name for p in partial_dir(out).glob("*.safetensors"))
    result = convert(source, out, "reference", resume=True, **args)
    assert result.reused_shards == kept and len(kept) == 3 and len(result.shards) > 4
    spec = result.plan.projections["w13"]
    assert not spec.streamed and spec.experts_per_chunk < spec.experts_per_tensor == 5
    assert 0 < result.peak_held_bytes <= result.plan.memory_bound < spec.source_bytes
    assert verify(out).ok
    assert_moe_equal(source, out, 1)
    assert_moe_equal(source, out, 2)
