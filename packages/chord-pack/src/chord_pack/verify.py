"""``chord-pack verify``: prove a converted checkpoint is intact and equal to its source.

Checks, in order: the ``chord_pack`` block and format marker in config.json; every shard's size
and sha256 against the block; every shard header's mirrored block; the index against the
headers. Then, one projection of one MoE layer at a time, the packed tensors are unpacked with
chord-kernels and compared with the source: always against the per-projection source digests
recorded at conversion (sha256 over each expert's ``weight_packed`` then ``weight_scale`` bytes),
and, when the source checkpoint is available, expert by expert against the source tensors
themselves, plus every non-expert tensor byte for byte.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from chord_kernels.packed import PackedWeight
from chord_kernels.packed import unpack as ck_unpack
from chord_pack.detect import CHORD_FORMAT, EXPERT_RE, load_json, quantization_config
from chord_pack.errors import ChordPackError, SourceError, VerifyError
from chord_pack.plan import SCHEMA_VERSION
from chord_pack.progress import NullProgress, Progress
from chord_pack.source import INDEX_NAME, Source, resolve
from chord_pack.st import Header, iter_raw, read_header, read_tensor, tensor_bytes

_RUN_KEYS = ("shards", "source_digests")


@dataclass
class VerifyReport:
    path: Path
    problems: list[str] = field(default_factory=list)
    shards_checked: int = 0
    projections_checked: int = 0
    experts_compared: int = 0
    tensors_compared: int = 0
    source: Source | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_if_failed(self) -> VerifyReport:
        if self.problems:
            raise VerifyError(str(self.path), self.problems)
        return self


def _find_source(block: dict, source: Source | str | None, use_recorded: bool) -> Source | None:
    if isinstance(source, Source):
        return source
    if isinstance(source, str):
        return resolve(source)
    if not use_recorded:
        return None
    rec = block.get("source") or {}
    if rec.get("local_path") and Path(rec["local_path"]).is_dir():
        return Source(Path(rec["local_path"]))
    if rec.get("repo_id"):
        try:  # only a copy already in the HF cache: verify never downloads a whole model
            return resolve(rec["repo_id"], rec.get("revision"), cache_only=True)
        except SourceError:
            return None
    return None


def verify(path: str | Path, *, source: Source | str | None = None, use_recorded_source: bool = True,
           progress: Progress | None = None) -> VerifyReport:
    """Check ``path``; returns a report (``report.ok``), raising only if it is not a chord-pack output."""
    progress = progress or NullProgress()
    root = Path(path)
    report = VerifyReport(root)
    problems = report.problems
    config = load_json(root / "config.json")
    block = config.get("chord_pack")
    if not isinstance(block, dict):
        raise VerifyError(str(root), ["config.json has no chord_pack block: not a chord-pack output"])
    if block.get("schema_version") != SCHEMA_VERSION:
        raise VerifyError(str(root), [
            f"chord_pack.schema_version is {block.get('schema_version')!r}; this chord-pack reads {SCHEMA_VERSION}"
        ])
    qc, where = quantization_config(config)
    if qc is None or qc.get("format") != CHORD_FORMAT:
        problems.append(f"config.json {'.'.join(where) or 'quantization_config'}.format is "
                        f"{(qc or {}).get('format')!r}, expected {CHORD_FORMAT!r}")
    static = {k: v for k, v in block.items() if k not in _RUN_KEYS}
    if "local_path" in static.get("source", {}):  # config.json only, never in shard headers
        static["source"] = {k: v for k, v in static["source"].items() if k != "local_path"}
    shards: dict[str, dict] = block.get("shards") or {}
    index = load_json(root / INDEX_NAME)
    weight_map: dict[str, str] = index.get("weight_map") or {}
    if set(weight_map.values()) != set(shards):
        problems.append(f"{INDEX_NAME} names shards {sorted(set(weight_map.values()))} but the "
                        f"chord_pack block lists {sorted(shards)}")

    headers: dict[str, Header] = {}
    progress.start("verify: hashing shards", sum(int(r.get("size", 0)) for r in shards.values()))
    for name, rec in sorted(shards.items()):
        shard = root / name
        if not shard.is_file():
            problems.append(f"{shard}: missing")
            continue
        size = shard.stat().st_size
        h = hashlib.sha256()
        with shard.open("rb") as f:
            while data := f.read(16 * 1024 * 1024):
                h.update(data)
                progress.advance(len(data))
        if size != rec.get("size"):
            problems.append(f"{shard}: {size} bytes, config.json records {rec.get('size')} (truncated?)")
        if h.hexdigest() != rec.get("sha256"):
            problems.append(f"{shard}: sha256 {h.hexdigest()} does not match the recorded {rec.get('sha256')}")
        try:
            header = read_header(shard)
        except ChordPackError as exc:
            problems.append(str(exc))
            continue
        headers[name] = header
        mirrored = header.metadata.get("chord_pack")
        if mirrored is None or json.loads(mirrored) != static:
            problems.append(f"{shard}: header metadata chord_pack does not match config.json's chord_pack block")
        report.shards_checked += 1
    for tensor, shard_name in weight_map.items():
        if shard_name in headers and tensor not in headers[shard_name].tensors:
            problems.append(f"{root / shard_name}: tensor {tensor} is in {INDEX_NAME} but not in the file")

    src = _find_source(block, source, use_recorded_source)
    report.source = src
    src_map: dict[str, str] = {}
    src_headers: dict[str, Header] = {}
    if src is not None:
        src_map = (load_json(src.path / INDEX_NAME).get("weight_map") or {})

    def src_tensor(name: str):
        fname = src_map[name]
        if fname not in src_headers:
            src_headers[fname] = read_header(src.path / fname)
        return src.path / fname, src_headers[fname].tensors[name]

    def out_tensor(name: str) -> torch.Tensor:
        shard_name = weight_map.get(name)
        if shard_name is None:
            raise ChordPackError(f"tensor {name} is missing from {INDEX_NAME}")
        if shard_name not in headers:
            raise ChordPackError(f"tensor {name}: its shard {shard_name} is unreadable")
        info = headers[shard_name].tensors.get(name)
        if info is None:
            raise ChordPackError(f"{root / shard_name}: tensor {name} is missing")
        return read_tensor(root / shard_name, info)

    digests = block.get("source_digests") or {}
    pattern = block["tensor_names"]
    prefix = block.get("tensor_prefix", "")
    e_count = int(block["num_experts"])
    for layer in block["moe_layers"]:
        for proj, spec in block["projections"].items():
            try:
                tensors = {key: out_tensor(pattern.format(layer=layer, proj=proj, tensor=key))
                           for key in spec["tensors"]}
                pw = PackedWeight.from_state_dict(spec["packed_weight"], tensors)
                packed, scales = ck_unpack(pw)
            except ChordPackError as exc:
                problems.append(f"layer {layer} {proj}: {exc}")
                continue
            except Exception as exc:  # chord-kernels refuses a damaged weight
                problems.append(f"layer {layer} {proj}: chord-kernels could not unpack it "
                                f"({type(exc).__name__}: {exc})")
                continue
            n, k = int(spec["n"]), int(spec["k"])
            if tuple(packed.shape) != (e_count, n, k // 8) or tuple(scales.shape) != (e_count, n, k // 32):
                problems.append(f"layer {layer} {proj}: unpacked to {list(packed.shape)} / {list(scales.shape)}, "
                                f"expected [{e_count}, {n}, {k // 8}] / [{e_count}, {n}, {k // 32}]")
                continue
            rows = n // len(spec["sources"])
            for i, sproj in enumerate(spec["sources"]):
                sl = slice(i * rows, (i + 1) * rows)
                h = hashlib.sha256()
                for e in range(e_count):
                    h.update(tensor_bytes(packed[e, sl]))
                    h.update(tensor_bytes(scales[e, sl]))
                key = f"layers.{layer}.{sproj}"
                if digests.get(key) != h.hexdigest():
                    problems.append(f"layer {layer} {sproj}: unpacked codes/scales do not match the "
                                    "source digest recorded at conversion")
                if src is None:
                    continue
                for e in range(e_count):
                    base = f"{prefix}model.layers.{layer}.mlp.experts.{e}.{sproj}."
                    for kind, got in (("weight_packed", packed[e, sl]), ("weight_scale", scales[e, sl])):
                        try:
                            want = read_tensor(*src_tensor(base + kind))
                        except (KeyError, ChordPackError) as exc:
                            problems.append(f"source tensor {base + kind}: {exc}")
                            continue
                        if not torch.equal(want.view(-1).view(torch.uint8), got.contiguous().view(-1).view(torch.uint8)):
                            problems.append(f"layer {layer} expert {e} {sproj}.{kind}: unpacked tensor differs "
                                            f"from source {src_map.get(base + kind)}")
                    report.experts_compared += 1
            report.projections_checked += 1
            del packed, scales, tensors, pw

    if src is not None:
        for name in src_map:
            if EXPERT_RE.match(name):
                continue
            shard_name = weight_map.get(name)
            if shard_name is None or shard_name not in headers or name not in headers[shard_name].tensors:
                problems.append(f"non-expert tensor {name} from the source is missing from the output")
                continue
            out_info = headers[shard_name].tensors[name]
            try:
                spath, sinfo = src_tensor(name)
            except (KeyError, ChordPackError) as exc:
                problems.append(f"source tensor {name}: {exc}")
                continue
            if (out_info.dtype, out_info.shape) != (sinfo.dtype, sinfo.shape):
                problems.append(f"{root / shard_name}: tensor {name} is {out_info.dtype} {list(out_info.shape)}, "
                                f"source is {sinfo.dtype} {list(sinfo.shape)}")
                continue
            a, b = hashlib.sha256(), hashlib.sha256()
            for chunk in iter_raw(root / shard_name, out_info):
                a.update(chunk)
            for chunk in iter_raw(spath, sinfo):
                b.update(chunk)
            if a.digest() != b.digest():
                problems.append(f"{root / shard_name}: tensor {name} is not byte-identical to the source")
            report.tensors_compared += 1
    return report
