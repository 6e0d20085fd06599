"""Helpers for tests of the plugin inside the real vLLM 0.33 classes (on CPU in CI).

Layers are built the way ``FusedMoEFactory`` builds them (``RoutedExperts`` with a hand-made
``FusedMoEParallelConfig``), so one process can stand in for any TP or EP rank without a process
group. Weights reach the parameters through vLLM's own expert mapping and ``weight_loader``, as
``DeepseekV2Model.load_weights`` hands them over.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import torch


def require_vllm() -> None:
    """Skip the calling test module without vLLM 0.33, or fail under ``CHORD_REQUIRE_VLLM=1``."""
    problem = None
    if importlib.util.find_spec("vllm") is None:
        problem = "vLLM is not installed (`nox -s vllm` installs vLLM 0.33 on CPU and runs these tests)"
    else:
        import vllm

        from chord_vllm import _compat

        if not _compat.vllm_version_supported(vllm.__version__):
            problem = f"vLLM {vllm.__version__} is installed; these tests are for 0.33.x"
    if problem is None:
        return
    if os.environ.get("CHORD_REQUIRE_VLLM") == "1":
        raise RuntimeError(f"CHORD_REQUIRE_VLLM=1 but {problem}")
    pytest.skip(problem, allow_module_level=True)


require_vllm()

from safetensors.torch import load_file  # noqa: E402
from source_slices import tp_w2, tp_w13  # noqa: E402
from vllm.config import LoadConfig, ModelConfig, VllmConfig, set_current_vllm_config  # noqa: E402
from vllm.model_executor.layers.fused_moe import RoutedExperts  # noqa: E402
from vllm.model_executor.layers.fused_moe.activation import MoEActivation  # noqa: E402
from vllm.model_executor.layers.fused_moe.config import (  # noqa: E402
    FusedMoEConfig,
    FusedMoEParallelConfig,
    RoutingMethodType,
)
from vllm.model_executor.layers.fused_moe.expert_map_manager import ExpertMapManager  # noqa: E402
from vllm.model_executor.model_loader.weight_utils import get_quant_config  # noqa: E402

PREFIX = "model.layers.{layer}.mlp.experts"


def parallel_config(*, tp: int = 1, tp_rank: int = 0, ep: int = 1, ep_rank: int = 0, dp: int = 1,
                    all2all: str = "allgather_reducescatter", eplb: bool = False) -> FusedMoEParallelConfig:
    return FusedMoEParallelConfig(
        tp_size=tp, tp_rank=tp_rank, pcp_size=1, pcp_rank=0, dp_size=dp, dp_rank=0, ep_size=ep,
        ep_rank=ep_rank, sp_size=1, use_ep=ep > 1, all2all_backend=all2all, enable_eplb=eplb)


def moe_config(parallel: FusedMoEParallelConfig, *, experts: int, hidden: int, intermediate: int,
               top_k: int = 2, local: int | None = None, **overrides) -> FusedMoEConfig:
    return FusedMoEConfig(
        num_experts=experts, experts_per_token=top_k, hidden_dim=hidden, intermediate_size=intermediate,
        num_local_experts=local if local is not None else experts // parallel.ep_size,
        num_logical_experts=experts, activation=overrides.pop("activation", MoEActivation.SILU),
        device="cpu", routing_method=RoutingMethodType.DeepSeekV3, moe_parallel_config=parallel,
        in_dtype=overrides.pop("in_dtype", torch.bfloat16), **overrides)


def build_layer(quant_config, *, layer: int = 1, experts: int, hidden: int, intermediate: int,
                top_k: int = 2, placement: str = "linear", load_format: str = "auto", **parallel) -> RoutedExperts:
    """A ``RoutedExperts`` of one rank (``tp``/``tp_rank``/``ep``/``ep_rank`` keywords), built under
    a vLLM config with ``--load-format load_format``."""
    p = parallel_config(**parallel)
    manager = ExpertMapManager(
        max_num_batched_tokens=256, top_k=top_k, global_num_experts=experts, num_redundant_experts=0,
        # vLLM places round-robin only for grouped routing (DeepSeek V3); otherwise it falls back to linear
        num_expert_group=2 if placement == "round_robin" else None, moe_parallel_config=p,
        placement_strategy=placement, enable_eplb=False)
    cfg = moe_config(p, experts=experts, hidden=hidden, intermediate=intermediate, top_k=top_k,
                     local=manager.local_num_experts)
    with set_current_vllm_config(VllmConfig(load_config=LoadConfig(load_format=load_format))):
        return RoutedExperts(PREFIX.format(layer=layer), torch.bfloat16, cfg, quant_config,
                             expert_map_manager=manager)


def quant_config(checkpoint: Path):
    """vLLM's quantization config for a checkpoint, as ``VllmConfig`` resolves it."""
    model = ModelConfig(model=str(checkpoint), skip_tokenizer_init=True)
    config = get_quant_config(model, LoadConfig())
    config.maybe_update_config(model.model, hf_config=model.hf_config)
    return model, config


