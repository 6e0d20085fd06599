"""Read packed expert weights back from a chord-pack output (what a loader or a test needs)."""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import safe_open

from chord_kernels.packed import PackedWeight
from chord_pack.errors import CheckpointError
from chord_pack.source import INDEX_NAME


def chord_pack_block(path: str | Path) -> dict:
    """The ``chord_pack`` block of a converted checkpoint's config.json."""
    config = json.loads((Path(path) / "config.json").read_text())
    block = config.get("chord_pack")
    if not isinstance(block, dict):
        raise CheckpointError(f"{path}/config.json has no chord_pack block: not a chord-pack output")
    return block


def read_packed(path: str | Path, layer: int, proj: str) -> PackedWeight:
    """The :class:`PackedWeight` of projection ``proj`` ("w13" or "w2") of MoE layer ``layer``."""
    root = Path(path)
    block = chord_pack_block(root)
    if layer not in block["moe_layers"]:
        raise CheckpointError(f"{root}: layer {layer} is not a MoE layer; MoE layers are {block['moe_layers']}")
    spec = block["projections"].get(proj)
    if spec is None:
        raise CheckpointError(f"{root}: projection {proj!r} unknown; expected one of {sorted(block['projections'])}")
    weight_map = json.loads((root / INDEX_NAME).read_text())["weight_map"]
    tensors = {}
    for key in spec["tensors"]:
        name = block["tensor_names"].format(layer=layer, proj=proj, tensor=key)
        if name not in weight_map:
            raise CheckpointError(f"{root}/{INDEX_NAME}: tensor {name} is missing")
        with safe_open(str(root / weight_map[name]), framework="pt") as f:
            tensors[key] = f.get_tensor(name)
    return PackedWeight.from_state_dict(spec["packed_weight"], tensors)
