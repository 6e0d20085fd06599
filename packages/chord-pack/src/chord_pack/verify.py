"""``chord-pack verify``: prove a converted checkpoint is intact and equal to its source.

Checks, in order: the ``chord_pack`` block and format marker in config.json; every shard's size
and sha256 against the block; every shard header's mirrored block; the index against the
headers. Then, one projection of one MoE layer at a time (one expert range at a time when the
tensors are cut by expert range), the packed tensors are unpacked with chord-kernels, which
refuses a weight whose record (family, mode, layout version) is not its layout's, and hashed:
each source projection's digest (sha256 over each expert's ``weight_packed`` then
``weight_scale`` bytes, see :mod:`chord_pack.names`) must equal the one recorded at conversion.

When the source checkpoint is available (``source=``, or the recorded local path or Hub
revision already on this machine: verify itself never downloads), it is checked too: first that
it has the tensors the conversion used (else one message: it is another checkpoint), then that
its expert digests equal the recorded ones (a mismatch means the source changed after the
conversion, or the output was made from stale shards), and that every non-expert tensor is
byte-identical. The two digests meet at the recorded one, so the unpacked experts equal the
source's. With ``compare_experts`` a mismatch is also pinned down to the experts that differ.
Without the source, the report says what could not be checked.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from chord_kernels.packed import unpack as ck_unpack
from chord_pack.detect import CHORD_FORMAT, load_json, quantization_config, weight_map_of
from chord_pack.errors import ChordPackError, SourceError, VerifyError
from chord_pack.load import block_ranges, block_tensor_name, packed_weight
from chord_pack.names import (
    DIGEST_KINDS,
    EXPERT_RE,
    expert_name,
    experts_label,
    source_digest_key,
    source_digest_names,
)
from chord_pack.plan import SCHEMA_VERSIONS
from chord_pack.progress import NullProgress, Progress
from chord_pack.source import INDEX_NAME, Source, resolve
from chord_pack.st import Header, TensorInfo, read_header, read_tensor, sha256_tensors, tensor_bytes

_RUN_KEYS = ("shards", "source_digests")
_EXAMPLES = 3
_BLOCK_KEYS = (("num_experts", int, "an integer"), ("moe_layers", list, "a list of layers"),
               ("tensor_names", str, "a name pattern"), ("projections", dict, "an object"),
               ("shards", dict, "an object"))
_PROJECTION_KEYS = (("sources", list), ("n", int), ("k", int), ("tensors", dict), ("packed_weight", dict))


def _block_problems(block: dict) -> list[str]:
    """What in ``block`` is missing or of the wrong type for verify to go on."""
    bad = [f"chord_pack.{key} is {block.get(key)!r:.80}, expected {what}"
           for key, kind, what in _BLOCK_KEYS if not isinstance(block.get(key), kind)]
    for proj, spec in (block.get("projections") if isinstance(block.get("projections"), dict) else {}).items():
        missing = [key for key, kind in _PROJECTION_KEYS if not isinstance((spec or {}).get(key), kind)]
        if not isinstance(spec, dict) or missing:
            bad.append(f"chord_pack.projections.{proj} lacks {', '.join(missing)} or has the wrong type")
    if isinstance(block.get("shards"), dict) and not all(isinstance(r, dict) for r in block["shards"].values()):
        bad.append("chord_pack.shards: every shard's record must be an object with sha256 and size")
    return bad


@dataclass
class VerifyReport:
    path: Path
    problems: list[str] = field(default_factory=list)
    shards_checked: int = 0
    projections_checked: int = 0
    experts_compared: int = 0
    """Experts whose source digest was checked against the source itself."""
    tensors_compared: int = 0
    """Non-expert tensors compared byte for byte with the source."""
    source: Source | None = None
    unchecked: str | None = None
    """What could not be checked (no source on this machine), in one sentence; None if nothing."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_if_failed(self) -> VerifyReport:
        if self.problems:
            raise VerifyError(str(self.path), self.problems)
        return self


def _some(names: list[str]) -> str:
    return ", ".join(names[:_EXAMPLES]) + (", ..." if len(names) > _EXAMPLES else "")


def _find_source(block: dict, source: Source | str | None, use_recorded: bool,
                 progress: Progress) -> tuple[Source | None, str]:
    """The source to compare with, or None and why not."""
    if isinstance(source, Source):
        return source, ""
    if isinstance(source, str):
        return resolve(source, progress=progress), ""
    if not use_recorded:
        return None, "no source was given"
    rec = block.get("source") or {}
    if rec.get("local_path"):
        if Path(rec["local_path"]).is_dir():
            return Source(Path(rec["local_path"])), ""
        return None, f"the recorded source {rec['local_path']} is not on this machine"
    if rec.get("repo_id"):
        where = f"{rec['repo_id']}@{rec.get('revision') or 'main'}"
        try:  # only a copy already in the HF cache: verify never downloads a whole model
            return resolve(rec["repo_id"], rec.get("revision"), cache_only=True), ""
        except SourceError:
            return None, f"the recorded source {where} is not in the Hugging Face cache"
    return None, "config.json records no source"


