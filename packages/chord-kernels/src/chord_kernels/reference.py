"""Pure-PyTorch reference MoE GEMMs and layer. These define the numbers every kernel must match.

Numerics: weights are dequantized exactly (:func:`chord_kernels.formats.dequantize`), products
accumulate in fp32, an optional top-k routing weight multiplies the fp32 accumulator, and each
GEMM output is rounded once to bf16. SiLU-and-mul runs in fp32 on the bf16 gate_up output and
rounds once; the top-k sum adds the bf16 down rows in fp32 and rounds once.
Rows that no local expert computes (non-local experts, padding) are zero.
"""

from __future__ import annotations

import torch

from chord_kernels.checks import require_int, require_same_device, require_tensor
from chord_kernels.errors import ChordInputError
from chord_kernels.formats import check_quantized, dequantize
from chord_kernels.packed import PackedWeight, unpack
from chord_kernels.routing import align_block_size

WeightLike = PackedWeight | tuple[torch.Tensor, torch.Tensor] | torch.Tensor
"""A packed weight of any layout, compressed-tensors ``(weight_packed, weight_scale)``, or an
already dequantized bf16 ``[E, N, K]`` tensor."""


def dequantize_weight(weight: WeightLike) -> torch.Tensor:
    """bf16 ``[E, N, K]`` from any packed form (exact)."""
    if isinstance(weight, torch.Tensor):
        return require_tensor("weight", weight, dtype=torch.bfloat16, ndim=3)
    if not isinstance(weight, PackedWeight) and not (isinstance(weight, tuple | list) and len(weight) == 2):
        raise ChordInputError(f"weight: expected a PackedWeight, a (weight_packed, weight_scale) pair or a bf16 "
                              f"[E, N, K] tensor, got {type(weight).__name__}")
    packed, scales = unpack(weight) if isinstance(weight, PackedWeight) else weight
    check_quantized(packed, scales)
    w = dequantize(packed, scales)
    return w.unsqueeze(0) if w.dim() == 2 else w


