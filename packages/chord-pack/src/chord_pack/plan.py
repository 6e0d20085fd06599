"""The conversion plan: every output tensor, in order, assigned to a shard, before any data moves.

The plan is driven by ``model.safetensors.index.json`` and the source shard headers (read, never
the data). Routed-expert projections are converted one MoE layer and one projection at a time:
``w13`` stacks ``gate_proj`` rows over ``up_proj`` rows for all experts (``[E, 2I, H]``), ``w2``
is ``down_proj`` (``[E, H, I]``), each packed by a chord-kernels layout. Every other tensor is
copied byte for byte in chunks.

Expert ranges: the packed tensors of a projection hold all its experts (``[E, ...]``, schema
version 1), or are cut by expert range into one tensor per range of ``experts_per_tensor``
experts (schema version 2), so that an expert-parallel rank reads only its own experts' bytes.
The layouts chord-vllm serves (``indexed``, and the grouped family's ``contiguous`` and
``masked``) are written in ranges by default, ``E / gcd(E, 64)`` experts each (6 for Kimi's 384),
so that each rank of any EP size dividing ``gcd(E, 64)`` reads whole ranges of its own; other
layouts hold all experts per tensor unless asked. Ranges need a layout that packs experts
independently.

Memory bound: experts are read, packed and written in chunks of ``expert_chunk_bytes`` when
the layout packs experts independently (checked at plan time by packing two random experts
together and apart); otherwise a whole projection is packed at once. A layout with a single
output tensor (like ``indexed``) streams each packed chunk straight into the shard; one with
several output tensors holds the packed tensors of one expert range (or of the whole
projection) until they are written. So::

    peak <= max over projections of
              chunk source bytes + chunk packed bytes      (one output tensor)
              chunk source bytes + range packed bytes      (several output tensors)
            + copy_chunk
            + the layout's own temporaries while it packs one chunk

(``chunk`` is the whole projection for a layout that mixes experts, and ``range`` is the whole
projection when its tensors hold all experts.) For Kimi K2 with the ``indexed`` layout (384 experts,
H=7168, I=2048, 256 MB chunks) that is about 0.5 GB plus the layout's temporaries (about 7x one
chunk today, 1.7 GB), whatever the checkpoint's 570 GB total. ``Plan.memory_bound`` is the
number (without the layout temporaries) for the checkpoint at hand.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from chord_kernels import __version__ as kernels_version
from chord_kernels.errors import ChordError
from chord_kernels.formats import GROUP_SIZE, PACK_FACTOR
from chord_kernels.packed import Layout, available_layouts, get_layout
from chord_kernels.packed import pack as ck_pack
from chord_pack import __version__
from chord_pack.detect import CHORD_FORMAT, ModelInfo, detect, load_json, weight_map_of
from chord_pack.errors import CheckpointError, ChordPackError, os_errors
from chord_pack.names import (
    EXPERT_KINDS,
    EXPERT_RE,
    LAYER_RE,
    PACKED_PATTERN,
    PACKED_PROJECTIONS,
    RANGE_PATTERN,
    SOURCE_PROJECTIONS,
    expert_name,
    expert_nk,
    expert_ranges,
    packed_name,
)
from chord_pack.source import INDEX_NAME, Source
from chord_pack.st import COPY_CHUNK_BYTES, DTYPE_NAMES, Header, TensorInfo, nbytes_of, read_header

SCHEMA_VERSIONS = {1: "all experts per tensor", 2: "expert ranges"}
"""``chord_pack.schema_version`` -> how the packed tensors are cut (see the module docstring)."""
RANGED_FAMILIES = ("indexed", "grouped")
"""Kernel families whose layouts are written in expert ranges by default (what chord-vllm serves:
an expert-parallel rank reads only its ranges)."""
MAX_EP_RANKS = 64
"""Default ranges are whole for every EP size that divides gcd(E, MAX_EP_RANKS)."""
DEFAULT_SHARD_BYTES = 5 * 10**9
EXPERT_CHUNK_BYTES = 256 * 1024 * 1024
"""Source bytes of experts read and packed together when the layout allows it."""


def layout_named(name: str) -> Layout:
    """The chord-kernels layout ``name``; an unknown name fails naming the valid ones."""
    layouts = available_layouts()
    if name not in layouts:
        raise ChordPackError(f"unknown layout {name!r}; valid layouts: {', '.join(sorted(layouts))} "
                             f"(chord-kernels {kernels_version})")
    return get_layout(name)


def tensor_names(prefix: str, ranged: bool) -> str:
    """The name pattern of packed tensors (``tensor_names`` in the block), prefix included."""
    return prefix + (RANGE_PATTERN if ranged else PACKED_PATTERN)


def default_experts_per_tensor(family: str, num_experts: int) -> int:
    """Experts per packed tensor when not asked: ranges for the EP families, else all of them."""
    if family in RANGED_FAMILIES:
        return num_experts // math.gcd(num_experts, MAX_EP_RANKS)
    return num_experts


@dataclass(frozen=True)
class CopyItem:
    """A non-expert tensor copied byte for byte."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    src_file: Path
    src: TensorInfo

    @property
    def nbytes(self) -> int:
        return self.src.nbytes


