"""Triton stand-ins for vLLM's two small MoE kernels around humming's GEMMs (vLLM itself pins
another torch than the benchmark machines run): SiLU-and-mul and the top-k weighted sum
(``moe_fused_mul_sum``). Each is one pass over its rows, the memory traffic of vLLM's kernels.
Imported only when a layer benchmark runs (Triton comes with CUDA builds of torch)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_BLOCK_ACT = 256
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
def _mul_sum_kernel(x_ptr, w_ptr, out_ptr, hidden, TOPK: tl.constexpr, BLOCK: tl.constexpr):
    token = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < hidden
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for j in tl.static_range(TOPK):
        weight = tl.load(w_ptr + token * TOPK + j)
        acc += weight * tl.load(x_ptr + (token * TOPK + j) * hidden + cols, mask=mask).to(tl.float32)
    tl.store(out_ptr + token * hidden + cols, acc.to(tl.bfloat16), mask=mask)


def silu_and_mul(x: torch.Tensor, out: torch.Tensor) -> None:
    """``out [rows, I] = silu(x[:, :I]) * x[:, I:]`` in fp32, rounded once to bf16."""
    rows, inter = out.shape
    _silu_and_mul_kernel[(rows, triton.cdiv(inter, _BLOCK_ACT))](x, out, inter, BLOCK=_BLOCK_ACT)


def mul_sum(rows: torch.Tensor, weights: torch.Tensor, out: torch.Tensor) -> None:
    """``out [M, H] = sum_j weights[t, j] * rows[t * top_k + j]`` in fp32, rounded once to bf16."""
    tokens, top_k = weights.shape
    hidden = out.shape[1]
    _mul_sum_kernel[(tokens, triton.cdiv(hidden, _BLOCK_SUM))](rows, weights, out, hidden, TOPK=top_k, BLOCK=_BLOCK_SUM)
