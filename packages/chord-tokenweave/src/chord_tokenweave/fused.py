"""The ops: fused AllReduce + residual add + RMSNorm, and the sequential baseline.

:func:`fused_allreduce_rmsnorm` runs the Triton kernel over a :class:`SymmetricWorkspace` when
``x`` is on CUDA, the group is NCCL and Triton is present; otherwise the torch fallback
(:mod:`chord_tokenweave.fallback`) with the same semantics. The numerics, on every path, are
those of :mod:`chord_tokenweave.numerics`.

Residual modes:

* ``"sharded"`` (TokenWeave): ``residual`` is ``[rows owned by this rank, D]`` — rows
  ``shard_range(T, W, rank)`` — and is updated in place; it never leaves the rank.
* ``"replicated"``: ``residual`` is ``[T, D]`` on every rank; the returned residual is the full
  updated ``[T, D]`` (on GPU a view of the symmetric workspace that every owner pushed into).

:func:`allreduce_add_rmsnorm` is what TP inference runs without TokenWeave: the library
all-reduce, then add + RMSNorm (one Triton program per row on CUDA).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from chord_tokenweave.checks import Algo, ResidualMode, check_args, describe, group_info
from chord_tokenweave.errors import TokenWeaveInputError
from chord_tokenweave.fallback import check_same_call, fused_fallback
from chord_tokenweave.launch import KERNELS, triton_next_pow2
from chord_tokenweave.numerics import add_rmsnorm_reference
from chord_tokenweave.workspace import SymmetricWorkspace, get_workspace


def uses_gpu_path(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> bool:
    """Whether :func:`fused_allreduce_rmsnorm` would run the Triton kernel for ``x``."""
    if not (x.is_cuda and KERNELS is not None):
        return False
    pg, _, _ = group_info(group)
    return dist.get_backend(pg) == "nccl"


def fused_allreduce_rmsnorm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    group: dist.ProcessGroup | None = None,
    *,
    residual_mode: ResidualMode = "sharded",
    num_ctas: int | None = None,
    algo: Algo = "two_shot",
    workspace: SymmetricWorkspace | None = None,
    channel: int = 0,
    out: torch.Tensor | None = None,
    force_fallback: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """AllReduce ``x`` over ``group``, add ``residual``, RMSNorm with ``weight``.

    Returns ``(y, residual_out)``; ``y`` is ``[T, D]`` on every rank. On the GPU path ``y`` is a
    view of the workspace (valid until the next call on that channel) unless ``out`` is given;
    write ``x`` into ``workspace.input_buffer(T)`` to avoid the copy-in. ``residual_out`` is
    ``residual`` itself (updated in place) except for the replicated two-shot GPU path, where it
    is the workspace's residual plane. See the module docstring for the numerics.
    """
    pg, rank, world_size = group_info(group)
    fallback = force_fallback or not (isinstance(x, torch.Tensor) and uses_gpu_path(x, pg))
    # The cross-rank check reads back to the host: only on CPU tensors (gloo), never where a
    # CUDA graph may be capturing the CUDA fallback.
    checked = fallback and not (isinstance(x, torch.Tensor) and x.is_cuda)
    try:
        num_tokens, hidden, _, _ = check_args(
            x, residual, weight, eps, residual_mode, world_size, rank
        )
        if out is not None and (out.shape != x.shape or out.dtype != x.dtype):
            raise TokenWeaveInputError(
                f"out must be {list(x.shape)} {x.dtype}, got {describe(out)}"
            )
        if algo not in ("two_shot", "one_shot"):
            raise TokenWeaveInputError(f"algo must be 'two_shot' or 'one_shot', got {algo!r}")
        if algo == "one_shot" and residual_mode != "replicated":
            raise TokenWeaveInputError("algo='one_shot' needs residual_mode='replicated'")
    except TokenWeaveInputError as exc:
        if not checked:
            raise
        # The peers are about to enter the fallback's collectives: tell them, so that every
        # rank raises instead of waiting for this one until the process-group timeout.
        check_same_call(x, pg, rank, world_size, f"{residual_mode}/{algo}", exc)
        raise
    if fallback:
        if checked:
            check_same_call(x, pg, rank, world_size, f"{residual_mode}/{algo}")
        return fused_fallback(x, residual, weight, eps, pg, rank, world_size, residual_mode, out)
    ws = workspace or get_workspace(
        pg,
        max_tokens=num_tokens,
        hidden=hidden,
        dtype=x.dtype,
        device=x.device,
        residual_mode=residual_mode,
    )
    if ws.residual_mode != residual_mode:
        raise TokenWeaveInputError(
            f"workspace is for residual_mode {ws.residual_mode!r}, call asked {residual_mode!r}"
        )
    return ws(x, residual, weight, eps, channel=channel, num_ctas=num_ctas, algo=algo, out=out)


def add_rmsnorm_(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> torch.Tensor:
    """``residual <- x + residual``; returns ``rmsnorm(residual) * weight`` (same numerics).

    One Triton program per row on CUDA, the torch reference elsewhere.
    """
    if x.is_cuda and KERNELS is not None and x.is_contiguous() and residual.is_contiguous():
        out = torch.empty_like(x)
        if x.shape[0] > 0:
            KERNELS.add_rmsnorm_kernel[(x.shape[0],)](
                x, residual, weight, out, x.shape[1], float(eps),
                BLOCK_D=triton_next_pow2(x.shape[1]), num_warps=8 if x.shape[1] >= 4096 else 4,
            )
        return out
    y, h = add_rmsnorm_reference(x, residual, weight, eps)
    residual.copy_(h)
    return y


def allreduce_add_rmsnorm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    group: dist.ProcessGroup | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sequential baseline: library all-reduce of ``x`` (in place), then add + RMSNorm.

    ``residual`` is replicated ``[T, D]`` and updated in place. On gloo the all-reduce runs in
    fp32 (gloo's bf16 support varies); NCCL reduces in the tensor's dtype like vLLM does.
    """
    pg, rank, world_size = group_info(group)
    on_gpu = isinstance(x, torch.Tensor) and x.is_cuda
    try:
        check_args(x, residual, weight, eps, "replicated", world_size, rank)
    except TokenWeaveInputError as exc:
        if not on_gpu:
            check_same_call(x, pg, rank, world_size, "sequential", exc)
        raise
    if on_gpu:
        dist.all_reduce(x, group=pg)
        reduced = x
    else:
        check_same_call(x, pg, rank, world_size, "sequential")
        reduced = x.float()
        dist.all_reduce(reduced, group=pg)
        reduced = reduced.to(x.dtype)
    return add_rmsnorm_(reduced, residual, weight, eps), residual

