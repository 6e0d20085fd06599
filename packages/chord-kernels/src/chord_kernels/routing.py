"""Routing tensors for both kernel families.

``align_block_size`` follows vLLM's ``moe_align_block_size`` contract exactly and never
synchronizes the host (shapes depend only on input shapes), so it is CUDA-graph capturable; on
CUDA tensors it is CUDA kernels (:mod:`chord_kernels.ops.align`), elsewhere pure PyTorch.
The grouped builders (DeepGEMM-style contiguous and masked layouts) size their outputs from the
routed counts unless told a bound, which costs one host synchronization; they serve prefill.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from chord_kernels.checks import require_int, require_tensor
from chord_kernels.errors import ChordInputError

CONTIGUOUS_ALIGNMENT = 128
"""Rows per expert in the grouped contiguous layout are padded to this multiple."""

_INDEX_DTYPES = (torch.int32, torch.int64)


@dataclass(frozen=True)
class AlignedRouting:
    """vLLM routing: token slots sorted by expert and padded to ``block_m``.

    ``sorted_token_ids`` int32 ``[capacity]``: flat slot index ``token * top_k + j``, or the
    sentinel ``M * top_k`` for padding. ``expert_ids`` int32 ``[capacity / block_m]``: the local
    expert of each block, -1 for a non-local expert or a block past the end.
    ``num_tokens_post_padded`` int32 ``[1]`` on the device: how many entries are in use.
    """

    sorted_token_ids: torch.Tensor
    expert_ids: torch.Tensor
    num_tokens_post_padded: torch.Tensor
    block_m: int
    num_slots: int
    """``M * top_k``: also the sentinel value."""
    top_k: int


def _check_topk_ids(topk_ids: torch.Tensor) -> None:
    require_tensor("topk_ids", topk_ids, dtype=_INDEX_DTYPES, ndim=2)


def _check_expert_map(expert_map: torch.Tensor | None, num_experts: int, device: torch.device) -> None:
    if expert_map is None:
        return
    require_tensor("expert_map", expert_map, dtype=_INDEX_DTYPES, shape=(num_experts,), device=device)


def _expert_counts(flat: torch.Tensor, num_experts: int) -> torch.Tensor:
    # index_add_ (unlike bincount) does not read the maximum back to the host.
    counts = torch.zeros(num_experts, dtype=torch.int64, device=flat.device)
    return counts.index_add_(0, flat, torch.ones_like(flat))


def _aligned_sizes(numel: int, num_experts: int, block_m: int) -> tuple[int, int]:
    """(capacity, blocks) of an aligned routing: room for every expert's last partial block."""
    capacity = numel + num_experts * (block_m - 1)
    return capacity, math.ceil(capacity / block_m)


def align_block_size(
    topk_ids: torch.Tensor,
    block_m: int,
    num_experts: int,
    expert_map: torch.Tensor | None = None,
) -> AlignedRouting:
    """Sort the ``[M, top_k]`` expert choices by expert and pad each expert to ``block_m`` rows.

    ``num_experts`` counts global experts (the range of ``topk_ids``); ``expert_map`` maps a
    global id to its local id or -1, as in vLLM expert parallelism. Within an expert, slots keep
    ascending flat order. Capacity is ``numel + num_experts * (block_m - 1)``. Slots whose id lies
    outside ``[0, num_experts)`` are not routed (vLLM's ``ignore_invalid_experts``; the top-k sums
    skip them too). CUDA tensors take one kernel launch, three above 2048 slots
    (:mod:`chord_kernels.ops.align`), other devices plain PyTorch; both give the same tensors.
    """
    _check_topk_ids(topk_ids)
    block_m = require_int("block_m", block_m, minimum=1)
    num_experts = require_int("num_experts", num_experts, minimum=1)
    _check_expert_map(expert_map, num_experts, topk_ids.device)
    device, numel = topk_ids.device, topk_ids.numel()
    capacity, num_blocks = _aligned_sizes(numel, num_experts, block_m)
    if device.type == "cuda":
        from chord_kernels.ops import align

        sorted_token_ids = torch.empty(capacity, dtype=torch.int32, device=device)
        expert_ids = torch.empty(num_blocks, dtype=torch.int32, device=device)
        total = torch.empty(1, dtype=torch.int32, device=device)
        local_map = None if expert_map is None else expert_map.to(torch.int32).contiguous()
        align.align_into(topk_ids.reshape(-1).contiguous(), local_map, block_m, num_experts, sorted_token_ids,
                         expert_ids, total)
        return AlignedRouting(sorted_token_ids, expert_ids, total, block_m, numel, topk_ids.shape[1])
    return _align_with_torch(topk_ids, block_m, num_experts, expert_map)


