"""chord-pack checkpoints in vLLM: the ``chord_pack`` block, tensor names, and the TP/EP slice of
each rank's tiles.

chord-pack writes each MoE layer's routed experts as int32 tiles ``[E, ceil(N/16) * K/32, 72]``
per projection (w13, w2), described in config.json's ``chord_pack`` block, in one of two schemas:

- schema 1: one tensor of every expert, ``...mlp.experts.chord.{w13,w2}.tiles``;
- schema 2: one tensor per expert range ``first..last`` (the block's ``expert_ranges``),
  ``...mlp.experts.chord.{w13,w2}.experts_{first}_{last}.tiles``.

vLLM's loader hands each tensor whole to the loader of the parameter its name maps to, without the
name, so in schema 2 each range is a parameter of its own (an empty placeholder whose loader writes
the range's local experts into the rank's tiles). A loader keeps this rank's experts and, under
tensor parallelism, this rank's slice of the intermediate dimension.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from chord_kernels import PackedWeight, pack, unpack
from chord_kernels.indexed.layout import tiles_have_small_scales
from chord_vllm import _compat
from chord_vllm._compat import PROFILE_BY_ARCH

SCHEMA_VERSIONS = (1, 2)
"""1: one tensor of all experts per projection; 2: one tensor per expert range."""
FORMAT = "chord-packed"
LAYOUT = "indexed"
TILE_LAYOUTS = ("indexed", "contiguous", "masked")
"""Layouts whose tiles are the indexed layout's bytes: the grouped family's ``contiguous`` and
``masked`` are the indexed tiles under another record (chord_kernels.grouped.layout), so the
indexed experts serve them, relabelled."""
PROJECTIONS = ("w13", "w2")
NAME_PATTERN = re.compile(r"\.mlp\.experts\.chord\.(w13|w2)\.(\w+)$")
"""chord-pack's schema-1 tensor names; vLLM's parameters sit under ``.mlp.experts.routed_experts``."""
NAME_REPLACEMENT = r".mlp.experts.routed_experts.chord_\1_\2"
RANGE_NAME_PATTERN = re.compile(r"\.mlp\.experts\.chord\.(w13|w2)\.experts_(\d+)_(\d+)\.(\w+)$")
"""chord-pack's schema-2 tensor names (one per expert range)."""
RANGE_NAME_REPLACEMENT = r".mlp.experts.routed_experts.chord_\1_experts_\2_\3_\4"
SERVED_PROFILES = frozenset(p for pair in PROFILE_BY_ARCH.values() for p in pair)
"""Profiles a checkpoint may carry. The indexed layout's bytes are the same for all of them, so a
rank serving another profile relabels the tiles."""


def param_name(proj: str, experts: range | None = None) -> str:
    """The layer parameter of ``proj``'s tiles (what :data:`NAME_PATTERN` maps names to), or of
    the tensor of expert range ``experts`` (:data:`RANGE_NAME_PATTERN`)."""
    if experts is None:
        return f"chord_{proj}_tiles"
    return f"chord_{proj}_experts_{experts.start}_{experts.stop - 1}_tiles"


@functools.cache
def indexed_layout_version() -> int:
    """The indexed layout version this chord-kernels packs (and so can run)."""
    return _probe(16, 32, "h200_ep8").layout_version


