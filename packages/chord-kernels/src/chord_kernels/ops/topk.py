"""The top-k reduction at the end of an MoE layer.

Plain PyTorch for now (no fused kernel yet): it follows the numerics contract of
docs/formats.md exactly — the top-k bf16 rows summed in fp32, rounded once to bf16 — and
allocates an fp32 temporary of the output's size.
"""

from __future__ import annotations

import torch

from chord_kernels.checks import output_tensor, require_tensor


def topk_sum(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """bf16 ``[M, N]`` = the sum over ``j`` of bf16 ``x[:, j, :]`` for ``x`` ``[M, top_k, N]``.

    Any ``M``, zero included. ``out`` (bf16 ``[M, N]``, same device) receives the result when given.
    """
    require_tensor("x", x, dtype=torch.bfloat16, ndim=3)
    shape = (x.shape[0], x.shape[2])
    out = output_tensor(out, shape, dtype=torch.bfloat16, device=x.device)
    return out.copy_(x.float().sum(dim=1))
