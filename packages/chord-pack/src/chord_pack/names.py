"""Tensor names and projection tables: the one place that knows how tensors are called.

Source (compressed-tensors, as Moonshot ships Kimi K2.x): routed expert ``E`` of MoE layer ``L``
is ``{prefix}model.layers.{L}.mlp.experts.{E}.{gate_proj|up_proj|down_proj}.{kind}`` with
``kind`` one of :data:`EXPERT_KINDS`. Output: the experts of one layer become two packed
projections, ``{prefix}model.layers.{L}.mlp.experts.chord.{w13|w2}.{tensor}``, where ``w13``
stacks ``gate_proj`` rows over ``up_proj`` rows and ``w2`` is ``down_proj``. Written in expert
ranges, each range of experts ``first..last`` (inclusive) is a tensor of its own,
``...chord.{w13|w2}.experts_{first}_{last}.{tensor}``, so that a loader reads only its experts.
Expert ranges are ``range`` objects (``range(6, 12)`` is experts 6..11).
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
"""Name of a packed tensor of all experts after the prefix; recorded in the ``chord_pack`` block as
``tensor_names``."""
RANGE_PATTERN = "model.layers.{layer}.mlp.experts.chord.{proj}.experts_{first}_{last}.{tensor}"
"""Name of the packed tensor of experts ``first..last`` (inclusive), when written in expert ranges."""


def expert_name(prefix: str, layer: int, expert: int, proj: str, kind: str) -> str:
    """Source tensor ``kind`` of projection ``proj`` of expert ``expert`` in MoE layer ``layer``."""
    return f"{prefix}model.layers.{layer}.mlp.experts.{expert}.{proj}.{kind}"


def packed_name(pattern: str, layer: int, proj: str, key: str, experts: range | None = None) -> str:
    """Name of tensor ``key`` of the packed ``proj`` (w13/w2) of MoE layer ``layer`` from a
    ``tensor_names`` ``pattern`` (prefix included); ``experts`` is its range (None: all experts)."""
    if experts is None:
        return pattern.format(layer=layer, proj=proj, tensor=key)
    return pattern.format(layer=layer, proj=proj, tensor=key, first=experts.start, last=experts.stop - 1)


def expert_ranges(num_experts: int, per_tensor: int) -> list[range]:
    """``num_experts`` experts cut into consecutive ranges of ``per_tensor`` (the last may be shorter)."""
    return [range(e, min(num_experts, e + per_tensor)) for e in range(0, num_experts, per_tensor)]


def experts_label(experts: range | None) -> str:
    """`` experts 6-11`` for a range (for messages), nothing for all experts."""
    return "" if experts is None else f" experts {experts.start}-{experts.stop - 1}"


def expert_nk(proj: str, hidden: int, intermediate: int) -> tuple[int, int]:
    """``[N, K]`` of one expert's source projection: ``[I, H]`` for gate/up, ``[H, I]`` for down."""
    return (hidden, intermediate) if proj == "down_proj" else (intermediate, hidden)


def source_digest_key(layer: int, proj: str, experts: range | None = None) -> str:
    """Key of ``source_digests`` for source projection ``proj`` of MoE layer ``layer``: all its
    experts, or (written in expert ranges) the experts of one range."""
    key = f"layers.{layer}.{proj}"
    return key if experts is None else f"{key}.experts_{experts.start}_{experts.stop - 1}"


def source_digest_names(prefix: str, layer: int, proj: str, experts: range) -> list[str]:
    """The source tensors a source digest covers, in the order they are hashed."""
    return [expert_name(prefix, layer, e, proj, kind) for e in experts for kind in DIGEST_KINDS]
