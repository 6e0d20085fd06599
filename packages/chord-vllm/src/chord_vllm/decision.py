"""Chord or vLLM's own method, for one MoE layer, decided once when the layer is built.

Chord serves a layer only when every condition holds; otherwise vLLM keeps it and one log line per
reason says why. With ``CHORD_VLLM=1`` a failed condition is an error instead. vLLM's batched
activation format (DeepEP low-latency) runs Chord's batched experts unless ``CHORD_VLLM_BATCHED=0``
leaves it to vLLM; either way one log line says which and why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from vllm.model_executor.layers.fused_moe import RoutedExperts
from vllm.model_executor.layers.fused_moe import modular_kernel as mk
from vllm.model_executor.layers.fused_moe.all2all_utils import maybe_roundup_layer_hidden_size
from vllm.model_executor.layers.quantization.utils.quant_utils import kInt4Static32

from chord_vllm import _compat
from chord_vllm.experts import ChordBatchedExperts, ChordIndexedExperts

SOURCE_FORMAT = "pack-quantized"
PACKED_FORMAT = "chord-packed"


@dataclass(frozen=True)
class Decision:
    use_chord: bool
    profile: str = ""
    reason: str = ""


def _scheme_problem(schemes: list[dict | None]) -> str | None:
    """Why these compressed-tensors schemes (gate, up, down) are not Chord's W4A16 int4 g32 sym."""
    scheme = schemes[0]
    if any(s != scheme for s in schemes[1:]):
        return "its gate, up and down projections have different quantization schemes"
    if scheme is None:
        return "its experts are not quantized"
    w, fmt = scheme.get("weights"), scheme.get("format")
    if scheme.get("input_activations") is not None:
        return "its activations are quantized (Chord is W4A16)"
    if fmt not in (SOURCE_FORMAT, PACKED_FORMAT):
        return f"its format is {fmt!r} (Chord reads {SOURCE_FORMAT!r} and {PACKED_FORMAT!r})"
    wanted = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True,
              "dynamic": False}
    for field, want in wanted.items():
        have = getattr(w, field, None)
        have = getattr(have, "value", have)  # compressed-tensors enums
        if have != want:
            return f"its weights have {field}={have!r} (Chord needs {want!r})"
    actorder = getattr(getattr(w, "actorder", None), "value", getattr(w, "actorder", None))
    if actorder not in (None, "static", "weight"):
        return f"its weights have actorder={actorder!r}"
    return None


def _layer_problem(layer: RoutedExperts) -> str | None:
    """Why this layer's configuration is not one Chord's experts run."""
    moe = layer.moe_config
    parallel = moe.moe_parallel_config
    if moe.moe_backend != "auto":
        return f"--moe-backend {moe.moe_backend} was asked for"
    if moe.in_dtype != torch.bfloat16:
        return f"activations are {moe.in_dtype} (Chord runs bf16)"
    if moe.has_bias or any(x is not None for x in (moe.swiglu_limit, moe.swiglu_alpha, moe.swiglu_beta)):
        return "the experts have biases or a clamped/scaled SwiGLU"
    if layer.apply_router_weight_on_input:
        return "the router weight is applied to the input"
    if parallel.enable_eplb:
        return "EPLB is on (Chord's method does not rebalance experts)"
    batched = parallel.use_batched_activation_format
    if batched and not _compat.batched_wanted():
        return (f"{_compat.BATCHED_SWITCH}=0 leaves the {parallel.all2all_backend} all2all's batched "
                f"activation format to vLLM")
    if maybe_roundup_layer_hidden_size(moe.hidden_dim, moe.in_dtype, parallel) != moe.hidden_dim:
        return f"the {parallel.all2all_backend} all2all pads the hidden size {moe.hidden_dim}"
    if moe.hidden_dim % 32 or moe.intermediate_size_per_partition % 32:
        return (f"hidden size {moe.hidden_dim} or intermediate size per rank "
                f"{moe.intermediate_size_per_partition} is not a multiple of 32")
    if moe.num_local_experts >= 1 << 16:
        return f"{moe.num_local_experts} local experts (Chord takes at most 65535)"
    # vLLM's own checks for experts classes: device, activation, parallel config, LoRA, batch
    # invariance, ...
    experts, fmt = ((ChordBatchedExperts, mk.FusedMoEActivationFormat.BatchedExperts) if batched
                    else (ChordIndexedExperts, mk.FusedMoEActivationFormat.Standard))
    if not experts._supports_parallel_config(parallel):  # vLLM's reason would print the whole config
        return (f"the {parallel.all2all_backend} all2all is not supported (Chord's experts take "
                "allgather_reducescatter, deepep_high_throughput, deepep_v2 and deepep_low_latency)")
    ok, why = experts.is_supported_config(experts, moe, kInt4Static32, None, fmt)
    return None if ok else why


def decide(layer: RoutedExperts, schemes: list[dict | None]) -> Decision:
    """Whether Chord serves ``layer``, whose gate/up/down compressed-tensors schemes are ``schemes``."""
    mode = _compat.mode()
    if mode == "off":
        return Decision(False, reason=f"{_compat.ENV_SWITCH}=0")
    arch, reason = _compat.device_arch()
    reason = _scheme_problem(schemes) or (reason if arch is None else _layer_problem(layer))
    if reason is None and mode != "force":
        reason = _compat.nvcc_problem()
    if reason is None:
        tp_profile, ep_profile = _compat.PROFILE_BY_ARCH[arch]
        parallel = layer.moe_config.moe_parallel_config
        if parallel.use_batched_activation_format:
            _compat.log_once(logging.INFO, f"Chord's batched experts run the {parallel.all2all_backend} "
                                           f"all2all's batched activation format ({_compat.BATCHED_WHY}; "
                                           f"{_compat.BATCHED_SWITCH}=0 leaves it to vLLM)")
        return Decision(True, profile=ep_profile if layer.moe_config.use_ep else tp_profile)
    if mode == "force":
        raise ValueError(f"{layer.layer_name}: {_compat.ENV_SWITCH}=1 forces Chord, but {reason}")
    if schemes[0] is not None:  # an unquantized (ignored) MoE layer is not news
        _compat.log_once(logging.INFO, f"Chord does not serve MoE layers like {layer.layer_name}: "
                                       f"{reason}; vLLM's own method runs them", key=reason)
    return Decision(False, reason=reason)