def read_tensors(checkpoint: Path) -> dict[str, torch.Tensor]:
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(checkpoint.glob("*.safetensors")):
        tensors.update(load_file(str(shard)))
    return tensors


def load_experts(layer: RoutedExperts, tensors: dict[str, torch.Tensor], *, mapper=None) -> int:
    """Load one MoE layer's checkpoint tensors the way ``DeepseekV2Model.load_weights`` does;
    returns how many tensors a parameter took."""
    model = torch.nn.Module()  # module path "experts.routed_experts" as under ...mlp.
    model.experts = torch.nn.Module()
    model.experts.routed_experts = layer
    params = dict(model.named_parameters())
    mapping = RoutedExperts.make_expert_params_mapping(
        model, "gate_proj", "down_proj", "up_proj", num_experts=layer.global_num_experts)
    stem = layer.layer_name.rsplit(".experts", 1)[0] + "."
    names = {n: n for n in tensors if n.startswith(stem + "experts.")}
    if mapper is not None:
        names = {n: mapper.map_name(n) for n in names}
    taken = 0
    for original, name in names.items():
        local = name.removeprefix(stem)
        for param_name, weight_name, expert_id, shard_id in mapping:
            if weight_name in local:
                target = local.replace(weight_name, param_name)
                param = params[target]
                taken += bool(param.weight_loader(param, tensors[original], target, shard_id=shard_id,
                                                  expert_id=expert_id, return_success=True))
                break
        else:
            param = params[local]
            param.weight_loader(param, tensors[original])
            taken += 1
    return taken


def source_weights(tensors: dict[str, torch.Tensor], layer: int, experts: list[int],
                   prefix: str = "") -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """(w13, w2) as compressed-tensors (packed, scales) stacks of ``experts``, gate rows then up."""
    p = f"{prefix}{PREFIX.format(layer=layer)}."

    def stack(projs: tuple[str, ...], kind: str) -> torch.Tensor:
        return torch.stack([torch.cat([tensors[f"{p}{e}.{q}.{kind}"] for q in projs]) for e in experts])

    gate_up, down = ("gate_proj", "up_proj"), ("down_proj",)
    return ((stack(gate_up, "weight_packed"), stack(gate_up, "weight_scale")),
            (stack(down, "weight_packed"), stack(down, "weight_scale")))


def tp_slice(w13, w2, rank: int, size: int):
    """Rank ``rank`` of ``size``'s share of source weights (gate and up rows, down columns)."""
    return tp_w13(*w13, rank, size), tp_w2(*w2, rank, size)


def routing(m: int, experts: int, top_k: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Fresh top-k ids (distinct per token) and fp32 weights for ``m`` tokens."""
    g = torch.Generator().manual_seed(seed)
    ids = [torch.randperm(experts, generator=g)[:top_k] for _ in range(m)]
    ids = torch.stack(ids).to(torch.int32) if m else torch.empty(0, top_k, dtype=torch.int32)
    return ids, torch.rand(m, top_k, generator=g)


def activations(m: int, hidden: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + 1)
    return (torch.randn(m, hidden, generator=g) * 0.5).to(torch.bfloat16)


def apply(layer: RoutedExperts, x: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The layer's experts through ``quant_method.apply`` (vLLM's FusedMoEKernel)."""
    with set_current_vllm_config(VllmConfig()):
        return layer.quant_method.apply(layer, x, weights, ids, None, None)
