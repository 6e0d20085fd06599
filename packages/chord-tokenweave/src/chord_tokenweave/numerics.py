"""The numerics of AllReduce + residual add + RMSNorm, as pure PyTorch (the reference).

Every path — the Triton kernel, the torch fallback, the reference model — computes::

    s = fp32(x_0) + fp32(x_1) + ... + fp32(x_{W-1})      # fixed rank order, fp32
    h = bf16(s + fp32(residual))                         # the new residual
    y = bf16(fp32(h) * rsqrt(mean(fp32(h)^2) + eps) * fp32(weight))

(bf16 stands for the tensors' dtype.) Each row is computed by exactly one rank, its owner
(:func:`shard_range`), and then copied to the others, so every rank ends with bit-identical ``y``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from chord_tokenweave.errors import TokenWeaveInputError


def shard_range(num_tokens: int, world_size: int, rank: int) -> tuple[int, int]:
    """Rows ``[start, end)`` that ``rank`` owns: balanced, contiguous, possibly empty."""
    if world_size <= 0 or not 0 <= rank < world_size:
        raise TokenWeaveInputError(f"rank {rank} is not in a world of size {world_size}")
    if num_tokens < 0:
        raise TokenWeaveInputError(f"num_tokens must be >= 0, got {num_tokens}")
    return rank * num_tokens // world_size, (rank + 1) * num_tokens // world_size


def reduce_in_rank_order(parts: Sequence[torch.Tensor]) -> torch.Tensor:
    """fp32 sum of ``parts`` in list order (the fixed order every path uses)."""
    acc = parts[0].float().clone()
    for part in parts[1:]:
        acc += part.float()
    return acc


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``bf16(fp32(x) * rsqrt(mean(fp32(x)^2) + eps) * fp32(weight))`` in ``x``'s dtype."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def add_rmsnorm_reference(
    reduced: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(y, h)`` from an fp32 (or any) reduced sum: see the module docstring."""
    h = (reduced.float() + residual.float()).to(residual.dtype)
    return rmsnorm(h, weight, eps), h
