"""The top-k reduction at the end of an MoE layer.

:func:`topk_sum` (plain PyTorch) sums every choice's row; :func:`local_topk_sum` (a CUDA kernel)
sums only the rows of choices a local expert computed, in ascending choice order, so the rows of
the others need not be written at all (under expert parallelism 7 of 8 rows of an EP8 rank). Both
follow the numerics contract of docs/formats.md: bf16 rows summed in fp32 from +0, rounded once.
"""

from __future__ import annotations

import functools

import torch

from chord_kernels.checks import output_tensor, require_tensor
from chord_kernels.errors import ChordInputError
from chord_kernels.hardware import device_index, num_sms
from chord_kernels.jit import DEFAULT_ARCH, CudaKernel, i32

_THREADS = 128
CTAS_PER_SM = 4
"""Few tokens split their chunks over CTAs until the grid has this many per SM (docs/optimization.md,
session 76)."""
FEW_CHOICES_CHUNKS = 4
"""Chunks a thread loads at once for a token with at most two local choices (the kernel's
``sum_few_choices<2, 4>``): the grid gives each thread at most this many, one pass of loads."""
_SOURCE = r"""
#include "chord/common/topk_sum.cuh"

// out[t, :] = the top-k sum (chord::sum_choices) of rows[t * top_k + j, :] over the local choices
// j of token t. The gridDim.y CTAs (t, y) of token t share its 16-byte chunks, CTA y taking chunks
// y * blockDim + threadIdx, then gridDim.y * blockDim further, ...: a decode batch's few tokens
// spread over every SM, while many tokens find their choices once per CTA for all its chunks.
extern "C" __global__ void __launch_bounds__(128, 8) chord_local_topk_sum(
    const uint4* __restrict__ rows, const int32_t* __restrict__ ids, const int32_t* __restrict__ expert_map,
    uint4* __restrict__ out, int chunks, int top_k, int num_global, int num_local) {
  const int64_t t = blockIdx.x;
  int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= chunks) return;
  const uint32_t local = chord::local_choices(ids + t * top_k, top_k, expert_map, num_global, num_local);
  const int step = gridDim.y * blockDim.x;
  const uint4* token_rows = rows + t * top_k * chunks;
  uint4* token_out = out + t * chunks;
  const int count = __popc(local);  // the same for the whole CTA: no divergence
  if (count <= 2) {
    chord::sum_few_choices<2, 4>(token_rows, chunks, local, token_out, c, step, chunks);
  } else if (count <= 4) {
    chord::sum_few_choices<4, 2>(token_rows, chunks, local, token_out, c, step, chunks);
  } else {
    for (; c < chunks; c += step) token_out[c] = chord::sum_choices(token_rows + c, chunks, local, top_k);
  }
}
"""


@functools.cache
def local_topk_sum_kernel() -> CudaKernel:
    """The kernel of :func:`local_topk_sum` (one for every architecture)."""
    return CudaKernel(name="local_topk_sum", source=_SOURCE, entry="chord_local_topk_sum")


def kernels(arch: str = DEFAULT_ARCH) -> list[CudaKernel]:
    """The op's precompile hook (:mod:`chord_kernels.families`): one kernel for every ``arch``."""
    return [local_topk_sum_kernel()]


def chunk_blocks(tokens: int, chunks: int, sms: int) -> int:
    """CTAs per token (the grid's y) for ``tokens`` rows of ``chunks`` 16-byte chunks on ``sms`` SMs:
    enough for :data:`CTAS_PER_SM` CTAs per SM (at most one chunk per thread), and at least enough
    that a token with few local choices loads all of a thread's chunks in one pass."""
    spread = min(-(-chunks // _THREADS), -(-CTAS_PER_SM * sms // tokens))
    return max(1, spread, -(-chunks // (FEW_CHOICES_CHUNKS * _THREADS)))


def topk_sum(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """bf16 ``[M, N]`` = the sum over ``j`` of bf16 ``x[:, j, :]`` for ``x`` ``[M, top_k, N]``.

    Any ``M``, zero included. ``out`` (bf16 ``[M, N]``, same device) receives the result when given.
    """
    require_tensor("x", x, dtype=torch.bfloat16, ndim=3)
    shape = (x.shape[0], x.shape[2])
    out = output_tensor(out, shape, dtype=torch.bfloat16, device=x.device)
    return out.copy_(x.float().sum(dim=1))


def local_topk_sum(rows: torch.Tensor, topk_ids: torch.Tensor, *, num_local_experts: int,
                   expert_map: torch.Tensor | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """bf16 ``[M, N]``: row ``t`` sums, in ascending ``j``, the bf16 rows ``rows[t * top_k + j]``
    (``rows`` ``[M * top_k, N]``, CUDA, N a multiple of 8, top_k <= 32) of the choices ``topk_ids[t, j]`` that a
    local expert computed: ``expert_map[id]`` (or the id itself without a map) in
    ``[0, num_local_experts)``. Rows of other choices are never read; a token without a local
    choice sums to zero. Equal to :func:`topk_sum` of the rows with those rows zeroed, up to the
    order of fp32 additions."""
    require_tensor("rows", rows, dtype=torch.bfloat16, ndim=2, device="cuda", contiguous=True)
    require_tensor("topk_ids", topk_ids, dtype=torch.int32, ndim=2, device=rows.device, contiguous=True)
    tokens, top_k = topk_ids.shape
    if not 1 <= top_k <= 32:
        raise ChordInputError(f"topk_ids: expected 1 to 32 choices per token, got {top_k}")
    if rows.shape[0] != tokens * top_k or rows.shape[1] % 8:
        raise ChordInputError(f"rows: expected [{tokens} x {top_k}, N] with N a multiple of 8, got {list(rows.shape)}")
    if expert_map is not None:
        require_tensor("expert_map", expert_map, dtype=torch.int32, ndim=1, device=rows.device, contiguous=True)
    n = rows.shape[1]
    out = output_tensor(out, (tokens, n), dtype=torch.bfloat16, device=rows.device, contiguous=True)
    if tokens == 0 or n == 0:
        return out
    chunks = n // 8
    num_global = expert_map.numel() if expert_map is not None else 0
    ctas_per_token = chunk_blocks(tokens, chunks, num_sms(device_index(rows.device)))
    local_topk_sum_kernel().launch((tokens, ctas_per_token), (_THREADS,),
                     (rows, topk_ids, expert_map, out, i32(chunks), i32(top_k), i32(num_global),
                      i32(num_local_experts)))
    return out