def _align_with_torch(topk_ids: torch.Tensor, block_m: int, num_experts: int,
                      expert_map: torch.Tensor | None) -> AlignedRouting:
    """:func:`align_block_size` in PyTorch operations (a stable sort), on any device."""
    device, numel = topk_ids.device, topk_ids.numel()
    capacity, num_blocks = _aligned_sizes(numel, num_experts, block_m)
    flat = topk_ids.reshape(-1).to(torch.int64)
    routed = (flat >= 0) & (flat < num_experts)
    key = torch.where(routed, flat, num_experts)  # unrouted slots sort behind every expert
    counts = _expert_counts(key, num_experts + 1)[:num_experts]
    padded = (counts + block_m - 1) // block_m * block_m
    padded_end = torch.cumsum(padded, 0)
    padded_start = padded_end - padded
    count_start = torch.cumsum(counts, 0) - counts

    order = torch.argsort(key, stable=True)
    sorted_experts = key[order]
    kept = sorted_experts < num_experts
    sorted_experts = sorted_experts.clamp_max(num_experts - 1)
    rank = torch.arange(numel, device=device) - count_start[sorted_experts]
    spare = num_blocks * block_m  # where unrouted slots go: one element past the blocks, dropped
    dest = torch.where(kept, padded_start[sorted_experts] + rank, spare)

    sorted_token_ids = torch.full((spare + 1,), numel, dtype=torch.int32, device=device)
    sorted_token_ids[dest] = order.to(torch.int32)
    sorted_token_ids = sorted_token_ids[:capacity]

    block_start = torch.arange(num_blocks, device=device, dtype=torch.int64) * block_m
    block_expert = torch.searchsorted(padded_end, block_start, right=True)
    in_use = block_expert < num_experts
    block_expert = block_expert.clamp_max(num_experts - 1)
    if expert_map is not None:
        block_expert = expert_map.to(torch.int64)[block_expert]
    expert_ids = torch.where(in_use, block_expert, -1).to(torch.int32)

    total = padded_end[-1:].to(torch.int32)
    return AlignedRouting(sorted_token_ids, expert_ids, total, block_m, numel, topk_ids.shape[1])


def _local_ids(topk_ids: torch.Tensor, num_experts: int, expert_map: torch.Tensor | None) -> tuple[torch.Tensor, int]:
    """Flat local expert id of every slot (-1 where non-local, or where the id lies outside
    ``[0, num_experts)``: not routed, as in :func:`align_block_size`) and the number of local experts
    (the map's local ids must be ``0 .. num_local - 1``; one host read, like the callers' own)."""
    flat = topk_ids.reshape(-1).to(torch.int64)
    routed = (flat >= 0) & (flat < num_experts)
    if expert_map is None:
        return torch.where(routed, flat, -1), num_experts
    local = expert_map.to(torch.int64)
    num_local, top = torch.stack([(local >= 0).sum(), local.max()]).tolist()
    if top >= num_local:
        raise ChordInputError(f"expert_map: expected local ids 0..{num_local - 1} for its {num_local} local experts, "
                              f"got {top}")
    return torch.where(routed, local[flat.clamp(0, num_experts - 1)], -1), num_local


