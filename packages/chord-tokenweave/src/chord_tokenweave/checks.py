"""Argument checks shared by the fused op and its workspace (tensor metadata only, so they are
safe during CUDA-graph capture): every bad input raises :class:`TokenWeaveInputError` naming what
was expected and what was got."""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
import torch.distributed as dist

from chord_tokenweave.errors import TokenWeaveError, TokenWeaveInputError
from chord_tokenweave.numerics import shard_range

ResidualMode = Literal["sharded", "replicated"]
Algo = Literal["two_shot", "one_shot"]

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def group_info(group: dist.ProcessGroup | None) -> tuple[dist.ProcessGroup, int, int]:
    """``(group, rank, world_size)``; ``None`` is the default group."""
    if not dist.is_available() or not dist.is_initialized():
        raise TokenWeaveError("torch.distributed is not initialised (call init_process_group)")
    pg = group if group is not None else dist.group.WORLD
    assert pg is not None
    return pg, dist.get_rank(pg), dist.get_world_size(pg)


def check_args(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    residual_mode: str,
    world_size: int,
    rank: int,
) -> tuple[int, int, int, int]:
    """Check one call of the op; returns ``(num_tokens, hidden, start, end)`` (own rows)."""
    if not isinstance(x, torch.Tensor) or x.ndim != 2:
        raise TokenWeaveInputError(f"x must be a 2-D [tokens, hidden] tensor, got {describe(x)}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TokenWeaveInputError(f"x dtype must be one of {SUPPORTED_DTYPES}, got {x.dtype}")
    num_tokens, hidden = x.shape
    if weight.shape != (hidden,) or weight.dtype != x.dtype:
        raise TokenWeaveInputError(
            f"weight must be [{hidden}] {x.dtype}, got {tuple(weight.shape)} {weight.dtype}"
        )
    start, end = shard_range(num_tokens, world_size, rank)
    if residual_mode == "sharded":
        want = (end - start, hidden)
    elif residual_mode == "replicated":
        want = (num_tokens, hidden)
    else:
        raise TokenWeaveInputError(
            f"residual_mode must be 'sharded' or 'replicated', got {residual_mode!r}"
        )
    if tuple(residual.shape) != want or residual.dtype != x.dtype:
        raise TokenWeaveInputError(
            f"residual ({residual_mode}) must be {list(want)} {x.dtype} on rank {rank} of "
            f"{world_size} for {num_tokens} tokens, got {list(residual.shape)} {residual.dtype}"
        )
    for name, t in (("residual", residual), ("weight", weight)):
        if t.device != x.device:
            raise TokenWeaveInputError(f"{name} is on {t.device}, x is on {x.device}")
        if not t.is_contiguous():
            raise TokenWeaveInputError(f"{name} must be contiguous")
    if not (isinstance(eps, float | int) and eps > 0 and math.isfinite(eps)):
        raise TokenWeaveInputError(f"eps must be a positive finite float, got {eps!r}")
    return num_tokens, hidden, start, end


def describe(t: Any) -> str:
    """``[shape] dtype on device`` for a tensor, the type name otherwise (for messages)."""
    if isinstance(t, torch.Tensor):
        return f"{list(t.shape)} {t.dtype} on {t.device}"
    return type(t).__name__
