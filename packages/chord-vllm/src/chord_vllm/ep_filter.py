"""Expert-parallel ranks read only the expert-range tensors that hold their own experts.

vLLM 0.33's safetensors iterator reads every tensor of a shard unless
``weight_utils.should_skip_weight(name, local_expert_ids)`` says to skip it, before reading. vLLM's
own rule knows only per-expert names (``.experts.<id>.``) and acts only under
``--enable-ep-weight-filter``, so it never skips a chord-pack range tensor. When a layer of a
chord-pack checkpoint in expert ranges is built, :func:`expect` records that layer's local experts
and wraps the function once per process: the wrapper skips a range tensor of a recorded layer that
holds none of its local experts and leaves every other name to vLLM's rule. Loaders that do not
ask (``fastsafetensors``, multithreaded loading) read every range, and the layer's no-op loaders
drop the other ranks' experts. The layer checks after loading that each local expert arrived, so a
wrong skip is an error, never uninitialized weights.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
from collections.abc import Callable, Iterable

from chord_vllm import _compat

RANGE_TENSOR = re.compile(r"(?:^|\.)layers\.(\d+)\.mlp\.experts\.chord\.(?:w13|w2)\.experts_(\d+)_(\d+)\.\w+$")
"""A chord-pack range tensor as it is named in the checkpoint: MoE layer, first and last expert."""
LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.mlp\.experts(?:\.|$)")
"""The MoE layer number in a ``RoutedExperts`` layer name."""
HOOK_SIGNATURE = ("weight_name", "local_expert_ids")
"""The parameters of vLLM 0.33's ``should_skip_weight``; another signature is left alone."""

_local_experts: dict[int, frozenset[int]] = {}
"""MoE layer number -> global ids of its local experts, for layers built from expert ranges. In a
server every layer of a process belongs to one rank; the last layer built for a number wins."""


def expect(layer_name: str, local_experts: Iterable[int]) -> bool:
    """Record that ``layer_name`` (a ``RoutedExperts`` name) holds ``local_experts`` (global ids)
    and install the skip rule in vLLM's loader; False (and one log line) where it cannot be."""
    match = LAYER.search(layer_name)
    if match is None:
        _compat.log_once(logging.INFO, f"Chord: {layer_name} has no layer number; this rank reads "
                                       "every expert range of it", key="ep_filter.layer")
        return False
    if not install():
        return False
    _local_experts[int(match.group(1))] = frozenset(local_experts)
    return True


def skips(name: str) -> bool:
    """True for a range tensor of a recorded layer that holds none of its local experts."""
    match = RANGE_TENSOR.search(name)
    if match is None:
        return False
    local = _local_experts.get(int(match.group(1)))
    first, last = int(match.group(2)), int(match.group(3))
    return local is not None and local.isdisjoint(range(first, last + 1))


def install() -> bool:
    """Wrap ``weight_utils.should_skip_weight`` with :func:`skips` (idempotent); False, logged once,
    on a vLLM other than 0.33 or one whose function has another signature."""
    import vllm
    from vllm.model_executor.model_loader import weight_utils

    current = getattr(weight_utils, "should_skip_weight", None)
    if getattr(current, "chord_wrapped", None) is not None:
        return True
    if not (_compat.vllm_version_supported(vllm.__version__) and callable(current)
            and tuple(inspect.signature(current).parameters) == HOOK_SIGNATURE):
        _compat.log_once(logging.INFO, f"Chord: vLLM {vllm.__version__} has no should_skip_weight("
                                       f"{', '.join(HOOK_SIGNATURE)}) in weight_utils; every rank "
                                       "reads every expert range", key="ep_filter.install")
        return False
    weight_utils.should_skip_weight = _wrap(current)
    return True


def _wrap(original: Callable[[str, set[int] | None], bool]) -> Callable[[str, set[int] | None], bool]:
    @functools.wraps(original)
    def should_skip_weight(weight_name: str, local_expert_ids: set[int] | None) -> bool:
        return skips(weight_name) or original(weight_name, local_expert_ids)

    should_skip_weight.chord_wrapped = original  # type: ignore[attr-defined]
    return should_skip_weight
