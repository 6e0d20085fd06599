"""Chord's experts on vLLM's modular fused-MoE kernel (Standard activation format).

vLLM's prepare/finalize (no all2all, naive DP/EP all-gather, DeepEP high-throughput, DeepEP v2)
hands these experts ``[M, H]`` bf16 activations and global top-k ids; they run :mod:`chord_vllm.core`
into vLLM's workspaces and leave a reduced ``[M, H]`` output (``TopKWeightAndReduceNoOP``). The
routed-scaling factor stays with vLLM's runner.
"""

from __future__ import annotations

import torch
import vllm.model_executor.layers.fused_moe.modular_kernel as mk
from vllm.model_executor.layers.fused_moe.activation import MoEActivation
from vllm.model_executor.layers.fused_moe.config import (
    FusedMoEConfig,
    FusedMoEParallelConfig,
    FusedMoEQuantConfig,
)
from vllm.model_executor.layers.fused_moe.topk_weight_and_reduce import TopKWeightAndReduceNoOP
from vllm.model_executor.layers.quantization.utils.quant_utils import QuantKey, kInt4Static32

from chord_kernels import PackedWeight
from chord_vllm import _compat, core


def _vllm_align() -> core.Backend | None:
    """vLLM's CUDA ``moe_align_block_size`` (one launch) when its extension is loaded."""
    if not hasattr(torch.ops, "_moe_C") or not hasattr(torch.ops._moe_C, "moe_align_block_size"):
        return None
    from vllm.model_executor.layers.fused_moe.moe_align_block_size import moe_align_block_size

    def align(topk_ids: torch.Tensor, block_m: int, num_experts: int,
              expert_map: torch.Tensor | None) -> core.Routing:
        return moe_align_block_size(topk_ids, block_m, num_experts, expert_map)

    return core.Backend(core.kernel_gemm, align, "chord kernels, vLLM routing")


def kernel_backend() -> core.Backend:
    """The backend the experts run: Chord's kernels (CPU tests replace this function)."""
    return _vllm_align() or core.KERNELS


class ChordIndexedExperts(mk.FusedMoEExpertsModular):
    """W4A16 int4 group-32 experts on Chord's indexed kernels, for every Standard-format deployment."""

    def __init__(self, moe_config: FusedMoEConfig, quant_config: FusedMoEQuantConfig, *,
                 w13: PackedWeight, w2: PackedWeight, backend: core.Backend | None = None):
        super().__init__(moe_config, quant_config)
        self.w13, self.w2 = w13, w2
        self.backend = backend or kernel_backend()

    @staticmethod
    def activation_format() -> mk.FusedMoEActivationFormat:
        return mk.FusedMoEActivationFormat.Standard

    @staticmethod
    def _supports_current_device() -> bool:
        return _compat.device_arch()[0] is not None

    @staticmethod
    def _supports_no_act_and_mul() -> bool:
        return False

    @staticmethod
    def _supports_quant_scheme(weight_key: QuantKey | None, activation_key: QuantKey | None) -> bool:
        return weight_key == kInt4Static32 and activation_key is None

    @staticmethod
    def _supports_activation(activation: MoEActivation) -> bool:
        return activation == MoEActivation.SILU

    @staticmethod
    def _supports_parallel_config(moe_parallel_config: FusedMoEParallelConfig) -> bool:
        p = moe_parallel_config
        return not (p.use_batched_activation_format or p.use_fi_nvl_one_sided_kernels
                    or p.use_fi_nvl_two_sided_kernels or p.use_mori_kernels or p.use_moonep_kernels
                    or p.use_passthrough_all2all)

    def moe_problem_size(self, a1: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
                         topk_ids: torch.Tensor) -> tuple[int, int, int, int, int]:
        # The default reads N from w1.shape[1], which for packed tiles is not N.
        return self.w13.num_experts, a1.size(0), self.w13.n, a1.size(-1), topk_ids.size(1)

    def workspace_shapes(self, M: int, N: int, K: int, topk: int, global_num_experts: int,
                         local_num_experts: int, expert_tokens_meta: mk.ExpertTokensMetadata | None,
                         activation: MoEActivation
                         ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        return core.workspace_shapes(M, N, K, topk)

    def finalize_weight_and_reduce_impl(self) -> mk.TopKWeightAndReduce:
        return TopKWeightAndReduceNoOP()

    def apply(self, output: torch.Tensor, hidden_states: torch.Tensor, w1: torch.Tensor,
              w2: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor,
              activation: MoEActivation, global_num_experts: int, expert_map: torch.Tensor | None,
              a1q_scale: torch.Tensor | None, a2_scale: torch.Tensor | None,
              workspace13: torch.Tensor, workspace2: torch.Tensor,
              expert_tokens_meta: mk.ExpertTokensMetadata | None,
              apply_router_weight_on_input: bool) -> None:
        if apply_router_weight_on_input or a1q_scale is not None or self.post_gemm2_hook is not None:
            raise NotImplementedError(
                "Chord experts take bf16 activations with the router weight applied after the down "
                f"GEMM; got apply_router_weight_on_input={apply_router_weight_on_input}, quantized "
                f"activations={a1q_scale is not None}, a post-GEMM2 hook={self.post_gemm2_hook is not None}"
            )
        core.moe_standard(hidden_states, self.w13, self.w2, topk_weights, topk_ids,
                          global_num_experts=global_num_experts, expert_map=expert_map, out=output,
                          workspace13=workspace13, workspace2=workspace2, backend=self.backend)
