"""``chord-pack convert``: stream a source checkpoint into a kernel-ready one, atomically.

Output is built in a hidden sibling directory (``.<name>.chord-pack-partial``) and renamed into
place only when every shard, the index, config.json and the card are written. Each shard is
written under a temporary name and renamed once complete; a journal records finished shards
with their sha256 and the digests of the source they were made from, so ``resume=True`` keeps
the finished shards that are intact and still match the source, and redoes the rest. The source
is only read: the output may not lie inside it. A failure says what failed, where, what was kept
and how to go on; a failed run never leaves an output that looks complete.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from chord_kernels.packed import pack as ck_pack
from chord_pack.card import model_card
from chord_pack.detect import CHORD_FORMAT, detect, load_json, weight_map_of
from chord_pack.errors import ChordPackError, OutputError, os_errors
from chord_pack.names import (
    PACKED_PROJECTIONS,
    expert_name,
    experts_label,
    source_digest_key,
    source_digest_names,
)
from chord_pack.plan import (
    DEFAULT_SHARD_BYTES,
    EXPERT_CHUNK_BYTES,
    CopyItem,
    PackedItem,
    Plan,
    ProjectionSpec,
    Shard,
    check_sizes,
    layout_named,
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
    read_header,
    read_tensor,
    sha256_file,
    sha256_tensors,
    tensor_bytes,
)

JOURNAL = ".chord-pack-journal.json"
SKIP_FILES = {"config.json", INDEX_NAME, "README.md", JOURNAL}
_FIXES = {errno.ENOSPC: "free disk space", errno.EDQUOT: "free disk quota", errno.EACCES: "make it writable",
          errno.EPERM: "make it writable", errno.EROFS: "make it writable"}
"""What to do about a write error before resuming, by errno."""


def partial_dir(output: Path) -> Path:
    """Where an unfinished conversion into ``output`` lives."""
    output = Path(output)
    return output.parent / f".{output.name}.chord-pack-partial"


def default_output(src: str, layout: str) -> Path:
    """Where ``convert`` writes without ``--output``: ``<name>-chord-<layout>`` next to a local
    source (never inside it), or in the working directory for a Hub repo or an HF-cache snapshot."""
    local = Path(src).expanduser()
    if local.is_dir():
        found = resolve(str(local))  # a local directory: no network
        if not found.repo_id:
            here = local.resolve()
            return here.parent / f"{here.name.lstrip('-') or 'checkpoint'}-chord-{layout}"
        src = found.repo_id
    name = src.rstrip("/").split("/")[-1].lstrip("-") or "checkpoint"
    return Path(f"{name}-chord-{layout}")


def kept_summary(output: Path, fix: str | None = None) -> str:
    """What an interrupted or failed conversion into ``output`` left behind, and how to go on."""
    partial = partial_dir(output)
    then = f"{fix}, then rerun" if fix else "rerun"
    if not partial.exists():
        if (output / JOURNAL).is_file():  # stopped between the final rename and the journal's removal
            return f"The conversion had finished: {output} is complete"
        return f"Nothing was kept; {then} the same command"
    try:
        n = len(_read_journal(partial / JOURNAL)["finished"])
    except OutputError:
        return f"{partial} was kept, but its {JOURNAL} is unreadable; delete {partial}, then rerun the same command"
    return f"Kept {n} finished shard{'' if n == 1 else 's'} in {partial}; {then} the same command with --resume"


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
    prefix = plan.info.prefix
    for i, src in enumerate(spec.sources):
        sl = slice(i * rows, (i + 1) * rows)
        for e in range(e0, e1):
            got_p = read_tensor(*plan.source_tensors[expert_name(prefix, layer, e, src, "weight_packed")],
                                out=packed[e - e0, sl])
            got_s = read_tensor(*plan.source_tensors[expert_name(prefix, layer, e, src, "weight_scale")],
                                out=scales[e - e0, sl])
            if hashers is not None:
                hashers[src].update(tensor_bytes(got_p))
                hashers[src].update(tensor_bytes(got_s))
    return packed, scales  # (weight_shape was checked at plan time)


def _specs_of(tensors: dict[str, torch.Tensor]) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {k: (DTYPE_NAMES.get(t.dtype, str(t.dtype)), tuple(t.shape)) for k, t in tensors.items()}


Emit = Callable[[int, int, dict[str, torch.Tensor]], None]


def pack_projection(plan: Plan, layer: int, spec: ProjectionSpec, experts: range | None, ledger: _Ledger,
                    emit: Emit) -> dict[str, str]:
    """Read and pack the experts ``experts`` (None: all) of one projection of one MoE layer,
    ``spec.experts_per_chunk`` at a time, handing each packed chunk to ``emit(e0, e1, tensors)``
    (global expert ids); returns their source digests.

    The bytes held per chunk are the chunk's source, plus (when the chunk is streamed straight to
    disk) its packed form; held packed tensors are the caller's to count.
    """
    e_count, step = spec.num_experts, spec.experts_per_chunk
    todo = experts if experts is not None else range(e_count)
    hashers = {src: hashlib.sha256() for src in spec.sources}
    per_expert = spec.source_bytes // e_count + (spec.packed_bytes // e_count if spec.streamed else 0)
    for e0 in range(todo.start, todo.stop, step):
        e1 = min(todo.stop, e0 + step)
        ledger.hold(per_expert * (e1 - e0))
        packed, scales = load_experts(plan, layer, spec, e0, e1, hashers)
        pw = ck_pack(plan.layout, packed, scales, plan.profile, **plan.options)
        del packed, scales
        want = spec.tensors if e1 - e0 == e_count else {
            key: (dtype, (e1 - e0, *shape[1:])) for key, (dtype, shape) in spec.tensors.items()}
        meta = {**pw.metadata(), "chord.num_experts": str(e_count)}
        if _specs_of(pw.tensors) != want or meta != spec.metadata:
            raise ChordPackError(
                f"layout {plan.layout!r} packed experts {e0}..{e1 - 1} of layer {layer} {spec.proj} into "
                f"{_specs_of(pw.tensors)} / {pw.metadata()}; its shape probe gave {want} / {spec.metadata}"
            )
        emit(e0, e1, pw.tensors)
        del pw
        ledger.release(per_expert * (e1 - e0))
    return {source_digest_key(layer, src, experts): h.hexdigest() for src, h in hashers.items()}


def _write_json_atomic(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with os_errors("write", tmp):
        with tmp.open("w") as f:
            f.write(json.dumps(doc, indent=2, sort_keys=False) + "\n")
            f.flush()
            os.fsync(f.fileno())  # else a crash after the rename can leave an empty journal or config
        os.replace(tmp, path)


def _checked_journal(doc: object, path: Path) -> dict:
    """``doc`` if it is a journal (fingerprint, finished shards with sha256 and size, source digests)."""
    finished = doc.get("finished") if isinstance(doc, dict) else None
    if not (isinstance(finished, dict) and isinstance(doc.get("fingerprint"), str)
            and isinstance(doc.setdefault("source_digests", {}), dict)
            and all(isinstance(r, dict) and isinstance(r.get("sha256"), str) and type(r.get("size")) is int
                    for r in finished.values())):
        raise OutputError(f"{path} is damaged: expected a fingerprint, finished shards with sha256 and size, and "
                          f"source digests; delete {path.parent}, then rerun without --resume")
    return doc


def _read_journal(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:  # ValueError: not JSON, or not UTF-8
        reason = exc.strerror if isinstance(exc, OSError) else exc
        raise OutputError(f"{path} is unreadable ({reason}); delete {path.parent}, then rerun without "
                          "--resume") from None
    return _checked_journal(doc, path)


def _finished_journal(plan: Plan, partial: Path) -> dict | None:
    """The journal of a conversion that had finished in ``partial`` but was not renamed into place
    (chord-pack once removed the journal before that rename), rebuilt from its config.json; None
    if ``partial`` holds no such conversion of this plan. Its shards are then checked as any."""
    try:
        block = load_json(partial / "config.json").get("chord_pack")
    except ChordPackError:
        return None
    if not isinstance(block, dict) or not isinstance(block.get("source"), dict):
        return None
    static = {k: v for k, v in block.items() if k not in ("shards", "source_digests")}
    static["source"] = {k: v for k, v in block["source"].items() if k != "local_path"}
    shards = block.get("shards")
    if static != plan.static_block() or not isinstance(shards, dict) or set(shards) != {s.name for s in plan.shards}:
        return None
    doc = {"fingerprint": plan.fingerprint(), "finished": shards, "source_digests": block.get("source_digests")}
    try:
        return _checked_journal(doc, partial / "config.json")
    except OutputError:
        return None


def _stale_reason(plan: Plan, shard: Shard, path: Path, recorded: dict[str, str], matches: dict[str, bool]
                  ) -> str | None:
    """Why finished shard ``shard`` (at ``path``) no longer matches the source, or None.

    Packed items are checked through the source digests recorded when they were written,
    copied tensors byte for byte; ``matches`` caches the projections already checked.
    """
    header = None
    for item in shard.items:
        if isinstance(item, CopyItem):
            header = header or read_header(path)
            if sha256_tensors([(item.src_file, item.src)]) != sha256_tensors([(path, header.tensors[item.name])]):
                return f"tensor {item.name} differs"
            continue
        for src in PACKED_PROJECTIONS[item.proj]:
            key = source_digest_key(item.layer, src, item.experts)
            if key not in matches:
                experts = item.experts if item.experts is not None else range(plan.info.num_experts)
                names = source_digest_names(plan.info.prefix, item.layer, src, experts)
                matches[key] = recorded.get(key) == sha256_tensors(plan.source_tensors[n] for n in names)
            if not matches[key]:
                return f"layer {item.layer} {src}{experts_label(item.experts)} differs"
    return None


def _open_partial(plan: Plan, partial: Path, resume: bool, progress: Progress) -> dict:
    fingerprint = plan.fingerprint()
    journal_path = partial / JOURNAL
    if not partial.exists():
        with os_errors("create", partial):
            partial.mkdir(parents=True)
        journal = {"fingerprint": fingerprint, "finished": {}, "source_digests": {}}
        try:
            _write_json_atomic(journal_path, journal)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)  # an empty one would only be in the way
            raise
        return journal
    if not resume:
        raise OutputError(f"{partial} holds an interrupted conversion; pass --resume to continue it or delete it")
    if journal_path.is_file():
        journal = _read_journal(journal_path)
    elif (journal := _finished_journal(plan, partial)) is None:
        raise OutputError(f"{partial} has no {JOURNAL}; it was not made by chord-pack, delete it")
    if journal["fingerprint"] != fingerprint:
        raise OutputError(
            f"{partial} was started with other settings or another source (layout, profile, "
            "versions, shard size, expert ranges or index differ); delete it or rerun with the same settings"
        )
    finished, recorded = journal["finished"], journal["source_digests"]
    if finished:
        progress.note(f"checking that {len(finished)} finished shards are intact and the source has not changed")
    matches: dict[str, bool] = {}
    for shard in plan.shards:
        rec = finished.get(shard.name)
        if rec is None:
            continue
        path = partial / shard.name
        with os_errors("read", path):
            intact = path.is_file() and path.stat().st_size == rec["size"] and sha256_file(path) == rec["sha256"]
        if not intact:
            progress.note(f"{shard.name}: damaged or missing in the partial output, redoing it")
        elif stale := _stale_reason(plan, shard, path, recorded, matches):
            progress.note(f"{shard.name}: the source has changed since it was written ({stale}), redoing it")
        else:
            continue
        del finished[shard.name]
        with os_errors("remove", path):
            path.unlink(missing_ok=True)
    for key, ok in matches.items():
        if not ok:
            recorded.pop(key, None)  # redone from the current source
    journal["finished"] = finished
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


def _check_outside(output: Path, source_root: Path) -> None:
    out, src = output.resolve(), source_root.resolve()
    if out == src or src in out.parents:
        raise OutputError(
            f"output {output} is inside the source checkpoint {src}, which chord-pack only reads; "
            "choose an --output outside it"
        )


def _resolve_source(source: Source | str | os.PathLike, revision: str | None, progress: Progress) -> Source:
    if isinstance(source, Source):
        return source
    src = os.fspath(source)
    if not Path(src).is_dir():  # Hub: refuse a wrong checkpoint before downloading its shards
        meta = resolve(src, revision, metadata_only=True, progress=progress)
        config = load_json(meta.path / "config.json")
        detect(config, weight_map_of(load_json(meta.path / INDEX_NAME), meta.path / INDEX_NAME))
        revision = meta.revision or revision
    return resolve(src, revision, progress=progress)


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
    experts_per_tensor: int | None = None,
    progress: Progress | None = None,
) -> ConvertResult:
    """Convert ``source`` into ``output`` with chord-kernels layout ``layout``; see the module doc.

    ``experts_per_tensor`` cuts each packed projection into tensors of that many experts (None:
    the layout family's default, see :mod:`chord_pack.plan`).
    """
    progress = progress or NullProgress()
    check_sizes(max_shard_bytes=max_shard_bytes, copy_chunk=copy_chunk, expert_chunk_bytes=expert_chunk_bytes)
    if experts_per_tensor is not None:
        check_sizes(experts_per_tensor=experts_per_tensor)
    layout_named(layout)  # an unknown or unsupported layout fails before any download or read
    output = Path(output)
    if output.is_symlink():  # the finished output is renamed into place, which cannot go through a link
        raise OutputError(f"output {output} is a symbolic link (to {os.readlink(output)}); give a path that is "
                          "not a link as --output")
    if output.exists() and not output.is_dir():
        raise OutputError(f"output {output} is a file, not a directory; choose another --output")
    with os_errors("read", output):
        if output.is_dir() and any(output.iterdir()):
            raise OutputError(f"output {output} already exists and is not empty; choose another --output")
    if isinstance(source, (str, os.PathLike)) and Path(source).is_dir():
        _check_outside(output, Path(source))  # before anything is read
    source = _resolve_source(source, revision, progress)
    _check_outside(output, source.path)
    plan = make_plan(source, layout, profile, options, max_shard_bytes=max_shard_bytes, copy_chunk=copy_chunk,
                     expert_chunk_bytes=expert_chunk_bytes, experts_per_tensor=experts_per_tensor)
    partial = partial_dir(output)
    try:
        journal = _open_partial(plan, partial, resume, progress)
    except ChordPackError as exc:
        if isinstance(exc.__cause__, OSError):  # could not create or update it: say so, and how to go on
            _with_kept(exc, output)
        raise
    finished: dict[str, dict] = journal["finished"]
    reused = [s.name for s in plan.shards if s.name in finished]
    try:
        maker = _ShardMaker(plan, partial, journal["source_digests"], finished, progress)
        progress.start(f"convert → {plan.layout}/{plan.profile}", plan.total_bytes)
        for shard in plan.shards:
            if shard.name in finished:
                progress.note(f"{shard.name}: already complete (sha256 and source checked), kept")
                progress.advance(shard.nbytes)
        for shard in plan.shards:
            if shard.name in finished:
                continue
            finished[shard.name] = maker.write(shard)
            _write_json_atomic(partial / JOURNAL, journal)
            progress.shard_done(shard.name)
        shards = {s.name: finished[s.name] for s in plan.shards}
        _finish(plan, partial, output, shards, maker.digests)
    except BaseException as exc:
        if not finished:  # nothing worth resuming: leave no hidden directory behind
            shutil.rmtree(partial, ignore_errors=True)
        if isinstance(exc, OSError):  # one we did not expect: still say where
            error = OutputError(f"cannot access {exc.filename or partial}: {exc.strerror or exc}")
            raise _with_kept(error, output, exc) from exc
        if isinstance(exc, ChordPackError):
            _with_kept(exc, output)
        raise
    return ConvertResult(output, plan, shards, reused, maker.ledger.peak)


def _with_kept(error: ChordPackError, output: Path, cause: BaseException | None = None) -> ChordPackError:
    """``error``, completed with what the failed conversion into ``output`` kept and how to go on."""
    if error.kept is None:
        cause = cause or error.__cause__
        fix = _FIXES.get(cause.errno) if isinstance(cause, OSError) else None
        error.kept = kept_summary(output, fix or "fix the problem")
    return error


HeldKey = tuple[int, str, range | None]
"""(layer, projection, expert range) of packed tensors held until all of them are written."""


class _ShardMaker:
    """Writes the plan's shards one at a time; holds at most one expert range (or projection) of
    packed tensors in between (a layout with several output tensors, whose tensors may straddle
    a shard boundary)."""

    def __init__(self, plan: Plan, partial: Path, digests: dict[str, str], finished: dict[str, dict],
                 progress: Progress) -> None:
        self.plan, self.partial, self.digests, self.progress = plan, partial, digests, progress
        self.ledger = _Ledger()
        self.metadata = shard_metadata(plan)
        self.held: tuple[HeldKey, dict[str, torch.Tensor]] | None = None
        self.needed: dict[HeldKey, int] = {}
        """Items of each held key still to write, so that held tensors are released after their last."""
        for shard in plan.shards:
            if shard.name not in finished:
                for item in shard.items:
                    if isinstance(item, PackedItem):
                        key = (item.layer, item.proj, item.experts)
                        self.needed[key] = self.needed.get(key, 0) + 1

    def write(self, shard: Shard) -> dict:
        """Write ``shard``; returns its journal record."""
        tmp = self.partial / (shard.name + ".incomplete")
        writer = None
        try:  # the writer is made inside: an interrupt while it writes the header removes the file too
            writer = ShardWriter(tmp, [Entry(i.name, i.dtype, i.shape) for i in shard.items], self.metadata)
            for item in shard.items:
                if isinstance(item, CopyItem):
                    self._copy(item, writer)
                elif self.plan.projections[item.proj].streamed:
                    self._stream(item, writer)
                else:
                    self._from_held(item, writer)
            sha = writer.close()
        except BaseException:
            if writer is not None:
                writer.abort()
            tmp.unlink(missing_ok=True)
            raise
        with os_errors("write", self.partial / shard.name):
            os.replace(tmp, self.partial / shard.name)
        return {"sha256": sha, "size": writer.size}

    def _copy(self, item: CopyItem, writer: ShardWriter) -> None:
        writer.begin(item.name)
        for chunk in iter_raw(item.src_file, item.src, self.plan.copy_chunk):
            self.ledger.hold(len(chunk))
            writer.write_bytes(chunk)
            self.ledger.release(len(chunk))
            self.progress.advance(len(chunk))

    def _stream(self, item: PackedItem, writer: ShardWriter) -> None:
        writer.begin(item.name)

        def write(e0: int, e1: int, tensors: dict[str, torch.Tensor]) -> None:
            (t,) = tensors.values()
            writer.write_bytes(tensor_bytes(t.cpu()))
            self.progress.advance(t.numel() * t.element_size())

        spec = self.plan.projections[item.proj]
        self.digests.update(pack_projection(self.plan, item.layer, spec, item.experts, self.ledger, write))

    def _from_held(self, item: PackedItem, writer: ShardWriter) -> None:
        key, spec = (item.layer, item.proj, item.experts), self.plan.projections[item.proj]
        if self.held is None or self.held[0] != key:
            self._release()
            out: dict[str, torch.Tensor] = {}
            first = item.experts.start if item.experts is not None else 0
            count = len(item.experts) if item.experts is not None else spec.num_experts

            def keep(e0: int, e1: int, tensors: dict[str, torch.Tensor]) -> None:
                for name, t in tensors.items():
                    if e1 - e0 == count:
                        out[name] = t.cpu().contiguous()
                        continue
                    if name not in out:
                        dtype, shape = spec.tensors[name]
                        out[name] = torch.empty((count, *shape[1:]), dtype=DTYPES[dtype])
                    out[name][e0 - first:e1 - first].copy_(t)

            self.ledger.hold(self._held_bytes(key))
            self.held = (key, out)
            self.digests.update(pack_projection(self.plan, item.layer, spec, item.experts, self.ledger, keep))
        writer.write_tensor(item.name, self.held[1][item.key])
        self.progress.advance(item.nbytes)
        self.needed[key] -= 1
        if self.needed[key] == 0:
            self._release()

    def _held_bytes(self, key: HeldKey) -> int:
        spec, experts = self.plan.projections[key[1]], key[2]
        return spec.packed_bytes if experts is None else spec.packed_bytes // spec.num_experts * len(experts)

    def _release(self) -> None:
        if self.held is not None:
            self.ledger.release(self._held_bytes(self.held[0]))
            self.held = None


def _nested_output(path: Path, root: Path) -> bool:
    """Whether ``path`` lies in a chord-pack output nested in ``root`` (never part of a conversion)."""
    for parent in path.relative_to(root).parents:
        config = root / parent / "config.json"
        if parent != Path(".") and config.is_file() and "chord_pack" in config.read_text():
            return True
    return False


def _finish(plan: Plan, partial: Path, output: Path, shards: dict[str, dict], digests: dict[str, str]) -> None:
    missing = [
        key for layer in plan.info.moe_layers for spec in plan.projections.values() for src in spec.sources
        for experts in plan.tensor_experts if (key := source_digest_key(layer, src, experts)) not in digests
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
                or rel.as_posix() in SKIP_FILES or _nested_output(path, src_root)):
            continue
        with os_errors("write", partial / rel):
            (partial / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, partial / rel)  # follows HF-cache symlinks: the output is standalone
    with os_errors("write", partial / "README.md"):
        model_card(plan).save(partial / "README.md")
    if output.exists():  # empty (checked at the start); the rename needs the name free
        with os_errors("remove the empty directory", output):
            output.rmdir()
    with os_errors(f"rename {partial} to", output):
        os.replace(partial, output)
    # Removed only now: until the rename, the journal is what lets --resume finish the conversion.
    # One left by a crash here is a dot-file: upload skips it, and kept_summary reads it as "finished".
    with contextlib.suppress(OSError):
        (output / JOURNAL).unlink()
