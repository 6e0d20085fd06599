"""The fused op with torch.distributed collectives: CPU / gloo, or a GPU without Triton.

Same semantics and numerics as the kernel (:mod:`chord_tokenweave.numerics`): every rank
all-gathers the partial sums, reduces the rows it owns in rank order, adds and normalises them,
and all-gathers the owners' rows back. The gathers are bit-exact on every backend.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

from chord_tokenweave.errors import TokenWeaveInputError
from chord_tokenweave.numerics import add_rmsnorm_reference, reduce_in_rank_order, shard_range

_DTYPE_CODES = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}
_MODE_CODES = {"sharded/two_shot": 0, "replicated/two_shot": 1, "replicated/one_shot": 2,
               "sequential": 3}


def check_same_call(
    x: object,
    pg: dist.ProcessGroup,
    rank: int,
    world_size: int,
    mode: str,
    local_error: Exception | None = None,
) -> None:
    """Raise :class:`TokenWeaveInputError` on every rank unless all ranks passed ``x`` of the
    same shape and dtype, in the same ``mode``, and none of them rejected its arguments.

    One small all-gather before the data moves: without it, ranks with different token counts
    or hidden sizes abort the process inside gloo (SIGABRT), a dtype mismatch of equal byte size
    (bf16 vs fp16) is silently reinterpreted, and a rank that raised leaves its peers waiting in
    a collective until the process-group timeout.
    """
    shape = list(x.shape) if isinstance(x, torch.Tensor) and x.ndim == 2 else [-1, -1]
    dtype = _DTYPE_CODES.get(x.dtype, -1) if isinstance(x, torch.Tensor) else -1
    mine = torch.tensor(
        [*shape, dtype, _MODE_CODES.get(mode, -1), int(local_error is not None)], dtype=torch.int64
    )
    parts = [torch.empty_like(mine) for _ in range(world_size)]
    dist.all_gather(parts, mine, group=pg)
    seen = [[int(v) for v in p.tolist()] for p in parts]
    if local_error is not None:
        return  # the caller re-raises its own error
    failed = [p for p, s in enumerate(seen) if s[4]]
    if failed:
        raise TokenWeaveInputError(
            f"rank(s) {failed} of {world_size} rejected their arguments (see their errors); "
            f"rank {rank} stops too instead of waiting for them"
        )
    names = {v: str(k).removeprefix("torch.") for k, v in _DTYPE_CODES.items()}
    if any(s[:4] != seen[0][:4] for s in seen):
        calls = ", ".join(
            f"rank {p}: [{s[0]}, {s[1]}] {names.get(s[2], '?')}" for p, s in enumerate(seen)
        )
        raise TokenWeaveInputError(
            f"every rank must pass x of the same [tokens, hidden] and dtype (and the same "
            f"residual_mode/algo); got {calls}"
            + ("" if all(s[3] == seen[0][3] for s in seen) else "; the modes differ")
        )


def all_gather_exact(t: torch.Tensor, pg: dist.ProcessGroup, world_size: int) -> list[torch.Tensor]:
    """All-gather equally shaped tensors bit-exactly (gloo has no bf16 for every op)."""
    wire = t.contiguous()
    if wire.dtype in (torch.bfloat16, torch.float16):
        wire = wire.view(torch.int16).to(torch.int32)
        parts = [torch.empty_like(wire) for _ in range(world_size)]
        dist.all_gather(parts, wire, group=pg)
        return [p.to(torch.int16).view(t.dtype) for p in parts]
    parts = [torch.empty_like(wire) for _ in range(world_size)]
    dist.all_gather(parts, wire, group=pg)
    return parts


def gather_sharded_rows(
    own: torch.Tensor,
    num_tokens: int,
    world_size: int,
    gather: Callable[[torch.Tensor], list[torch.Tensor]],
) -> torch.Tensor:
    """The ``[T, D]`` tensor whose rows ``shard_range(T, W, p)`` rank ``p`` holds as ``own``.

    ``gather`` all-gathers one equally shaped tensor per rank; shards are padded to the largest.
    """
    chunk = -(-num_tokens // world_size)
    padded = own.new_zeros(chunk, own.shape[1])
    padded[: own.shape[0]] = own
    pieces = []
    for p, part in enumerate(gather(padded)):
        start, end = shard_range(num_tokens, world_size, p)
        pieces.append(part[: end - start])
    return torch.cat(pieces, dim=0)


def fused_fallback(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    pg: dist.ProcessGroup,
    rank: int,
    world_size: int,
    residual_mode: str,
    out: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`~chord_tokenweave.fused.fused_allreduce_rmsnorm` on checked arguments."""
    num_tokens = x.shape[0]
    start, end = shard_range(num_tokens, world_size, rank)
    full = all_gather_exact(x, pg, world_size)
    reduced = reduce_in_rank_order([p[start:end] for p in full])
    own_res = residual if residual_mode == "sharded" else residual[start:end]
    y_own, h_own = add_rmsnorm_reference(reduced, own_res, weight, eps)

    def gather_rows(own: torch.Tensor) -> torch.Tensor:
        return gather_sharded_rows(
            own, num_tokens, world_size, lambda t: all_gather_exact(t, pg, world_size)
        )

    y = gather_rows(y_own)
    if residual_mode == "sharded":
        residual.copy_(h_own)
        res_out = residual
    else:
        res_out = gather_rows(h_own)
        residual.copy_(res_out)
        res_out = residual
    if out is not None:
        out.copy_(y)
        y = out
    return y, res_out