def _probe(n: int, k: int, profile: str) -> PackedWeight:
    """A packed weight of one ``[n, k]`` expert on the meta device: shapes and metadata only."""
    return pack(LAYOUT, torch.empty((1, n, k // 8), dtype=torch.int32, device="meta"),
                torch.empty((1, n, k // 32), dtype=torch.bfloat16, device="meta"), profile=profile)


def tiles_shape(num_experts: int, n: int, k: int, profile: str) -> tuple[int, int, int]:
    """Shape of the ``tiles`` tensor of ``[num_experts, n, k]`` weights."""
    _, atoms, words = _probe(n, k, profile).tensors["tiles"].shape
    return num_experts, atoms, words


@dataclass(frozen=True)
class Projection:
    """One projection as chord-pack wrote it: unsharded ``[num_experts, n, k]``, in one tensor
    (``ranges`` None, schema 1) or one tensor per expert range (schema 2)."""

    num_experts: int
    n: int
    k: int
    profile: str
    options: dict
    layout: str = LAYOUT
    """The checkpoint's layout: one of :data:`TILE_LAYOUTS`, all served as ``indexed``."""
    ranges: tuple[range, ...] | None = None

    def weight(self, tiles: torch.Tensor, *, num_experts: int, n: int, k: int, profile: str) -> PackedWeight:
        """The :class:`PackedWeight` of this rank's ``tiles`` (``[num_experts, n, k]``; reads their
        scales once, for ``small_scales``)."""
        return PackedWeight(layout=LAYOUT, family=LAYOUT, mode=LAYOUT, profile=profile,
                            layout_version=indexed_layout_version(), num_experts=num_experts, n=n, k=k,
                            group_size=32, tensors={"tiles": tiles}, options=dict(self.options),
                            small_scales=tiles_have_small_scales(tiles))


def read_block(block: object, where: str) -> dict[str, Projection]:
    """Validate a config.json ``chord_pack`` block; refuse anything this plugin cannot serve, naming
    what the checkpoint has and what is supported."""
    if not isinstance(block, Mapping):
        raise ValueError(f"{where}: chord_pack must be a JSON object, got {type(block).__name__}")

    def need(value: object, want: object, what: str) -> None:
        choices = want if isinstance(want, tuple) else (want,)
        if value not in choices:
            served = f"one of {', '.join(map(repr, choices))}" if len(choices) > 1 else repr(want)
            raise ValueError(f"{where}: chord_pack {what} is {value!r}; this chord-vllm serves {served} "
                             "(repack the source checkpoint with a matching chord-pack)")

    need(block.get("schema_version"), SCHEMA_VERSIONS, "schema_version")
    need(block.get("format"), FORMAT, "format")
    layout = block.get("layout")
    need(layout, TILE_LAYOUTS, "layout")
    need(block.get("layout_version"), indexed_layout_version(), "layout_version")
    projections = block.get("projections")
    if not isinstance(projections, Mapping) or set(projections) != set(PROJECTIONS):
        got = sorted(projections) if isinstance(projections, Mapping) else projections
        raise ValueError(f"{where}: chord_pack projections are {got}; expected {list(PROJECTIONS)}")
    out = {}
    for proj in PROJECTIONS:
        meta = projections[proj].get("packed_weight", {})
        try:
            version = int(meta["chord.layout_version"])
            out[proj] = Projection(int(meta["chord.num_experts"]), int(meta["chord.n"]),
                                   int(meta["chord.k"]), meta["chord.profile"],
                                   json.loads(meta.get("chord.options", "{}")), meta["chord.layout"])
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"{where}: chord_pack projections.{proj}.packed_weight is incomplete "
                             f"({exc!r}): {meta}") from None
        need(out[proj].layout, layout, f"projections.{proj} layout")
        need(version, indexed_layout_version(), f"projections.{proj} layout_version")
        if out[proj].profile not in SERVED_PROFILES:
            raise ValueError(f"{where}: chord_pack projections.{proj} was packed for profile "
                             f"{out[proj].profile!r}; this chord-vllm serves {sorted(SERVED_PROFILES)}")
    ranges = _expert_ranges(block, out["w13"].num_experts, where)
    return {proj: dataclasses.replace(spec, ranges=ranges) for proj, spec in out.items()}


def _expert_ranges(block: Mapping, num_experts: int, where: str) -> tuple[range, ...] | None:
    """Schema 2's ``expert_ranges`` (``[first, last]`` pairs) as ranges covering every expert in
    order, each once; None for schema 1."""
    raw = block.get("expert_ranges")
    if block.get("schema_version") == 1:
        if raw is not None:
            raise ValueError(f"{where}: chord_pack schema_version 1 has no expert_ranges, got {raw!r}")
        return None
    try:
        ranges = tuple(range(int(first), int(last) + 1) for first, last in raw)
    except (TypeError, ValueError):
        ranges = ()
    starts = [0, *(r.stop for r in ranges)]
    if not ranges or any(len(r) < 1 or r.start != s for r, s in zip(ranges, starts, strict=False)) \
            or ranges[-1].stop != num_experts:
        raise ValueError(f"{where}: chord_pack expert_ranges {raw!r} do not cover experts "
                         f"0..{num_experts - 1} in order, each once")
    return ranges


def check_tiles(tiles: torch.Tensor, proj: str, spec: Projection, experts: range | None = None) -> None:
    """Refuse a tensor that is not the int32 tiles of ``experts`` (None: all of them), naming both."""
    count = spec.num_experts if experts is None else len(experts)
    want = tiles_shape(count, spec.n, spec.k, spec.profile)
    if tuple(tiles.shape) != want or tiles.dtype != torch.int32:
        held = "" if experts is None else f" (experts {experts.start}-{experts.stop - 1})"
        raise ValueError(f"chord {proj} tiles{held}: expected int32 {list(want)} for [{count}, "
                         f"{spec.n}, {spec.k}] weights, got {tiles.dtype} {list(tiles.shape)}")


def rank_slice(tiles: torch.Tensor, proj: str, spec: Projection, *, local_experts: list[int],
               tp_rank: int, tp_size: int, experts: range | None = None) -> torch.Tensor:
    """This rank's tiles from a tensor of the experts ``experts`` (None: every expert): the experts
    ``local_experts`` (global ids within it, in local order) and, for ``tp_size > 1``, the rank's
    slice of the intermediate dimension (w13's gate and up rows, w2's input columns)."""
    check_tiles(tiles, proj, spec, experts)
    first, count = (0, spec.num_experts) if experts is None else (experts.start, len(experts))
    if local_experts != list(range(first, first + count)):
        tiles = tiles[torch.tensor([g - first for g in local_experts], dtype=torch.long)]
    if tp_size == 1:
        return tiles
    inter = spec.n // 2 if proj == "w13" else spec.k
    if inter % tp_size:
        raise ValueError(f"chord {proj}: intermediate size {inter} does not split over TP={tp_size}")
    part = inter // tp_size
    fast = _tile_slice(tiles, proj, spec, part * tp_rank, part)
    if fast is not None:
        return fast
    # A slower load path (about 60x a whole-tile cut on CPU for Kimi's w2): say so once.
    _compat.log_once(logging.INFO, f"Chord: chord {proj} tiles do not split into whole tiles at TP={tp_size} "
                                   f"({part} of {inter} channels per rank); loading unpacks, slices and "
                                   "repacks them, much slower than cutting tiles (the source checkpoint "
                                   "packs on the GPU instead)", key=f"repack {proj}")
    return _repack_slice(tiles, proj, spec, part * tp_rank, part)


def _tile_slice(tiles: torch.Tensor, proj: str, spec: Projection, start: int, size: int
                ) -> torch.Tensor | None:
    """The TP slice cut from whole tiles without unpacking, or None when tile edges don't allow it.

    A tile is ``tile_n`` output channels x ``tile_k`` input channels; the tiles of one block of
    ``tile_n`` channels are contiguous and ordered along K (chord_kernels.indexed.layout).
    """
    o = spec.options
    try:
        atom_n, atom_k, tile_n, tile_k = o["atom_n"], o["atom_k"], o["tile_n"], o["tile_k"]
    except KeyError:
        return None
    e, _, words = tiles.shape
    rows, groups = tile_n // atom_n, tile_k // atom_k  # atoms per tile, along N and K
    kg = spec.k // atom_k
    if proj == "w13":  # keep channel blocks [start, start+size) of gate and of up
        if size % tile_n or start % tile_n or spec.n % tile_n:
            return None
        blocks = tiles.view(e, spec.n // tile_n, rows * kg, words)
        half, first, count = spec.n // 2 // tile_n, start // tile_n, size // tile_n
        picked = torch.cat([blocks[:, first:first + count], blocks[:, half + first:half + first + count]], 1)
        return picked.reshape(e, -1, words).contiguous()
    if size % tile_k or start % tile_k or spec.k % tile_k or spec.n % tile_n:
        return None  # w2: keep K tiles [start, start+size) of every channel block
    cut = tiles.view(e, spec.n // tile_n, kg // groups, rows * groups, words)
    return cut[:, :, start // tile_k:(start + size) // tile_k].reshape(e, -1, words).contiguous()


def _repack_slice(tiles: torch.Tensor, proj: str, spec: Projection, start: int, size: int) -> torch.Tensor:
    """The TP slice through the source format: unpack, slice, pack (any size Chord packs)."""
    weight = spec.weight(tiles, num_experts=tiles.shape[0], n=spec.n, k=spec.k, profile=spec.profile)
    packed, scales = unpack(weight)
    if proj == "w13":
        half = spec.n // 2
        rows = torch.cat([torch.arange(start, start + size), torch.arange(half + start, half + start + size)])
        packed, scales = packed[:, rows], scales[:, rows]
    else:
        packed = packed[..., start // 8:(start + size) // 8]
        scales = scales[..., start // 32:(start + size) // 32]
    return pack(LAYOUT, packed.contiguous(), scales.contiguous(), profile=spec.profile).tensors["tiles"]


def expert_slices(num_global: int, local_of_global: list[int]) -> list[int]:
    """Global expert ids in local order, from each global expert's local id (-1 = elsewhere)."""
    local = sorted((lid, g) for g, lid in enumerate(local_of_global) if lid >= 0)
    if [lid for lid, _ in local] != list(range(len(local))):
        raise ValueError(f"expert map: local ids {[lid for lid, _ in local]} are not 0..{len(local) - 1}")
    if len(local_of_global) != num_global:
        raise ValueError(f"expert map: {len(local_of_global)} entries for {num_global} experts")
    return [g for _, g in local]