def _gather_rows(hidden: torch.Tensor, row_slots: torch.Tensor, top_k: int) -> torch.Tensor:
    """``hidden`` row ``slot // top_k`` for every entry of ``row_slots``; zero where it is -1."""
    if hidden.shape[0] == 0:  # no tokens: every row is padding (and there is no row 0 to read)
        return hidden.new_zeros((*row_slots.shape, hidden.shape[-1]))
    rows = hidden[row_slots.clamp_min(0) // top_k]
    return torch.where((row_slots >= 0).unsqueeze(-1), rows, 0).to(hidden.dtype)


@dataclass(frozen=True)
class ContiguousRouting:
    """Grouped contiguous layout: each local expert's rows padded to ``alignment`` rows.

    ``m_indices`` int32 ``[rows]``: the expert of each row, -1 for padding. ``row_slots`` int64
    ``[rows]``: the flat slot (``token * top_k + j``) a row holds, -1 for padding. ``expected_m``:
    the mean real rows per local expert (the host-side hint ``grouped.contiguous`` plans with).
    """

    m_indices: torch.Tensor
    row_slots: torch.Tensor
    num_groups: int
    alignment: int
    top_k: int
    expected_m: int

    def gather(self, hidden: torch.Tensor) -> torch.Tensor:
        """Activations in the contiguous layout; padding rows are zero."""
        return _gather_rows(hidden, self.row_slots, self.top_k)


def contiguous_layout(
    topk_ids: torch.Tensor,
    num_experts: int,
    alignment: int = CONTIGUOUS_ALIGNMENT,
    expert_map: torch.Tensor | None = None,
) -> ContiguousRouting:
    """Rows for the grouped contiguous GEMM (one host sync: the padded row count)."""
    _check_topk_ids(topk_ids)
    num_experts = require_int("num_experts", num_experts, minimum=1)
    _check_expert_map(expert_map, num_experts, topk_ids.device)
    alignment = require_int("alignment", alignment, minimum=1)
    local, groups = _local_ids(topk_ids, num_experts, expert_map)
    keep = torch.nonzero(local >= 0).squeeze(1)
    experts = local[keep]
    counts = _expert_counts(experts, groups) if groups else torch.zeros(0, dtype=torch.int64, device=local.device)
    padded = (counts + alignment - 1) // alignment * alignment
    padded_start = torch.cumsum(padded, 0) - padded
    count_start = torch.cumsum(counts, 0) - counts
    total = int(padded.sum().item())
    order = torch.argsort(experts, stable=True)
    sorted_experts = experts[order]
    dest = padded_start[sorted_experts] + torch.arange(order.numel(), device=local.device) - count_start[sorted_experts]
    row_slots = torch.full((total,), -1, dtype=torch.int64, device=local.device)
    row_slots[dest] = keep[order]
    block = torch.repeat_interleave(torch.arange(groups, device=local.device), padded // alignment) if groups else padded
    m_indices = block.repeat_interleave(alignment).to(torch.int32)
    m_indices = torch.where(row_slots >= 0, m_indices, -1).to(torch.int32)
    expected_m = round(keep.numel() / groups) if groups else 0
    return ContiguousRouting(m_indices, row_slots, groups, alignment, topk_ids.shape[1], expected_m)


@dataclass(frozen=True)
class MaskedRouting:
    """Grouped masked layout: ``max_m`` rows per expert, of which the first ``masked_m[g]`` are real.

    ``row_slots`` int64 ``[G, max_m]``: the flat slot each row holds, -1 past ``masked_m``.
    ``expected_m`` is the mean rows per expert (a host-side hint that sizes tiles).
    """

    masked_m: torch.Tensor
    row_slots: torch.Tensor
    expected_m: int
    top_k: int

    @property
    def max_m(self) -> int:
        return self.row_slots.shape[1]

    def gather(self, hidden: torch.Tensor) -> torch.Tensor:
        """Activations ``[G, max_m, K]``; rows past ``masked_m`` are zero."""
        return _gather_rows(hidden, self.row_slots, self.top_k)


def masked_layout(
    topk_ids: torch.Tensor,
    num_experts: int,
    max_m: int | None = None,
    expert_map: torch.Tensor | None = None,
) -> MaskedRouting:
    """Rows for the grouped masked GEMM (one host sync: the largest per-expert count).

    ``max_m`` defaults to that largest count; a smaller ``max_m`` is an error, never a silent drop.
    """
    _check_topk_ids(topk_ids)
    num_experts = require_int("num_experts", num_experts, minimum=1)
    _check_expert_map(expert_map, num_experts, topk_ids.device)
    if max_m is not None:
        max_m = require_int("max_m", max_m, minimum=1)
    local, groups = _local_ids(topk_ids, num_experts, expert_map)
    device = local.device
    keep = torch.nonzero(local >= 0).squeeze(1)
    experts = local[keep]
    counts = _expert_counts(experts, groups)
    most = int(counts.max().item()) if experts.numel() else 0
    if max_m is None:
        max_m = max(1, most)
    elif most > max_m:
        raise ChordInputError(
            f"max_m: expected a positive integer >= the largest rows per expert ({most}), got {max_m}"
        )
    order = torch.argsort(experts, stable=True)
    sorted_experts = experts[order]
    rank = torch.arange(order.numel(), device=device) - (torch.cumsum(counts, 0) - counts)[sorted_experts]
    row_slots = torch.full((groups * max_m,), -1, dtype=torch.int64, device=device)
    row_slots[sorted_experts * max_m + rank] = keep[order]
    expected_m = max(1, round(topk_ids.numel() / num_experts))
    return MaskedRouting(counts.to(torch.int32), row_slots.reshape(groups, max_m), expected_m, topk_ids.shape[1])