def verify(path: str | Path, *, source: Source | str | None = None, use_recorded_source: bool = True,
           compare_experts: bool = True, progress: Progress | None = None) -> VerifyReport:
    """Check ``path``; returns a report (``report.ok``), raising only if it is not a chord-pack output.

    ``source`` names the source to compare with (a Hub repo id is downloaded); otherwise the
    recorded one is used when it is on this machine, unless ``use_recorded_source`` is False.
    ``compare_experts=False`` (``--no-source``) checks digests only and never names the experts
    that differ.
    """
    progress = progress or NullProgress()
    root = Path(path)
    report = VerifyReport(root)
    problems = report.problems
    if not root.is_dir():
        raise VerifyError(str(root), ["not a directory: verify takes a chord-pack output directory"])
    config = load_json(root / "config.json")
    block = config.get("chord_pack")
    if not isinstance(block, dict):
        raise VerifyError(str(root), ["config.json has no chord_pack block: not a chord-pack output"])
    if block.get("schema_version") not in SCHEMA_VERSIONS:
        raise VerifyError(str(root), [
            f"chord_pack.schema_version is {block.get('schema_version')!r}; this chord-pack reads "
            f"{' and '.join(map(str, SCHEMA_VERSIONS))}"
        ])
    if bad := _block_problems(block):  # nothing below can be checked without these
        raise VerifyError(str(root), bad)
    qc, where = quantization_config(config)
    if qc is None or qc.get("format") != CHORD_FORMAT:
        problems.append(f"config.json {'.'.join(where) or 'quantization_config'}.format is "
                        f"{(qc or {}).get('format')!r}, expected {CHORD_FORMAT!r}")
    for proj, spec in (block.get("projections") or {}).items():
        record = spec.get("packed_weight") or {}
        for field_ in ("layout", "family", "mode", "layout_version", "profile"):
            # (family and mode are absent from blocks written before chord-pack recorded them)
            if field_ in block and str(record.get(f"chord.{field_}")) != str(block[field_]):
                problems.append(f"chord_pack.projections.{proj}.packed_weight says {field_} "
                                f"{record.get(f'chord.{field_}')!r} but the block says {block.get(field_)!r}")
    static = {k: v for k, v in block.items() if k not in _RUN_KEYS}
    if "local_path" in static.get("source", {}):  # config.json only, never in shard headers
        static["source"] = {k: v for k, v in static["source"].items() if k != "local_path"}
    shards: dict[str, dict] = block.get("shards") or {}
    index = load_json(root / INDEX_NAME)
    weight_map = weight_map_of(index, root / INDEX_NAME)
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
        try:
            mirrored = json.loads(header.metadata.get("chord_pack", "null"))
        except ValueError:
            mirrored = None
        if mirrored != static:
            problems.append(f"{shard}: header metadata chord_pack does not match config.json's chord_pack block")
        report.shards_checked += 1
    for tensor, shard_name in weight_map.items():
        if shard_name in headers and tensor not in headers[shard_name].tensors:
            problems.append(f"{root / shard_name}: tensor {tensor} is in {INDEX_NAME} but not in the file")
    # And the other way: a loader that goes by the index would never see a tensor it lacks.
    in_shards = {tensor: name for name, header in headers.items() for tensor in header.tensors}
    if unindexed := [f"{t} (in {name})" for t, name in in_shards.items() if t not in weight_map]:
        problems.append(f"the output's {INDEX_NAME} lacks {len(unindexed)} tensors its shards hold: {_some(unindexed)}")
    total = (index.get("metadata") or {}).get("total_size")
    held = sum(info.nbytes for header in headers.values() for info in header.tensors.values())
    if len(headers) == len(shards) and total is not None and total != held:
        problems.append(f"{INDEX_NAME}: metadata.total_size is {total!r}, but the shards hold {held} bytes of tensors")
    tensor_map = {**in_shards, **weight_map}
    """Every output tensor -> its shard (the index, and the headers for what the index lacks)."""

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

    e_count = int(block["num_experts"])
    try:
        ranges = block_ranges(block)
    except ChordPackError as exc:
        raise VerifyError(str(root), [*problems, str(exc)]) from None

    def unpacked(layer: int, proj: str, spec: dict, experts: range | None) -> tuple[torch.Tensor, torch.Tensor]:
        tensors = {key: out_tensor(block_tensor_name(block, layer, proj, key, experts)) for key in spec["tensors"]}
        return ck_unpack(packed_weight(spec, tensors, e_count if experts is None else len(experts)))

    digests = block.get("source_digests")
    if not isinstance(digests, dict) or not digests:
        problems.append("chord_pack.source_digests: none recorded, so the unpacked experts could not be checked")
        digests = None
    damaged: dict[tuple[int, str, str, range | None], str] = {}
    """(layer, proj, source proj, experts) whose unpacked digest is not the recorded one -> that digest."""
    for layer in block["moe_layers"]:
        for proj, spec in block["projections"].items():
            whole = True
            for experts in ranges:
                where = f"layer {layer} {proj}{experts_label(experts)}"
                try:
                    packed, scales = unpacked(layer, proj, spec, experts)
                except ChordPackError as exc:
                    problems.append(f"{where}: {exc}")
                    whole = False
                    continue
                except Exception as exc:  # chord-kernels refuses a damaged or mislabelled weight
                    problems.append(f"{where}: chord-kernels could not unpack it ({type(exc).__name__}: {exc})")
                    whole = False
                    continue
                n, k, count = int(spec["n"]), int(spec["k"]), e_count if experts is None else len(experts)
                if tuple(packed.shape) != (count, n, k // 8) or tuple(scales.shape) != (count, n, k // 32):
                    problems.append(f"{where}: unpacked to {list(packed.shape)} / {list(scales.shape)}, "
                                    f"expected [{count}, {n}, {k // 8}] / [{count}, {n}, {k // 32}]")
                    whole = False
                    continue
                rows = n // len(spec["sources"])
                for i, sproj in enumerate(spec["sources"]):
                    sl = slice(i * rows, (i + 1) * rows)
                    h = hashlib.sha256()
                    for e in range(count):
                        h.update(tensor_bytes(packed[e, sl]))
                        h.update(tensor_bytes(scales[e, sl]))
                    key = source_digest_key(layer, sproj, experts)
                    if digests is not None and key not in digests:
                        problems.append(f"layer {layer} {sproj}{experts_label(experts)}: no source digest recorded "
                                        f"(chord_pack.source_digests lacks {key})")
                    elif digests is not None and digests[key] != h.hexdigest():
                        problems.append(f"layer {layer} {sproj}{experts_label(experts)}: unpacked codes/scales "
                                        "do not match the source digest recorded at conversion")
                        damaged[layer, proj, sproj, experts] = h.hexdigest()
                del packed, scales
            report.projections_checked += whole

    src, why_not = _find_source(block, source, use_recorded_source, progress)
    report.source = src
    packed_names = {block_tensor_name(block, layer, proj, key, experts)
                    for layer in block["moe_layers"] for proj, spec in block["projections"].items()
                    for key in spec["tensors"] for experts in ranges}
    copies = [n for n in tensor_map if n not in packed_names]
    if src is None:
        report.unchecked = (
            f"{why_not}, so the expert digests were checked only against the ones recorded at conversion, "
            f"and {len(copies)} non-expert tensors were not compared with the source"
        )
        return report
    _check_source(report, block, src, tensor_map, headers, copies, damaged, compare_experts, unpacked)
    return report


def _check_source(report: VerifyReport, block: dict, src: Source, weight_map: dict[str, str],
                  headers: dict[str, Header], copies: list[str],
                  damaged: dict[tuple[int, str, str, range | None], str], compare_experts: bool, unpacked) -> None:
    """Compare with the source ``src`` (see the module docstring); findings go to ``report``."""
    problems, root = report.problems, report.path
    src_map = weight_map_of(load_json(src.path / INDEX_NAME), src.path / INDEX_NAME)
    prefix, e_count = block.get("tensor_prefix", ""), int(block["num_experts"])
    layers = block["moe_layers"]
    source_projs = [s for spec in block["projections"].values() for s in spec["sources"]]
    wanted = [name for layer in layers for proj in source_projs
              for name in source_digest_names(prefix, layer, proj, range(e_count))]
    lacks = [n for n in wanted if n not in src_map]
    lacks_copies = [n for n in copies if n not in src_map]
    extra = [n for n in src_map if not EXPERT_RE.match(n) and n not in weight_map]
    if lacks or lacks_copies or extra:
        parts = [f"it lacks {len(names)} of the {total} {what} the conversion used ({_some(names)})"
                 for names, total, what in ((lacks, len(wanted), "expert tensors"),
                                            (lacks_copies, len(copies), "other tensors")) if names]
        if extra:
            parts.append(f"it has {len(extra)} tensors the output lacks ({_some(extra)})")
        problems.append(f"{src.describe()} is not the checkpoint {root} was converted from: {'; '.join(parts)}")
        return

    src_headers: dict[str, Header] = {}

    def at(name: str) -> tuple[Path, TensorInfo]:
        fname = src_map[name]
        if fname not in src_headers:
            src_headers[fname] = read_header(src.path / fname)
        info = src_headers[fname].tensors.get(name)
        if info is None:
            raise ChordPackError(f"{src.path / fname}: tensor {name} is listed in {INDEX_NAME} but missing")
        return src.path / fname, info

    digests = block.get("source_digests") or {}
    ranges = block_ranges(block)
    out_digests = {(layer, sproj, experts): got for (layer, _, sproj, experts), got in damaged.items()}
    stale, wrong_record = [], []
    try:
        for layer in layers:
            for proj in source_projs:
                for experts in ranges:
                    want = digests.get(source_digest_key(layer, proj, experts))
                    if want is None:
                        continue  # already reported: nothing recorded to compare with
                    names = source_digest_names(prefix, layer, proj, experts or range(e_count))
                    got = sha256_tensors(at(n) for n in names)
                    if got != want:
                        # Output and source agreeing with each other, not with the record: the record is wrong.
                        same = out_digests.get((layer, proj, experts)) == got
                        (wrong_record if same else stale).append((layer, proj, experts))
        report.experts_compared += len(layers) * len(source_projs) * e_count
    except ChordPackError as exc:
        problems.append(f"source {src.describe()}: {exc}")
        return
    total = len(layers) * len(source_projs) * len(ranges)
    if stale and len(stale) == total:
        what = "expert projections" if ranges == [None] else "expert ranges"
        problems.append(f"{src.describe()} is not the checkpoint {root} was converted from: none of its "
                        f"{total} {what} match the source digests recorded at conversion")
        return
    for layer, proj, experts in wrong_record:
        problems.append(f"layer {layer} {proj}{experts_label(experts)}: the output and the source {src.describe()} "
                        "agree, so the digest recorded in chord_pack.source_digests is what is wrong")
    for layer, proj, experts in stale:
        problems.append(f"layer {layer} {proj}{experts_label(experts)}: the source {src.describe()} no longer "
                        "matches the digest recorded at conversion (it changed after the conversion: the "
                        "output is stale)")
    for layer, proj, sproj, experts in damaged if compare_experts else ():
        if (layer, sproj, experts) not in stale + wrong_record:  # the source is right, the output not: name the experts
            _name_differing_experts(problems, block, layer, proj, sproj, experts, unpacked, at)

    differ, mismatched = [], []
    for name in copies:
        shard_name = weight_map[name]
        if shard_name not in headers or name not in headers[shard_name].tensors:
            continue  # already reported as missing or unreadable
        out_info = headers[shard_name].tensors[name]
        spath, sinfo = at(name)
        if (out_info.dtype, out_info.shape) != (sinfo.dtype, sinfo.shape):
            mismatched.append(f"{name} ({out_info.dtype} {list(out_info.shape)} vs {sinfo.dtype} {list(sinfo.shape)})")
        elif sha256_tensors([(root / shard_name, out_info)]) != sha256_tensors([(spath, sinfo)]):
            differ.append(name)
        report.tensors_compared += 1
    if mismatched:
        problems.append(f"{len(mismatched)} non-expert tensors differ in dtype or shape from the source: {_some(mismatched)}")
    if differ:
        problems.append(f"{len(differ)} non-expert tensors are not byte-identical to the source: {_some(differ)}")


def _name_differing_experts(problems: list[str], block: dict, layer: int, proj: str, sproj: str,
                            experts: range | None, unpacked, at) -> None:
    spec = block["projections"][proj]
    rows = int(spec["n"]) // len(spec["sources"])
    sl = slice(spec["sources"].index(sproj) * rows, (spec["sources"].index(sproj) + 1) * rows)
    packed, scales = unpacked(layer, proj, spec, experts)
    prefix, differing = block.get("tensor_prefix", ""), []
    for i, e in enumerate(experts or range(int(block["num_experts"]))):
        for kind, got in zip(DIGEST_KINDS, (packed[i, sl], scales[i, sl]), strict=True):
            want = read_tensor(*at(expert_name(prefix, layer, e, sproj, kind)))
            if not torch.equal(want.view(-1).view(torch.uint8), got.contiguous().view(-1).view(torch.uint8)):
                differing.append(f"{e}.{kind}")
    if differing:
        problems.append(f"layer {layer} {sproj}: unpacked data differs from source in {len(differing)} "
                        f"expert tensors: {_some(differing)}")
