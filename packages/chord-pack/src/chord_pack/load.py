"""Read packed expert weights back from a chord-pack output (what a loader or a test needs).

An expert-parallel rank asks for its own experts only: from a checkpoint written in expert ranges
(schema version 2) it opens only the tensors of the ranges that hold them.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

from chord_kernels.packed import PackedWeight
from chord_pack.errors import CheckpointError
from chord_pack.names import packed_name
from chord_pack.source import INDEX_NAME


def chord_pack_block(path: str | Path) -> dict:
    """The ``chord_pack`` block of a converted checkpoint's config.json."""
    config = json.loads((Path(path) / "config.json").read_text())
    block = config.get("chord_pack")
    if not isinstance(block, dict):
        raise CheckpointError(f"{path}/config.json has no chord_pack block: not a chord-pack output")
    return block


def block_ranges(block: dict) -> list[range | None]:
    """What each packed tensor of a projection holds: its expert range (schema 2), or None (all)."""
    ranges = block.get("expert_ranges")
    if ranges is None:
        return [None]
    try:
        out = [range(int(first), int(last) + 1) for first, last in ranges]
    except (TypeError, ValueError):
        out = []
    starts = [0] + [r.stop for r in out]
    if not out or any(len(r) < 1 or r.start != start for r, start in zip(out, starts, strict=False)) \
            or out[-1].stop != int(block["num_experts"]):
        raise CheckpointError(f"chord_pack.expert_ranges {ranges!r} do not cover experts "
                              f"0..{int(block['num_experts']) - 1} in order, each once")
    return out


def block_tensor_name(block: dict, layer: int, proj: str, key: str, experts: range | None) -> str:
    """Name of packed tensor ``key`` of ``proj`` in MoE layer ``layer`` holding ``experts``."""
    return packed_name(block["tensor_names"], layer, proj, key, experts)


def packed_weight(spec: dict, tensors: dict[str, torch.Tensor], num_experts: int) -> PackedWeight:
    """The :class:`PackedWeight` of ``num_experts`` experts of projection ``spec`` (a block entry)."""
    meta = {**spec["packed_weight"], "chord.num_experts": str(num_experts)}
    return PackedWeight.from_state_dict(meta, tensors)


def read_packed(path: str | Path, layer: int, proj: str, experts: range | None = None) -> PackedWeight:
    """The :class:`PackedWeight` of projection ``proj`` ("w13" or "w2") of MoE layer ``layer``:
    all experts, or only ``experts`` (global ids, consecutive), reading only their bytes."""
    root = Path(path)
    block = chord_pack_block(root)
    if layer not in block["moe_layers"]:
        raise CheckpointError(f"{root}: layer {layer} is not a MoE layer; MoE layers are {block['moe_layers']}")
    spec = block["projections"].get(proj)
    if spec is None:
        raise CheckpointError(f"{root}: projection {proj!r} unknown; expected one of {sorted(block['projections'])}")
    e_count = int(block["num_experts"])
    want = range(e_count) if experts is None else experts
    if want.step != 1 or not 0 <= want.start < want.stop <= e_count:
        raise CheckpointError(f"{root}: experts {want} are not a consecutive range of the {e_count} experts")
    if len(want) < e_count and "expert_ranges" not in block:
        # A layout may mix experts (the converter packs such a layout whole): only ranges, which
        # the converter writes for layouts that pack experts independently, can be read apart.
        raise CheckpointError(f"{root} holds all {e_count} experts in each packed tensor (schema version "
                              f"{block.get('schema_version')}); read all of them, or convert it in expert ranges")
    weight_map = json.loads((root / INDEX_NAME).read_text())["weight_map"]
    parts: dict[str, list[torch.Tensor]] = {key: [] for key in spec["tensors"]}
    for held in block_ranges(block):
        have = held if held is not None else range(e_count)
        lo, hi = max(want.start, have.start), min(want.stop, have.stop)
        if lo >= hi:
            continue  # another rank's experts: not opened
        for key in spec["tensors"]:
            name = block_tensor_name(block, layer, proj, key, held)
            if name not in weight_map:
                raise CheckpointError(f"{root}/{INDEX_NAME}: tensor {name} is missing")
            with safe_open(str(root / weight_map[name]), framework="pt") as f:
                whole = len(have) == hi - lo
                parts[key].append(f.get_tensor(name) if whole else f.get_slice(name)[lo - have.start:hi - have.start])
    tensors = {key: got[0] if len(got) == 1 else torch.cat(got) for key, got in parts.items()}
    return packed_weight(spec, tensors, len(want))
