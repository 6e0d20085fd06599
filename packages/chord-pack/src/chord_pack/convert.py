"""``chord-pack convert``: stream a source checkpoint into a kernel-ready one, atomically.

Output is built in a hidden sibling directory (``.<name>.chord-pack-partial``) and renamed into
place only when every shard, the index, config.json and the card are written. Each shard is
written under a temporary name and renamed once complete; a journal records finished shards
with their sha256, so ``resume=True`` skips them (after re-hashing) and redoes the rest. A
failed run never touches the source and never leaves an output that looks complete.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import torch

from chord_kernels.packed import get_layout
from chord_kernels.packed import pack as ck_pack
from chord_pack.card import model_card
from chord_pack.detect import CHORD_FORMAT, detect, load_json
from chord_pack.errors import CheckpointError, ChordPackError, OutputError
from chord_pack.plan import (
    DEFAULT_SHARD_BYTES,
    EXPERT_CHUNK_BYTES,
    CopyItem,
    PackedItem,
    Plan,
    ProjectionSpec,
    Shard,
    make_plan,
)
from chord_pack.progress import NullProgress, Progress
from chord_pack.source import INDEX_NAME, Source, resolve
from chord_pack.st import (
    COPY_CHUNK_BYTES,
    DTYPE_NAMES,
    DTYPES,
    Entry,
    ShardWriter,
    iter_raw,
    read_tensor,
    sha256_file,
    tensor_bytes,
)

JOURNAL = ".chord-pack-journal.json"
SKIP_FILES = {"config.json", INDEX_NAME, "README.md", JOURNAL}


def partial_dir(output: Path) -> Path:
    """Where an unfinished conversion into ``output`` lives."""
    return output.parent / f".{output.name}.chord-pack-partial"


@dataclass
class ConvertResult:
    output: Path
    plan: Plan
    shards: dict[str, dict]
    reused_shards: list[str] = field(default_factory=list)
    peak_held_bytes: int = 0


class _Ledger:
    """Counts the tensor bytes the converter holds, to check the stated memory bound."""

    def __init__(self) -> None:
        self.held = 0
        self.peak = 0

    def hold(self, n: int) -> None:
        self.held += n
        self.peak = max(self.peak, self.held)

    def release(self, n: int) -> None:
        self.held -= n


def source_digest_key(layer: int, src_proj: str) -> str:
    return f"layers.{layer}.{src_proj}"


def load_experts(plan: Plan, layer: int, spec: ProjectionSpec, e0: int, e1: int,
                 hashers: dict[str, hashlib._Hash] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Stacked source of experts ``[e0, e1)`` of one projection: packed ``[e, N, K/8]`` int32 and
    scales ``[e, N, K/32]`` bf16 (gate rows above up rows for w13).

    ``hashers`` (one per source projection), fed in expert order with each expert's weight_packed
    then weight_scale bytes, give the digests that ``verify`` recomputes from the packed output.
    """
    packed = torch.empty(e1 - e0, spec.n, spec.k // 8, dtype=torch.int32)
    scales = torch.empty(e1 - e0, spec.n, spec.k // 32, dtype=torch.bfloat16)
    rows = spec.n // len(spec.sources)
    for i, src in enumerate(spec.sources):
        sl = slice(i * rows, (i + 1) * rows)
        for e in range(e0, e1):
            path, info = plan.expert_sources[(layer, src, e, "weight_packed")]
            got_p = read_tensor(path, info, out=packed[e - e0, sl])
            path, info = plan.expert_sources[(layer, src, e, "weight_scale")]
            got_s = read_tensor(path, info, out=scales[e - e0, sl])
            if hashers is not None:
                hashers[src].update(tensor_bytes(got_p))
                hashers[src].update(tensor_bytes(got_s))
            path, info = plan.expert_sources[(layer, src, e, "weight_shape")]
            shape = read_tensor(path, info).tolist()
            if shape != [rows, spec.k]:
                raise CheckpointError(
                    f"{path}: tensor {info.name} says {shape} but weight_packed/weight_scale are "
                    f"[N={rows}, K={spec.k}]"
                )
    return packed, scales


def _specs_of(tensors: dict[str, torch.Tensor]) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {k: (DTYPE_NAMES.get(t.dtype, str(t.dtype)), tuple(t.shape)) for k, t in tensors.items()}


def _pack_projection(plan: Plan, layer: int, spec: ProjectionSpec, ledger: _Ledger
                     ) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Pack one projection of one MoE layer, ``spec.experts_per_chunk`` experts at a time."""
    e_count, step = spec.num_experts, spec.experts_per_chunk
    hashers = {src: hashlib.sha256() for src in spec.sources}
    out: dict[str, torch.Tensor] | None = None
    chunk_bytes = spec.source_bytes // e_count
    for e0 in range(0, e_count, step):
        e1 = min(e_count, e0 + step)
        ledger.hold(chunk_bytes * (e1 - e0))
        packed, scales = load_experts(plan, layer, spec, e0, e1, hashers)
        pw = ck_pack(plan.layout, packed, scales, plan.profile, **plan.options)
        del packed, scales
        ledger.release(chunk_bytes * (e1 - e0))
        meta = {**pw.metadata(), "chord.num_experts": str(e_count)}
        if meta != spec.metadata:
            raise ChordPackError(f"layout {plan.layout!r} packed layer {layer} {spec.proj} with metadata "
                                 f"{pw.metadata()}, its shape probe gave {spec.metadata}")
        if step == e_count:
            out = {k: t.cpu().contiguous() for k, t in pw.tensors.items()}
            ledger.hold(spec.packed_bytes)
        else:
            if out is None:
                out = {k: torch.empty(shape, dtype=DTYPES[dtype]) for k, (dtype, shape) in spec.tensors.items()}
                ledger.hold(spec.packed_bytes)
            for key, t in pw.tensors.items():
                out[key][e0:e1].copy_(t)
        del pw
    if out is None or _specs_of(out) != spec.tensors:
        raise ChordPackError(
            f"layout {plan.layout!r} packed layer {layer} {spec.proj} into "
            f"{None if out is None else _specs_of(out)}, but its shape probe gave {spec.tensors}"
        )
    return out, {source_digest_key(layer, src): h.hexdigest() for src, h in hashers.items()}


def _stream_projection(plan: Plan, layer: int, spec: ProjectionSpec, writer: ShardWriter,
                       ledger: _Ledger, progress: Progress) -> dict[str, str]:
    """Pack a single-tensor projection chunk by chunk, writing each packed chunk at once."""
    ((key, (dtype, shape)),) = spec.tensors.items()
    e_count, step = spec.num_experts, spec.experts_per_chunk
    hashers = {src: hashlib.sha256() for src in spec.sources}
    src_per_expert, out_per_expert = spec.source_bytes // e_count, spec.packed_bytes // e_count
    for e0 in range(0, e_count, step):
        e1 = min(e_count, e0 + step)
        ledger.hold((src_per_expert + out_per_expert) * (e1 - e0))
        packed, scales = load_experts(plan, layer, spec, e0, e1, hashers)
        pw = ck_pack(plan.layout, packed, scales, plan.profile, **plan.options)
        del packed, scales
        t = pw.tensors.get(key)
        meta = {**pw.metadata(), "chord.num_experts": str(e_count)}
        want = (dtype, (e1 - e0, *shape[1:]) if step < e_count else shape)
        if t is None or len(pw.tensors) != 1 or _specs_of({key: t})[key] != want or meta != spec.metadata:
            raise ChordPackError(
                f"layout {plan.layout!r} packed experts {e0}..{e1 - 1} of layer {layer} {spec.proj} into "
                f"{_specs_of(pw.tensors)} / {pw.metadata()}; expected {key}: {want} / {spec.metadata}"
            )
        writer.write_bytes(tensor_bytes(t.cpu()))
        progress.advance(out_per_expert * (e1 - e0))
        del pw, t
        ledger.release((src_per_expert + out_per_expert) * (e1 - e0))
    return {source_digest_key(layer, src): h.hexdigest() for src, h in hashers.items()}


def _write_json_atomic(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def _open_partial(plan: Plan, partial: Path, resume: bool, progress: Progress) -> dict:
    fingerprint = plan.fingerprint()
    journal_path = partial / JOURNAL
    if partial.exists():
        if not resume:
            raise OutputError(
                f"{partial} holds an interrupted conversion; pass --resume to continue it or delete it"
            )
        if not journal_path.is_file():
            raise OutputError(f"{partial} has no {JOURNAL}; it was not made by chord-pack, delete it")
        journal = json.loads(journal_path.read_text())
        if journal.get("fingerprint") != fingerprint:
            raise OutputError(
                f"{partial} was started with other settings or another source (layout, profile, "
                "versions, shard size or index differ); delete it or rerun with the same settings"
            )
        finished = {}
        for name, rec in journal.get("finished", {}).items():
            path = partial / name
            if path.is_file() and path.stat().st_size == rec["size"] and sha256_file(path) == rec["sha256"]:
                finished[name] = rec
            else:
                progress.note(f"{name}: damaged or missing in the partial output, redoing it")
                path.unlink(missing_ok=True)
        journal["finished"] = finished
        return journal
    partial.mkdir(parents=True)
    journal = {"fingerprint": fingerprint, "finished": {}, "source_digests": {}}
    _write_json_atomic(journal_path, journal)
    return journal


def converted_config(plan: Plan, shards: dict[str, dict], digests: dict[str, str]) -> dict:
    """Source config.json with the chord-packed format marker and the ``chord_pack`` block."""
    config = copy.deepcopy(plan.config)
    node = config
    for key in plan.info.quant_config_path:
        node = node[key]
    node["format"] = CHORD_FORMAT
    for group in (node.get("config_groups") or {}).values():
        if "format" in group:
            group["format"] = CHORD_FORMAT
    block = plan.static_block()
    if not plan.source.repo_id:
        # Lets `verify` find a local source by itself. Kept out of the shard headers and stripped
        # from config.json on upload (chord_pack.upload), so no local path is ever published.
        block["source"]["local_path"] = str(plan.source.path.resolve())
    block["shards"] = shards
    block["source_digests"] = dict(sorted(digests.items()))
    config["chord_pack"] = block
    return config


def shard_metadata(plan: Plan) -> dict[str, str]:
    return {"format": "pt", "chord_pack": json.dumps(plan.static_block(), sort_keys=True)}


def convert(
    source: Source | str | os.PathLike,
    output: str | Path,
    layout: str,
    profile: str | None = None,
    options: dict | None = None,
    *,
    revision: str | None = None,
    resume: bool = False,
    max_shard_bytes: int = DEFAULT_SHARD_BYTES,
    copy_chunk: int = COPY_CHUNK_BYTES,
    expert_chunk_bytes: int = EXPERT_CHUNK_BYTES,
    progress: Progress | None = None,
) -> ConvertResult:
    """Convert ``source`` into ``output`` with chord-kernels layout ``layout``; see the module doc."""
    progress = progress or NullProgress()
    get_layout(layout)  # an unsupported layout fails before any download or read
    output = Path(output)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise OutputError(f"output {output} already exists and is not empty; choose another --output")
    if not isinstance(source, Source):
        src = os.fspath(source)
        if not Path(src).is_dir():  # Hub: refuse a wrong checkpoint before downloading its shards
            meta = resolve(src, revision, metadata_only=True)
            config = load_json(meta.path / "config.json")
            detect(config, load_json(meta.path / INDEX_NAME).get("weight_map") or {})
            revision = meta.revision or revision
        source = resolve(src, revision)
    plan = make_plan(source, layout, profile, options, max_shard_bytes=max_shard_bytes,
                     copy_chunk=copy_chunk, expert_chunk_bytes=expert_chunk_bytes)
    partial = partial_dir(output)
    journal = _open_partial(plan, partial, resume, progress)
    finished: dict[str, dict] = journal["finished"]
    reused = [s.name for s in plan.shards if s.name in finished]
    digests: dict[str, str] = dict(journal.get("source_digests", {}))
    ledger = _Ledger()
    metadata = shard_metadata(plan)

    progress.start(f"convert → {plan.layout}/{plan.profile}", plan.total_bytes)
    for shard in plan.shards:
        if shard.name in finished:
            progress.note(f"{shard.name}: already complete (sha256 checked), kept")
            progress.advance(shard.nbytes)
    # Which items of each projection still need writing, so a projection is packed only if needed.
    needed: dict[tuple[int, str], int] = {}
    for shard in plan.shards:
        if shard.name not in finished:
            for item in shard.items:
                if isinstance(item, PackedItem):
                    needed[(item.layer, item.proj)] = needed.get((item.layer, item.proj), 0) + 1

    current: tuple[tuple[int, str], dict[str, torch.Tensor]] | None = None
    for shard in plan.shards:
        if shard.name in finished:
            continue
        sha, size, current = _write_shard(
            plan, shard, partial, metadata, needed, current, digests, ledger, progress)
        finished[shard.name] = {"sha256": sha, "size": size}
        journal["source_digests"] = digests
        _write_json_atomic(partial / JOURNAL, journal)
        progress.shard_done(shard.name)

    shards = {s.name: finished[s.name] for s in plan.shards}
    _finish(plan, partial, output, shards, digests)
    return ConvertResult(output, plan, shards, reused, ledger.peak)


def _write_shard(plan, shard: Shard, partial: Path, metadata, needed, current, digests, ledger, progress):
    entries = [Entry(i.name, i.dtype, i.shape) for i in shard.items]
    tmp = partial / (shard.name + ".incomplete")
    writer = ShardWriter(tmp, entries, metadata)
    try:
        for item in shard.items:
            if isinstance(item, CopyItem):
                writer.begin(item.name)
                for chunk in iter_raw(item.src_file, item.src, plan.copy_chunk):
                    ledger.hold(len(chunk))
                    writer.write_bytes(chunk)
                    ledger.release(len(chunk))
                    progress.advance(len(chunk))
                continue
            key = (item.layer, item.proj)
            spec = plan.projections[item.proj]
            if spec.streamed:
                writer.begin(item.name)
                digests.update(_stream_projection(plan, item.layer, spec, writer, ledger, progress))
                continue
            if current is None or current[0] != key:
                if current is not None:
                    ledger.release(plan.projections[current[0][1]].packed_bytes)
                    current = None
                tensors, new_digests = _pack_projection(plan, item.layer, plan.projections[item.proj], ledger)
                digests.update(new_digests)
                current = (key, tensors)
            writer.write_tensor(item.name, current[1][item.key])
            progress.advance(item.nbytes)
            needed[key] -= 1
            if needed[key] == 0:
                ledger.release(plan.projections[item.proj].packed_bytes)
                current = None
        sha = writer.close()
    except BaseException:
        writer.abort()
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, partial / shard.name)
    return sha, writer.size, current


def _finish(plan: Plan, partial: Path, output: Path, shards: dict[str, dict], digests: dict[str, str]) -> None:
    missing = [
        source_digest_key(layer, src)
        for layer in plan.info.moe_layers for spec in plan.projections.values() for src in spec.sources
        if source_digest_key(layer, src) not in digests
    ]
    if missing:
        raise ChordPackError(f"internal: no source digest recorded for {missing[:3]}; rerun without --resume")
    weight_map = {item.name: shard.name for shard in plan.shards for item in shard.items}
    index = {"metadata": {"total_size": plan.total_bytes, "format": CHORD_FORMAT}, "weight_map": weight_map}
    _write_json_atomic(partial / INDEX_NAME, index)
    _write_json_atomic(partial / "config.json", converted_config(plan, shards, digests))
    src_root = plan.source.path
    for path in sorted(src_root.rglob("*")):
        rel = path.relative_to(src_root)
        if (not path.is_file() or rel.parts[0].startswith(".") or path.suffix == ".safetensors"
                or rel.as_posix() in SKIP_FILES):
            continue
        (partial / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, partial / rel)  # follows HF-cache symlinks: the output is standalone
    model_card(plan).save(partial / "README.md")
    (partial / JOURNAL).unlink()
    if output.exists():
        output.rmdir()  # empty (checked at the start); rename needs the name free
    os.replace(partial, output)