@dataclass(frozen=True)
class PackedItem:
    """One tensor of a packed projection."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    layer: int
    proj: str
    key: str
    experts: range | None = None
    """The experts it holds, when written in expert ranges; None: all of them."""

    @property
    def nbytes(self) -> int:
        return nbytes_of(self.dtype, self.shape)


Item = CopyItem | PackedItem


@dataclass(frozen=True)
class ProjectionSpec:
    """Shape of one packed projection (the same for every MoE layer)."""

    proj: str
    n: int
    k: int
    sources: tuple[str, ...]
    metadata: dict[str, str]
    """``PackedWeight.metadata()``: what ``PackedWeight.from_state_dict`` needs to rebuild it."""
    tensors: dict[str, tuple[str, tuple[int, ...]]]
    """Tensor key -> (dtype, shape) over all experts (an expert range's tensor has its own E)."""
    source_bytes: int
    """Source bytes of all experts (weight_packed + weight_scale)."""
    experts_per_chunk: int
    """Experts read and packed together (all of them if the layout is not expert-separable)."""
    num_experts: int
    experts_per_tensor: int
    """Experts of one output tensor (all of them unless written in expert ranges)."""

    @property
    def chunk_source_bytes(self) -> int:
        return self.source_bytes // self.num_experts * self.experts_per_chunk

    @property
    def streamed(self) -> bool:
        """One output tensor: each expert chunk is written as soon as it is packed."""
        return len(self.tensors) == 1

    @property
    def peak_bytes(self) -> int:
        """Tensor bytes held while this projection is converted."""
        held = self.experts_per_chunk if self.streamed else self.experts_per_tensor
        if held == self.num_experts:
            return self.chunk_source_bytes + self.packed_bytes
        return self.chunk_source_bytes + self.packed_bytes // self.num_experts * held

    @property
    def packed_bytes(self) -> int:
        return sum(nbytes_of(d, s) for d, s in self.tensors.values())


@dataclass
class Shard:
    name: str
    items: list[Item] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(i.nbytes for i in self.items)


@dataclass
class Plan:
    """Everything a conversion will do."""

    source: Source
    info: ModelInfo
    config: dict
    layout: str
    profile: str
    options: dict
    projections: dict[str, ProjectionSpec]
    source_tensors: dict[str, tuple[Path, TensorInfo]]
    """Every source tensor by name -> (file, where it lies in the file)."""
    shards: list[Shard]
    copy_chunk: int
    source_bytes: int
    index_sha256: str
    expert_ranges: list[range] | None = None
    """The expert range of each packed tensor (schema 2), or None: one tensor holds all experts."""

    @property
    def tensor_experts(self) -> list[range | None]:
        """What each packed tensor of a projection holds: its expert range, or None (all experts)."""
        return list(self.expert_ranges) if self.expert_ranges is not None else [None]

    @property
    def total_bytes(self) -> int:
        return sum(s.nbytes for s in self.shards)

    @property
    def memory_bound(self) -> int:
        """Bytes of tensor data the converter holds at most (see the module docstring)."""
        return max(p.peak_bytes for p in self.projections.values()) + self.copy_chunk

    def static_block(self) -> dict:
        """The ``chord_pack`` block minus per-run results; mirrored in every shard header."""
        meta = next(iter(self.projections.values())).metadata
        ranged = {"expert_ranges": [[r.start, r.stop - 1] for r in self.expert_ranges]} if self.expert_ranges else {}
        return {
            "schema_version": 2 if self.expert_ranges else 1,
            "format": CHORD_FORMAT,
            "layout": self.layout,
            "family": meta["chord.family"],
            "mode": meta["chord.mode"],
            "profile": self.profile,
            "options": self.options,
            "layout_version": int(meta["chord.layout_version"]),
            "chord_kernels_version": kernels_version,
            "chord_pack_version": __version__,
            "source": {
                "repo_id": self.source.repo_id,
                "revision": self.source.revision,
                "family": self.info.family,
                "format": "pack-quantized",
                "scheme": "int4 group-32 symmetric (W4A16)",
            },
            "tensor_prefix": self.info.prefix,
            "moe_layers": list(self.info.moe_layers),
            "num_experts": self.info.num_experts,
            "tensor_names": self.tensor_names,
            **ranged,
            "projections": {
                name: {"sources": list(p.sources), "n": p.n, "k": p.k, "packed_weight": p.metadata,
                       "tensors": {k: {"dtype": d, "shape": list(s)} for k, (d, s) in p.tensors.items()}}
                for name, p in self.projections.items()
            },
        }

    @property
    def tensor_names(self) -> str:
        """The name pattern of the packed tensors, prefix included."""
        return tensor_names(self.info.prefix, self.expert_ranges is not None)

    def fingerprint(self) -> str:
        """Identifies the plan; a resumed run must match it exactly."""
        doc = {
            "index": self.index_sha256,
            "block": self.static_block(),
            "shards": [[s.name, [i.name for i in s.items]] for s in self.shards],
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def probe_projection(layout: str, profile: str, options: dict, e: int, n: int, k: int
                     ) -> tuple[dict[str, str], dict[str, tuple[str, tuple[int, ...]]]]:
    """Packed metadata and tensor specs of an ``[e, n, k]`` projection, without packing real data.

    Packs on the meta device (shapes only). A layout that needs real values is probed with one
    zero expert and its specs scaled to ``e`` experts along the leading dimension; the converter
    checks every real pack against these specs, so a wrong extrapolation fails loudly.
    """
    def run(experts: int, device: str):
        packed = torch.zeros(experts, n, k // PACK_FACTOR, dtype=torch.int32, device=device)
        scales = torch.zeros(experts, n, k // GROUP_SIZE, dtype=torch.bfloat16, device=device)
        return ck_pack(layout, packed, scales, profile, **options)

    try:
        pw, scale_to = run(e, "meta"), None  # shapes only: costs nothing for a 6 GB projection
    except ChordError:
        raise  # a real refusal (bad profile, options, shape) is the user's to see
    except Exception:  # a layout that needs real data (e.g. .item()): one real zero expert
        pw, scale_to = run(1, "cpu"), e
    specs = {}
    for key, t in pw.tensors.items():
        if t.dtype not in DTYPE_NAMES:
            raise ChordPackError(f"layout {layout!r} produced tensor {key} of unsupported dtype {t.dtype}")
        shape = tuple(t.shape)
        if scale_to is not None:
            if not shape or shape[0] != 1:
                raise ChordPackError(
                    f"layout {layout!r} cannot be packed on the meta device and its tensor {key} "
                    f"{list(shape)} does not lead with the expert dimension; cannot plan shards"
                )
            shape = (scale_to, *shape[1:])
        specs[key] = (DTYPE_NAMES[t.dtype], shape)
    meta = pw.metadata()
    if scale_to is not None:
        meta["chord.num_experts"] = str(scale_to)
    return meta, specs


def expert_separable(layout: str, profile: str, options: dict, n: int, k: int,
                     specs: dict[str, tuple[str, tuple[int, ...]]], num_experts: int) -> bool:
    """Whether packing experts in chunks and concatenating equals packing them all at once.

    Checked on two random experts of the real shape; every output tensor must lead with E.
    """
    if any(not shape or shape[0] != num_experts for _, shape in specs.values()):
        return False
    g = torch.Generator().manual_seed(1234)
    # Random words cover every code; drawn directly, so the probe costs two experts' bytes.
    packed = torch.randint(-(2**31), 2**31, (2, n, k // PACK_FACTOR), generator=g, dtype=torch.int32)
    scales = (torch.rand(2, n, k // GROUP_SIZE, generator=g) + 0.5).to(torch.bfloat16)
    both = ck_pack(layout, packed, scales, profile, **options)
    parts = [ck_pack(layout, packed[i:i + 1], scales[i:i + 1], profile, **options) for i in range(2)]
    drop = "chord.num_experts"
    want_meta = {k: v for k, v in both.metadata().items() if k != drop}
    for part in parts:
        if {k: v for k, v in part.metadata().items() if k != drop} != want_meta:
            return False
        if set(part.tensors) != set(both.tensors):
            return False
    return all(
        torch.equal(torch.cat([p.tensors[key] for p in parts]), t) for key, t in both.tensors.items()
    )


def _order_key(name: str, prefix: str) -> tuple:
    m = LAYER_RE.search(name)
    if m and name.startswith(prefix):
        return (1, int(m.group(1)), name)
    return (0 if "embed_tokens" in name else 2, 0, name)


def make_plan(source: Source, layout: str, profile: str | None = None, options: dict | None = None,
              *, max_shard_bytes: int = DEFAULT_SHARD_BYTES, copy_chunk: int = COPY_CHUNK_BYTES,
              expert_chunk_bytes: int = EXPERT_CHUNK_BYTES, experts_per_tensor: int | None = None) -> Plan:
    """Read config, index and shard headers of ``source`` and lay out the whole conversion.

    ``experts_per_tensor`` cuts the packed tensors by expert range (see the module docstring);
    None takes the layout family's default.
    """
    options = dict(options or {})
    check_sizes(max_shard_bytes=max_shard_bytes, copy_chunk=copy_chunk, expert_chunk_bytes=expert_chunk_bytes)
    if experts_per_tensor is not None:
        check_sizes(experts_per_tensor=experts_per_tensor)
    target = layout_named(layout)  # fails first, before anything is read
    if profile is None:
        profile = target.profiles[0]
    if profile not in target.profiles:
        raise ChordPackError(f"layout {layout!r} has no profile {profile!r}; choose one of {list(target.profiles)}")
    root = source.path
    config = load_json(root / "config.json")
    index_path = root / INDEX_NAME
    index = load_json(index_path)
    weight_map = weight_map_of(index, index_path)
    if not weight_map:
        raise CheckpointError(f"{index_path}: no weight_map")
    info = detect(config, weight_map)

    headers: dict[str, Header] = {}
    for fname in sorted(set(weight_map.values())):
        fpath = root / fname
        if not fpath.is_file():
            raise CheckpointError(f"{fpath}: listed in {INDEX_NAME} but missing")
        headers[fname] = read_header(fpath)
    tensors: dict[str, tuple[Path, TensorInfo]] = {}
    for name, fname in weight_map.items():
        tinfo = headers[fname].tensors.get(name)
        if tinfo is None:
            raise CheckpointError(f"{root / fname}: tensor {name} is listed in {INDEX_NAME} but missing from the file")
        tensors[name] = (root / fname, tinfo)

    # Validate every expert tensor (dtype, shape) and learn N, K per source projection.
    dims: dict[str, tuple[int, int]] = {}
    for layer in info.moe_layers:
        for proj in SOURCE_PROJECTIONS:
            want = None
            if None not in (info.hidden_size, info.moe_intermediate_size):
                want = expert_nk(proj, info.hidden_size, info.moe_intermediate_size)
            for e in range(info.num_experts):
                names = [expert_name(info.prefix, layer, e, proj, kind) for kind in EXPERT_KINDS]
                for name in names:
                    if name not in tensors:
                        raise CheckpointError(f"tensor {name} is missing from {INDEX_NAME}")
                _check_expert(*(tensors[name] for name in names), proj, dims, want)
    _check_weight_shapes(info, tensors, dims)
    if dims["gate_proj"] != dims["up_proj"]:
        raise CheckpointError(f"gate_proj is {list(dims['gate_proj'])} but up_proj is {list(dims['up_proj'])}")

    e = info.num_experts
    per_tensor = min(e, experts_per_tensor or default_experts_per_tensor(target.family, e))
    projections = {}
    for proj, sources in PACKED_PROJECTIONS.items():
        n = sum(dims[s][0] for s in sources)
        k = dims[sources[0]][1]
        meta, specs = probe_projection(layout, profile, options, e, n, k)
        src_bytes = e * n * (k // PACK_FACTOR * 4 + k // GROUP_SIZE * 2)
        per_chunk = e
        if e > 1 and expert_separable(layout, profile, options, n, k, specs, e):
            per_chunk = max(1, min(e, expert_chunk_bytes // (src_bytes // e)))
        elif per_tensor < e:
            raise ChordPackError(
                f"layout {layout!r} does not pack experts independently, so its tensors cannot be cut "
                f"into ranges of {per_tensor} experts; ask for {e} experts per tensor (all of them)"
            )
        projections[proj] = ProjectionSpec(proj, n, k, sources, meta, specs, src_bytes, per_chunk, e, per_tensor)
    ranges = expert_ranges(e, per_tensor) if per_tensor < e else None
    pattern = tensor_names(info.prefix, ranges is not None)

    items: list[tuple[tuple, tuple[int, int], Item]] = []
    for name, (fpath, tinfo) in tensors.items():
        if not EXPERT_RE.match(name):
            items.append((_order_key(name, info.prefix), (0, 0), CopyItem(name, tinfo.dtype, tinfo.shape, fpath, tinfo)))
    for layer in info.moe_layers:
        order = (1, layer, "\uffff")  # after the layer's own non-expert tensors
        for rank, (proj, spec) in enumerate(projections.items(), 1):
            for i, experts in enumerate(ranges or [None]):
                for key, (dtype, shape) in spec.tensors.items():
                    name = packed_name(pattern, layer, proj, key, experts)
                    if experts is not None:
                        shape = (len(experts), *shape[1:])
                    items.append((order, (rank, i), PackedItem(name, dtype, shape, layer, proj, key, experts)))
    items.sort(key=lambda t: (t[0], t[1]))

    groups: list[list[Item]] = [[]]
    size = 0
    for _, _, item in items:
        if groups[-1] and size + item.nbytes > max_shard_bytes:
            groups.append([])
            size = 0
        groups[-1].append(item)
        size += item.nbytes
    n_shards = len(groups)
    shards = [Shard(f"model-{i:05d}-of-{n_shards:05d}.safetensors", g) for i, g in enumerate(groups, 1)]
    return Plan(
        source=source, info=info, config=config, layout=layout, profile=profile, options=options,
        projections=projections, source_tensors=tensors, shards=shards, copy_chunk=copy_chunk,
        source_bytes=sum(h.file_size for h in headers.values()),
        index_sha256=hashlib.sha256(index_path.read_bytes()).hexdigest(),
        expert_ranges=ranges,
    )


def check_sizes(**sizes: int) -> None:
    """Refuse a shard, chunk or copy size that is not a positive number of bytes."""
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ChordPackError(f"{name}: expected a positive number of bytes, got {value!r}")


def _check_expert(packed_at: tuple[Path, TensorInfo], scale_at: tuple[Path, TensorInfo],
                  shape_at: tuple[Path, TensorInfo], proj: str, dims: dict[str, tuple[int, int]],
                  want: tuple[int, int] | None) -> None:
    """Dtypes and shapes of one expert's tensors; ``want`` is its [N, K] by config.json, if known."""
    (fpath, packed), (spath, scale), (hpath, shape) = packed_at, scale_at, shape_at
    for path, t, dtypes in ((fpath, packed, ("I32",)), (spath, scale, ("BF16",)), (hpath, shape, ("I32", "I64"))):
        if t.dtype not in dtypes:
            raise CheckpointError(f"{path}: tensor {t.name} has dtype {t.dtype}, expected {' or '.join(dtypes)}")
    if len(packed.shape) != 2:
        raise CheckpointError(f"{fpath}: tensor {packed.name} has shape {list(packed.shape)}, expected [N, K/8]")
    # Checked against config.json first, so that a wrong weight_packed is blamed, not its weight_scale.
    if want is not None and packed.shape != (want[0], want[1] // PACK_FACTOR):
        raise CheckpointError(
            f"{fpath}: tensor {packed.name} has shape {list(packed.shape)}, expected "
            f"{[want[0], want[1] // PACK_FACTOR]} ([N, K/8] for N={want[0]}, K={want[1]} from config.json's "
            "hidden_size and moe_intermediate_size)"
        )
    n, k = packed.shape[0], packed.shape[1] * PACK_FACTOR
    if k % GROUP_SIZE or scale.shape != (n, k // GROUP_SIZE):
        raise CheckpointError(
            f"{spath}: tensor {scale.name} has shape {list(scale.shape)}, expected {[n, k // GROUP_SIZE]} "
            f"for weight_packed {list(packed.shape)} (group size 32)"
        )
    if shape.shape != (2,):
        raise CheckpointError(f"{hpath}: tensor {shape.name} has shape {list(shape.shape)}, expected [2]")
    seen = dims.setdefault(proj, (n, k))
    if seen != (n, k):
        raise CheckpointError(
            f"{fpath}: tensor {packed.name} is [N={n}, K={k}] but other {proj} experts are "
            f"[N={seen[0]}, K={seen[1]}]"
        )


def _check_weight_shapes(info: ModelInfo, tensors: dict[str, tuple[Path, TensorInfo]],
                         dims: dict[str, tuple[int, int]]) -> None:
    """Every expert's weight_shape must say its [N, K]. They are 16 bytes each, so all are read now,
    one open per file, and a wrong one fails before anything is written rather than hours in."""
    by_file: dict[Path, list[tuple[TensorInfo, tuple[int, int]]]] = {}
    for layer in info.moe_layers:
        for proj in SOURCE_PROJECTIONS:
            for e in range(info.num_experts):
                path, tinfo = tensors[expert_name(info.prefix, layer, e, proj, "weight_shape")]
                by_file.setdefault(path, []).append((tinfo, dims[proj]))
    for path, todo in by_file.items():
        with os_errors("read", path, CheckpointError), path.open("rb") as f:
            for tinfo, (n, k) in sorted(todo, key=lambda t: t[0].begin):
                f.seek(tinfo.begin)
                got = torch.frombuffer(bytearray(f.read(tinfo.nbytes)), dtype=tinfo.torch_dtype).tolist()
                if got != [n, k]:
                    raise CheckpointError(f"{path}: tensor {tinfo.name} says {got} but weight_packed/weight_scale "
                                          f"are [N={n}, K={k}]")
