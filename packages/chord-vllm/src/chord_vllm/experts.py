"""Chord's experts on vLLM's modular fused-MoE kernel.

Standard format (:class:`ChordIndexedExperts`): vLLM's prepare/finalize (no all2all, naive DP/EP
all-gather, DeepEP high-throughput, DeepEP v2) hands ``[M, H]`` bf16 activations and global top-k
ids; the experts run :func:`chord_vllm.core.moe_standard` into vLLM's workspaces and leave a reduced
``[M, H]`` output (``TopKWeightAndReduceNoOP``).

Batched format (:class:`ChordBatchedExperts`; ``CHORD_VLLM_BATCHED=0`` leaves it to vLLM): DeepEP
low-latency hands ``[E_local, max_m, H]`` with per-expert row counts; the experts run
:func:`chord_vllm.core.moe_batched` and leave unweighted rows for DeepEP's combine, which weights
and sums (``TopKWeightAndReduceDelegate``). The routed-scaling factor stays with vLLM's runner.
"""

from __future__ import annotations

import math
from abc import abstractmethod

import torch
import vllm.model_executor.layers.fused_moe.modular_kernel as mk
from vllm.model_executor.layers.fused_moe.activation import MoEActivation
from vllm.model_executor.layers.fused_moe.config import (
    FusedMoEConfig,
    FusedMoEParallelConfig,
    FusedMoEQuantConfig,
)
from vllm.model_executor.layers.fused_moe.topk_weight_and_reduce import (
    TopKWeightAndReduceDelegate,
    TopKWeightAndReduceNoOP,
)
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


class _ChordExperts(mk.FusedMoEExpertsModular):
    """What both activation formats share: the weights, the backend and vLLM's static checks."""

    def __init__(self, moe_config: FusedMoEConfig, quant_config: FusedMoEQuantConfig, *,
                 w13: PackedWeight, w2: PackedWeight, backend: core.Backend | None = None,
                 max_num_tokens: int | None = None, num_dispatchers: int | None = None):
        super().__init__(moe_config, quant_config, max_num_tokens=max_num_tokens, num_dispatchers=num_dispatchers)
        self.w13, self.w2 = w13, w2
        self.backend = backend or kernel_backend()

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
        self._run(output, hidden_states, topk_weights, topk_ids, global_num_experts, expert_map,
                  workspace13, workspace2, expert_tokens_meta)

    @abstractmethod
    def _run(self, output: torch.Tensor, hidden_states: torch.Tensor, topk_weights: torch.Tensor,
             topk_ids: torch.Tensor, global_num_experts: int, expert_map: torch.Tensor | None,
             workspace13: torch.Tensor, workspace2: torch.Tensor,
             expert_tokens_meta: mk.ExpertTokensMetadata | None) -> None:
        """The experts on checked arguments (``apply`` less what Chord refuses)."""


class ChordIndexedExperts(_ChordExperts):
    """W4A16 int4 group-32 experts on Chord's indexed kernels, for every Standard-format deployment."""

    def __init__(self, moe_config: FusedMoEConfig, quant_config: FusedMoEQuantConfig, *,
                 w13: PackedWeight, w2: PackedWeight, backend: core.Backend | None = None):
        super().__init__(moe_config, quant_config, w13=w13, w2=w2, backend=backend)

    @staticmethod
    def activation_format() -> mk.FusedMoEActivationFormat:
        return mk.FusedMoEActivationFormat.Standard

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
        return core.workspace_shapes(M, N, K, topk, core.routing_rows_bound(self.w13, self.w2, M, topk,
                                                                             global_num_experts))

    def finalize_weight_and_reduce_impl(self) -> mk.TopKWeightAndReduce:
        return TopKWeightAndReduceNoOP()

    def _run(self, output: torch.Tensor, hidden_states: torch.Tensor, topk_weights: torch.Tensor,
             topk_ids: torch.Tensor, global_num_experts: int, expert_map: torch.Tensor | None,
             workspace13: torch.Tensor, workspace2: torch.Tensor,
             expert_tokens_meta: mk.ExpertTokensMetadata | None) -> None:
        core.moe_standard(hidden_states, self.w13, self.w2, topk_weights, topk_ids,
                          global_num_experts=global_num_experts, expert_map=expert_map, out=output,
                          workspace13=workspace13, workspace2=workspace2, backend=self.backend)


