"""Triton stand-ins for vLLM's small MoE kernels around humming's GEMMs (vLLM itself pins another
torch than the benchmark machines run): SiLU-and-mul, and the top-k weighted sum of each token's
rows found through a position per slot -- ``moe_fused_mul_sum`` (a slot's own row, non-local slots
skipped) and ``moe_unpermute`` (its row in the permuted order). Each is one pass over the rows it
reads, the memory traffic of vLLM's kernels. Imported only when a layer benchmark runs (Triton
comes with CUDA builds of torch)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_BLOCK_ACT = 1024
_BLOCK_SUM = 1024


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, inter, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inter
    gate = tl.load(x_ptr + row * 2 * inter + cols, mask=mask).to(tl.float32)
    up = tl.load(x_ptr + row * 2 * inter + inter + cols, mask=mask).to(tl.float32)
    tl.store(out_ptr + row * inter + cols, (gate / (1.0 + tl.exp(-gate)) * up).to(tl.bfloat16), mask=mask)


@triton.jit
def _gather_mul_sum_kernel(x_ptr, pos_ptr, w_ptr, out_ptr, hidden, TOPK: tl.constexpr, BLOCK: tl.constexpr):
    token = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < hidden
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for j in tl.static_range(TOPK):
        pos = tl.load(pos_ptr + token * TOPK + j)
        weight = tl.load(w_ptr + token * TOPK + j)
        row = tl.load(x_ptr + pos.to(tl.int64) * hidden + cols, mask=mask & (pos >= 0), other=0.0)
        acc += weight * row.to(tl.float32)
    tl.store(out_ptr + token * hidden + cols, acc.to(tl.bfloat16), mask=mask)


def silu_and_mul(x: torch.Tensor, out: torch.Tensor) -> None:
    """``out [rows, I] = silu(x[:, :I]) * x[:, I:]`` in fp32, rounded once to bf16."""
    rows, inter = out.shape
    _silu_and_mul_kernel[(rows, triton.cdiv(inter, _BLOCK_ACT))](x, out, inter, BLOCK=_BLOCK_ACT)


def gather_mul_sum(rows: torch.Tensor, positions: torch.Tensor, weights: torch.Tensor, out: torch.Tensor) -> None:
    """``out [M, H] = sum_j weights[t, j] * rows[positions[t * top_k + j]]`` in fp32, rounded once
    to bf16; a position of -1 (a slot of another rank's expert) adds nothing and reads nothing."""
    tokens, top_k = weights.shape
    hidden = out.shape[1]
    _gather_mul_sum_kernel[(tokens, triton.cdiv(hidden, _BLOCK_SUM))](rows, positions, weights, out, hidden,
                                                                       TOPK=top_k, BLOCK=_BLOCK_SUM)