def _matmul_fp32(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return a.float() @ w.float().t()


def indexed_gemm(
    a: torch.Tensor,
    weight: WeightLike,
    sorted_token_ids: torch.Tensor,
    expert_ids: torch.Tensor,
    num_tokens_post_padded: torch.Tensor,
    *,
    block_m: int,
    top_k: int,
    topk_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """One MoE GEMM driven by vLLM routing tensors -> bf16 ``[num_slots, N]`` (unreduced).

    ``a`` is bf16 ``[rows, K]``; slot ``t`` reads row ``t // top_k`` (use ``top_k=1`` when ``a``
    already holds one row per slot, as for the down projection). ``num_slots`` is the sentinel
    value of ``sorted_token_ids``, i.e. ``rows * top_k``. With ``topk_weights`` (``[rows, top_k]``
    or flat), each slot's fp32 accumulator is multiplied by its weight before rounding.
    """
    require_tensor("a", a, dtype=torch.bfloat16, ndim=2)
    block_m = require_int("block_m", block_m, minimum=1)
    top_k = require_int("top_k", top_k, minimum=1)
    w = dequantize_weight(weight)
    if w.shape[-1] != a.shape[1]:
        raise ChordInputError(f"a: expected K={w.shape[-1]} columns to match the weight, got {a.shape[1]}")
    require_tensor("sorted_token_ids", sorted_token_ids, dtype=torch.int32, ndim=1)
    require_tensor("expert_ids", expert_ids, dtype=torch.int32, ndim=1)
    require_tensor("num_tokens_post_padded", num_tokens_post_padded, dtype=torch.int32, shape=(1,))
    if topk_weights is not None:
        require_tensor("topk_weights", topk_weights, dtype=(torch.float32, torch.bfloat16))
    require_same_device(a=a, weight=w, sorted_token_ids=sorted_token_ids, expert_ids=expert_ids)
    num_slots = a.shape[0] * top_k
    out = torch.zeros(num_slots, w.shape[1], dtype=torch.bfloat16, device=a.device)
    used = int(num_tokens_post_padded.item())
    room = min(sorted_token_ids.numel(), expert_ids.numel() * block_m)
    if not 0 <= used <= room:
        raise ChordInputError(
            f"num_tokens_post_padded: expected 0..{room} entries in use (sorted_token_ids holds "
            f"{sorted_token_ids.numel()}, expert_ids {expert_ids.numel()} blocks of block_m={block_m}), got {used}"
        )
    slots = sorted_token_ids[:used].long()
    if used and int(slots.min().item()) < 0:
        raise ChordInputError(f"sorted_token_ids: expected slots 0..{num_slots - 1} or the sentinel {num_slots}, "
                              f"got {int(slots.min().item())}")
    experts = expert_ids.long().repeat_interleave(block_m)[:used]
    real = (slots < num_slots) & (experts >= 0)
    slots, experts = slots[real], experts[real]
    scale = None
    if topk_weights is not None:
        scale = topk_weights.reshape(-1).float()
        if scale.numel() != num_slots:
            raise ChordInputError(f"topk_weights: expected {num_slots} weights, got {scale.numel()}")
    for e in torch.unique(experts).tolist():
        if e >= w.shape[0]:
            raise ChordInputError(f"expert_ids: expert {e} is out of range for {w.shape[0]} local experts")
        rows = slots[experts == e]
        acc = _matmul_fp32(a[rows // top_k], w[e])
        if scale is not None:
            acc = acc * scale[rows].unsqueeze(1)
        out[rows] = acc.to(torch.bfloat16)
    return out


def grouped_contiguous(a: torch.Tensor, weight: WeightLike, m_indices: torch.Tensor) -> torch.Tensor:
    """Grouped GEMM, contiguous layout: row ``i`` of ``a`` uses expert ``m_indices[i]`` (-1 -> zero row)."""
    require_tensor("a", a, dtype=torch.bfloat16, ndim=2)
    require_tensor("m_indices", m_indices, dtype=torch.int32, shape=(a.shape[0],))
    w = dequantize_weight(weight)
    if w.shape[-1] != a.shape[1]:
        raise ChordInputError(f"a: expected K={w.shape[-1]} columns to match the weight, got {a.shape[1]}")
    out = torch.zeros(a.shape[0], w.shape[1], dtype=torch.bfloat16, device=a.device)
    for e in torch.unique(m_indices[m_indices >= 0]).tolist():
        if e >= w.shape[0]:
            raise ChordInputError(f"m_indices: expert {e} is out of range for {w.shape[0]} experts")
        rows = torch.nonzero(m_indices == e).squeeze(1)
        out[rows] = _matmul_fp32(a[rows], w[e]).to(torch.bfloat16)
    return out


def grouped_masked(a: torch.Tensor, weight: WeightLike, masked_m: torch.Tensor) -> torch.Tensor:
    """Grouped GEMM, masked layout: ``a`` ``[G, max_m, K]`` (or flat) -> ``[G * max_m, N]``.

    Rows past ``masked_m[g]`` are zero here; kernels may leave them undefined.
    """
    w = dequantize_weight(weight)
    groups = w.shape[0]
    require_tensor("masked_m", masked_m, dtype=torch.int32, shape=(groups,))
    require_tensor("a", a, dtype=torch.bfloat16, ndim=(2, 3))
    if (a.dim() == 3 and a.shape[0] != groups) or (a.dim() == 2 and a.shape[0] % groups):
        raise ChordInputError(f"a: expected [{groups}, max_m, K] or [{groups} * max_m, K] for the weight's "
                              f"{groups} groups, got {list(a.shape)}")
    if a.shape[-1] != w.shape[-1]:
        raise ChordInputError(f"a: expected K={w.shape[-1]} columns to match the weight, got {a.shape[-1]}")
    a3 = a.reshape(groups, -1, a.shape[-1]) if a.dim() == 2 else a
    max_m = a3.shape[1]
    out = torch.zeros(groups, max_m, w.shape[1], dtype=torch.bfloat16, device=a.device)
    for g, m in enumerate(masked_m.tolist()):
        if m > max_m or m < 0:
            raise ChordInputError(f"masked_m[{g}]: expected 0..{max_m}, got {m}")
        out[g, :m] = _matmul_fp32(a3[g, :m], w[g]).to(torch.bfloat16)
    return out.reshape(groups * max_m, -1)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` for ``x = [gate | up]`` along the last dim; fp32 math, bf16 out."""
    require_tensor("x", x, dtype=torch.bfloat16, ndim=(1, 2, 3))
    if x.shape[-1] % 2:
        raise ChordInputError(f"x: expected an even last dimension [gate | up], got {x.shape[-1]}")
    gate, up = x.float().chunk(2, dim=-1)
    return (torch.nn.functional.silu(gate) * up).to(torch.bfloat16)


def moe_layer(
    hidden: torch.Tensor,
    w13: WeightLike,
    w2: WeightLike,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    global_num_experts: int | None = None,
    expert_map: torch.Tensor | None = None,
    block_m: int = 16,
) -> torch.Tensor:
    """Whole MoE layer: align -> gate_up -> SiLU-and-mul -> down (x top-k weight) -> sum over top-k.

    ``w13`` is ``[E, 2I, H]`` (gate rows then up rows), ``w2`` is ``[E, H, I]``. With
    ``expert_map`` only local experts contribute (an expert-parallel partial sum).
    """
    require_tensor("hidden", hidden, dtype=torch.bfloat16, ndim=2)
    require_tensor("topk_ids", topk_ids, dtype=(torch.int32, torch.int64), ndim=2)
    require_tensor("topk_weights", topk_weights, dtype=(torch.float32, torch.bfloat16), shape=tuple(topk_ids.shape))
    if topk_ids.shape[0] != hidden.shape[0]:
        raise ChordInputError(f"topk_ids: expected {hidden.shape[0]} rows to match hidden, got {topk_ids.shape[0]}")
    w13_full, w2_full = dequantize_weight(w13), dequantize_weight(w2)
    e, two_i, h = w13_full.shape
    if w2_full.shape[0] != e or h != hidden.shape[1] or w2_full.shape[1] != h or two_i != 2 * w2_full.shape[2]:
        raise ChordInputError(f"expected w13 [E, 2I, H] and w2 [E, H, I] with H={hidden.shape[1]}, got w13 "
                              f"{list(w13_full.shape)} and w2 {list(w2_full.shape)}")
    num_experts = global_num_experts if global_num_experts is not None else e
    if expert_map is None and num_experts != e:
        raise ChordInputError(f"global_num_experts={num_experts} differs from the {e} experts of the weights; "
                              "pass expert_map for expert parallelism")
    top_k = topk_ids.shape[1]
    routing = align_block_size(topk_ids, block_m, num_experts, expert_map)
    args = (routing.sorted_token_ids, routing.expert_ids, routing.num_tokens_post_padded)
    gate_up = indexed_gemm(hidden, w13_full, *args, block_m=block_m, top_k=top_k)
    act = silu_and_mul(gate_up)
    down = indexed_gemm(act, w2_full, *args, block_m=block_m, top_k=1, topk_weights=topk_weights)
    return down.reshape(hidden.shape[0], top_k, down.shape[1]).float().sum(dim=1).to(torch.bfloat16)