class ChordBatchedExperts(_ChordExperts):
    """W4A16 int4 group-32 experts on Chord's indexed engine over masked rows, for vLLM's batched
    activation format (DeepEP low-latency; switched off by :data:`chord_vllm._compat.BATCHED_SWITCH`)."""

    def __init__(self, moe_config: FusedMoEConfig, quant_config: FusedMoEQuantConfig, max_num_tokens: int,
                 num_dispatchers: int, *, w13: PackedWeight, w2: PackedWeight, backend: core.Backend | None = None):
        backend = backend or kernel_backend()
        if backend.align is not core.chord_align:  # vLLM's top-k alignment: unused by masked rows
            backend = core.KERNELS
        super().__init__(moe_config, quant_config, w13=w13, w2=w2, backend=backend,
                         max_num_tokens=max_num_tokens, num_dispatchers=num_dispatchers)

    @property
    def max_m(self) -> int:
        """Rows per expert of the batched buffer: tokens per rank x dispatching ranks."""
        return self.max_num_tokens * self.num_dispatchers

    @staticmethod
    def activation_format() -> mk.FusedMoEActivationFormat:
        return mk.FusedMoEActivationFormat.BatchedExperts

    @staticmethod
    def _supports_parallel_config(moe_parallel_config: FusedMoEParallelConfig) -> bool:
        return moe_parallel_config.use_deepep_ll_kernels

    def moe_problem_size(self, a1: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
                         topk_ids: torch.Tensor) -> tuple[int, int, int, int, int]:
        return self.w13.num_experts, a1.size(1), self.w13.n, a1.size(-1), topk_ids.size(1)

    def workspace_shapes(self, M: int, N: int, K: int, topk: int, global_num_experts: int,
                         local_num_experts: int, expert_tokens_meta: mk.ExpertTokensMetadata | None,
                         activation: MoEActivation
                         ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        return core.batched_workspace_shapes(local_num_experts, self.max_m, N, K)

    def finalize_weight_and_reduce_impl(self) -> mk.TopKWeightAndReduce:
        return TopKWeightAndReduceDelegate()

    def expected_rows_per_expert(self, top_k: int, global_num_experts: int) -> int:
        """Mean rows per local expert, from the host-side token counts of vLLM's forward context
        (every DP rank's), else :data:`core.DECODE_ROWS_PER_EXPERT`: no device read, graph-safe."""
        from vllm.forward_context import get_forward_context, is_forward_context_available

        dp = get_forward_context().dp_metadata if is_forward_context_available() else None
        if dp is None:
            return core.DECODE_ROWS_PER_EXPERT
        tokens = int(dp.num_tokens_across_dp_cpu.sum())  # a CPU tensor
        return math.ceil(tokens * top_k / max(1, global_num_experts))

    def _run(self, output: torch.Tensor, hidden_states: torch.Tensor, topk_weights: torch.Tensor,
             topk_ids: torch.Tensor, global_num_experts: int, expert_map: torch.Tensor | None,
             workspace13: torch.Tensor, workspace2: torch.Tensor,
             expert_tokens_meta: mk.ExpertTokensMetadata | None) -> None:
        if expert_tokens_meta is None or hidden_states.dim() != 3 or hidden_states.size(1) != self.max_m:
            raise ValueError(
                f"batched experts: expected [{self.w13.num_experts}, {self.max_m}, H] activations with "
                f"per-expert token counts, got {list(hidden_states.shape)} and "
                f"{'no counts' if expert_tokens_meta is None else 'counts'}"
            )
        expected_m = self.expected_rows_per_expert(topk_ids.size(1), global_num_experts)
        core.moe_batched(hidden_states, self.w13, self.w2, expert_tokens_meta.expert_num_tokens,
                         expected_m=expected_m, out=output, workspace13=workspace13, workspace2=workspace2,
                         backend=self.backend)
