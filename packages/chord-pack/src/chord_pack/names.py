"""Tensor names and projection tables: the one place that knows how tensors are called.

Source (compressed-tensors, as Moonshot ships Kimi K2.x): routed expert ``E`` of MoE layer ``L``
is ``{prefix}model.layers.{L}.mlp.experts.{E}.{gate_proj|up_proj|down_proj}.{kind}`` with
``kind`` one of :data:`EXPERT_KINDS`. Output: the experts of one layer become two packed
projections, ``{prefix}model.layers.{L}.mlp.experts.chord.{w13|w2}.{tensor}``, where ``w13``
stacks ``gate_proj`` rows over ``up_proj`` rows and ``w2`` is ``down_proj``.
"""

from __future__ import annotations

import re

SOURCE_PROJECTIONS: tuple[str, ...] = ("gate_proj", "up_proj", "down_proj")
EXPERT_KINDS: tuple[str, ...] = ("weight_packed", "weight_scale", "weight_shape")
"""The tensors of one quantized source projection (int32 codes, bf16 scales, its ``[N, K]``)."""
DIGEST_KINDS: tuple[str, ...] = ("weight_packed", "weight_scale")
"""What a source digest covers, per expert and in this order (``weight_shape`` is checked, not kept)."""
PACKED_PROJECTIONS: dict[str, tuple[str, ...]] = {"w13": ("gate_proj", "up_proj"), "w2": ("down_proj",)}
"""Output projection -> the source projections stacked along N, in order."""

EXPERT_RE = re.compile(
    r"^(?P<prefix>.*?)model\.layers\.(?P<layer>\d+)\.mlp\.experts\.(?P<expert>\d+)\."
    r"(?P<proj>gate_proj|up_proj|down_proj)\.(?P<kind>weight_[a-z_]+)$"
)
"""A routed-expert source tensor (any ``weight_*`` kind, so that unsupported ones can be named)."""
LAYER_RE = re.compile(r"model\.layers\.(\d+)\.")
PACKED_PATTERN = "model.layers.{layer}.mlp.experts.chord.{proj}.{tensor}"
"""Name of a packed tensor after the prefix; recorded in the ``chord_pack`` block as ``tensor_names``."""


def expert_name(prefix: str, layer: int, expert: int, proj: str, kind: str) -> str:
    """Source tensor ``kind`` of projection ``proj`` of expert ``expert`` in MoE layer ``layer``."""
    return f"{prefix}model.layers.{layer}.mlp.experts.{expert}.{proj}.{kind}"


def packed_name(prefix: str, layer: int, proj: str, key: str) -> str:
    """Output name of tensor ``key`` of the packed ``proj`` (w13/w2) of MoE layer ``layer``."""
    return prefix + PACKED_PATTERN.format(layer=layer, proj=proj, tensor=key)


def expert_nk(proj: str, hidden: int, intermediate: int) -> tuple[int, int]:
    """``[N, K]`` of one expert's source projection: ``[I, H]`` for gate/up, ``[H, I]`` for down."""
    return (hidden, intermediate) if proj == "down_proj" else (intermediate, hidden)


def source_digest_key(layer: int, proj: str) -> str:
    """Key of ``source_digests`` for source projection ``proj`` of MoE layer ``layer``."""
    return f"layers.{layer}.{proj}"


def source_digest_names(prefix: str, layer: int, proj: str, num_experts: int) -> list[str]:
    """The source tensors a source digest covers, in the order they are hashed."""
    return [expert_name(prefix, layer, e, proj, kind) for e in range(num_experts) for kind in DIGEST_KINDS]
