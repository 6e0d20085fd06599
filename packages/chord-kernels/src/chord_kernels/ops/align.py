"""vLLM's ``moe_align_block_size`` in CUDA (``chord/ops/align_block_size.cuh``).

:func:`chord_kernels.routing.align_block_size` runs it on CUDA tensors: the same bits as its pure
PyTorch path (a stable sort by expert), with no host synchronization, so it is CUDA-graph
capturable. Up to :data:`SINGLE_MAX_SLOTS` slots one CTA does everything in one launch; beyond, three
launches spread the work over a CTA per :data:`CHUNK_SLOTS` slots.
"""

from __future__ import annotations

import functools
import math

import torch

from chord_kernels.errors import ChordUnsupportedError
from chord_kernels.jit import DEFAULT_ARCH, CudaKernel, i32

SINGLE_MAX_SLOTS = 2048
"""Largest ``M * top_k`` routed by one CTA in one launch."""
CHUNK_SLOTS = 1024
"""Slots per CTA of the three-launch path."""
LAYOUT_THREADS, CHUNK_THREADS = 1024, 256  # kLayoutThreads, kChunkThreads
_LAYOUT_WARPS, _CHUNK_WARPS = LAYOUT_THREADS // 32, CHUNK_THREADS // 32
_MAX_ROWS = 2**31 - 1

_OUTPUTS = "chord::align::Outputs{sorted_ids, expert_ids, total, expert_map, numel, num_experts, block_m, capacity, " \
           "num_blocks}"
_LAYOUT_PARAMS = "const int32_t* expert_map, int32_t* sorted_ids, int32_t* expert_ids, int32_t* total, int numel, " \
                 "int num_experts, int block_m, int capacity, int num_blocks"
_ENTRIES = {
    "single": f"""__launch_bounds__(chord::align::kLayoutThreads) chord_align_single(const ID* ids, {_LAYOUT_PARAMS}) {{
  chord::align::single(ids, {_OUTPUTS});
}}""",
    "count": """__launch_bounds__(chord::align::kChunkThreads) chord_align_count(const ID* ids, int numel,
    int num_experts, int chunk, int32_t* counts) {
  chord::align::count_chunk(ids, numel, num_experts, chunk, counts);
}""",
    "layout": f"""__launch_bounds__(chord::align::kLayoutThreads) chord_align_layout(int32_t* counts, int chunks,
    int32_t* first_row, {_LAYOUT_PARAMS}) {{
  chord::align::layout(counts, chunks, first_row, {_OUTPUTS});
}}""",
    "scatter": """__launch_bounds__(chord::align::kChunkThreads) chord_align_scatter(const ID* ids, int numel,
    int num_experts, int chunk, const int32_t* offsets, const int32_t* first_row, int32_t* sorted_ids) {
  chord::align::scatter_chunk(ids, numel, num_experts, chunk, offsets, first_row, sorted_ids);
}""",
}


@functools.cache
def align_kernel(entry: str, id_dtype: torch.dtype = torch.int32) -> CudaKernel:
    """One of the op's kernels (``single``, ``count``, ``layout``, ``scatter``) for ``topk_ids`` of
    ``id_dtype`` (int32 or int64; ``layout`` reads none), for every architecture."""
    ctype = "int64_t" if id_dtype == torch.int64 else "int32_t"
    suffix = "" if entry == "layout" else "_" + ctype.removesuffix("_t")
    source = f'#include "chord/ops/align_block_size.cuh"\n\nusing ID = {ctype};\n\nextern "C" __global__ void ' \
             + _ENTRIES[entry] + "\n"
    return CudaKernel(name=f"align_{entry}{suffix}", source=source, entry=f"chord_align_{entry}")


def kernels(arch: str = DEFAULT_ARCH) -> list[CudaKernel]:
    """The op's precompile hook (:mod:`chord_kernels.families`): every kernel, for every ``arch``."""
    return [align_kernel("layout")] + [align_kernel(entry, dtype) for entry in ("single", "count", "scatter")
                                       for dtype in (torch.int32, torch.int64)]


def prepare(device: torch.device) -> None:
    """Compile and load every kernel for any expert count (before CUDA-graph capture)."""
    for kernel in kernels():
        kernel.prepare(device, smem=_smem_limit(device.index))


@functools.cache
def _smem_limit(device_index: int) -> int:
    from chord_kernels.jit import driver

    return driver.max_dynamic_smem(device_index) - 8192  # room for the block scan's static storage (4 KB)


def _table_smem(warps: int, num_experts: int) -> int:
    return 4 * warps * num_experts


def align_into(flat_ids: torch.Tensor, expert_map: torch.Tensor | None, block_m: int, num_experts: int,
               sorted_token_ids: torch.Tensor, expert_ids: torch.Tensor, total: torch.Tensor, *,
               single_max_slots: int = SINGLE_MAX_SLOTS, chunk_slots: int = CHUNK_SLOTS) -> None:
    """Fill the three routing tensors (int32, CUDA, contiguous; sized as
    :func:`chord_kernels.routing.align_block_size` documents) from contiguous ``flat_ids``
    (int32 or int64). ``expert_map`` is int32 or None."""
    numel, capacity = flat_ids.numel(), sorted_token_ids.numel()
    chunks = max(1, math.ceil(numel / chunk_slots))
    if max(capacity, chunks * num_experts) > _MAX_ROWS:
        raise ChordUnsupportedError(f"align_block_size: {numel} slots over {num_experts} experts exceed the "
                                    "kernels' int32 indices")
    limit = _smem_limit(flat_ids.device.index)
    layout = (expert_map, sorted_token_ids, expert_ids, total, i32(numel), i32(num_experts), i32(block_m),
              i32(capacity), i32(expert_ids.numel()))
    single_smem = _table_smem(_LAYOUT_WARPS + 1, num_experts) + 4
    if numel <= single_max_slots and single_smem <= limit:
        align_kernel("single", flat_ids.dtype).launch((1,), (LAYOUT_THREADS,), (flat_ids, *layout), smem=single_smem)
        return
    chunk_smem = _table_smem(_CHUNK_WARPS, num_experts)
    if chunk_smem > limit:
        raise ChordUnsupportedError(
            f"align_block_size: {num_experts} experts need {chunk_smem} bytes of shared memory, the GPU allows {limit}"
        )
    scratch = torch.empty(chunks * num_experts + num_experts, dtype=torch.int32, device=flat_ids.device)
    counts, first_row = scratch[: chunks * num_experts], scratch[chunks * num_experts:]
    chunk_args = (flat_ids, i32(numel), i32(num_experts), i32(chunk_slots))
    align_kernel("count", flat_ids.dtype).launch((chunks,), (CHUNK_THREADS,), (*chunk_args, counts), smem=chunk_smem)
    align_kernel("layout").launch((1,), (LAYOUT_THREADS,), (counts, i32(chunks), first_row, *layout),
                                  smem=4 * (num_experts + 1))
    align_kernel("scatter", flat_ids.dtype).launch((chunks,), (CHUNK_THREADS,),
                                                   (*chunk_args, counts, first_row, sorted_token_ids), smem=chunk_smem)
