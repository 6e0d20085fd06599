"""Checking the layer stack's variants against each other and the fused op against the reference.

Diagnostics for the benchmark and the tests (slow: every check all-gathers), kept out of the
model's hot path; :meth:`chord_tokenweave.model.TPModel.forward` takes them as options:

* :class:`RoutingLog` (``routing=``): the MoE router decisions of one run, replayed by another;
* ``checks=[]``: every AllReduce+add+RMSNorm of the fused variants checked against the exact
  reference computed from the same inputs (:class:`BoundaryCheck`, :func:`summarise_checks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from chord_tokenweave.fallback import all_gather_exact, gather_sharded_rows
from chord_tokenweave.numerics import add_rmsnorm_reference, reduce_in_rank_order, shard_range

if TYPE_CHECKING:
    from chord_tokenweave.overlap import CommFn

BF16_ULP = 2.0**-7  # bf16 spacing relative to the value (upper bound)


def beyond_one_ulp(diff: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Where ``|got - want|`` (``diff``) exceeds one bf16 ulp of ``want`` (plus 1e-6)."""
    return diff > BF16_ULP * want.float().abs() + 1e-6


class RoutingLog:
    """MoE router decisions per layer, recorded by one run and replayed by another.

    Variants differ in the last bf16 bit of their hidden states (NCCL reduces in bf16, the fused
    op in fp32), which can flip a top-k choice between two near-tied experts and change that
    token's output completely. Comparing variants with the routing of one of them replayed makes
    the comparison exact up to rounding, so it can stay tight.
    """

    def __init__(self) -> None:
        self.topi: dict[int, torch.Tensor] = {}  # layer -> [T, top_k] int64
        self.topw: dict[int, torch.Tensor] = {}  # layer -> [T, top_k] fp32
        self.replay = False

    def frozen(self) -> RoutingLog:
        """A replaying copy (the recorded tensors are shared, not copied)."""
        log = RoutingLog()
        log.topi, log.topw, log.replay = self.topi, self.topw, True
        return log

    def flips(self, other: RoutingLog) -> int:
        """Number of (layer, token) pairs whose expert sets differ between two logs."""
        n = 0
        for layer, mine in self.topi.items():
            a = mine.sort(dim=-1).values
            b = other.topi[layer].sort(dim=-1).values
            n += int((a != b).any(dim=-1).sum())
        return n


@dataclass
class BoundaryCheck:
    """One AllReduce+add+RMSNorm of a run, checked against the exact reference (tensors until
    :func:`summarise_checks` turns them into numbers)."""

    call: int  # index of the comm call in issue order
    split: int
    num_tokens: int
    y_err: torch.Tensor  # max |y - y_ref| (fp32 scalar)
    h_err: torch.Tensor
    bad: torch.Tensor  # elements beyond tolerance (int64 scalar)
    first_bad_row: torch.Tensor  # -1 when none
    bad_own_rows: torch.Tensor  # bad rows this rank owns (computed here)
    bad_peer_rows: torch.Tensor  # bad rows owned by peers (pushed here)
    stale_rows: torch.Tensor  # bad rows still holding this rank's own partial sum


def gather_full(
    t: torch.Tensor, group: dist.ProcessGroup | None, world_size: int
) -> list[torch.Tensor]:
    """Every rank's ``t`` (same shape everywhere), bit-exact on NCCL and gloo."""
    pg = group if group is not None else dist.group.WORLD
    assert pg is not None
    if not t.is_cuda:
        return all_gather_exact(t, pg, world_size)
    parts = [torch.empty_like(t) for _ in range(world_size)]
    dist.all_gather(parts, t.contiguous(), group=pg)
    return parts


def boundary_checked(
    comm: CommFn, checks: list[BoundaryCheck], *, group: dist.ProcessGroup | None,
    world_size: int, rank: int, eps: float,
) -> CommFn:
    """``comm`` (sharded residual) that appends a :class:`BoundaryCheck` per call to ``checks``."""

    def gather(t: torch.Tensor) -> list[torch.Tensor]:
        return gather_full(t, group, world_size)

    def checked(split: int, partial: torch.Tensor, residual: torch.Tensor,
                weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        parts = gather(partial)
        res_full = gather_sharded_rows(residual, partial.shape[0], world_size, gather)
        y, res = comm(split, partial, residual, weight)
        checks.append(_check_boundary(len(checks), split, y, res, parts, res_full, weight,
                                      world_size, rank, eps))
        return y, res

    return checked


def _check_boundary(
    call: int, split: int, y: torch.Tensor, res: torch.Tensor, parts: list[torch.Tensor],
    res_full: torch.Tensor, weight: torch.Tensor, world_size: int, rank: int, eps: float,
) -> BoundaryCheck:
    n = y.shape[0]
    y_ref, h_ref = add_rmsnorm_reference(reduce_in_rank_order(parts), res_full, weight, eps)
    lo, hi = shard_range(n, world_size, rank)
    h_want = h_ref[lo:hi]
    # Same fp32 sums in the same order as the reference: within one bf16 ulp.
    dy = (y.float() - y_ref.float()).abs()
    dh = (res.float() - h_want.float()).abs()
    bad_y = beyond_one_ulp(dy, y_ref)
    bad_h = beyond_one_ulp(dh, h_want)
    bad_rows = bad_y.any(-1)
    if bad_h.numel():
        bad_rows[lo:hi] |= bad_h.any(-1)
    rows = torch.arange(n, device=y.device)
    first = torch.where(bad_rows, rows, n).min() if n else rows.new_tensor(n)
    own = (rows >= lo) & (rows < hi)
    stale = (y == parts[rank]).all(-1) & bad_rows
    zero = dy.new_zeros(())
    return BoundaryCheck(
        call, split, n, dy.max() if dy.numel() else zero, dh.max() if dh.numel() else zero,
        bad_y.sum() + bad_h.sum(), torch.where(first == n, -1, first),
        (bad_rows & own).sum(), (bad_rows & ~own).sum(), stale.sum(),
    )


def summarise_checks(checks: Sequence[BoundaryCheck]) -> list[dict[str, float | int]]:
    """The checks as plain numbers (synchronises)."""
    return [
        {"call": c.call, "split": c.split, "tokens": c.num_tokens,
         "y_err": float(c.y_err), "h_err": float(c.h_err), "bad": int(c.bad),
         "first_bad_row": int(c.first_bad_row), "bad_own_rows": int(c.bad_own_rows),
         "bad_peer_rows": int(c.bad_peer_rows), "stale_rows": int(c.stale_rows)}
        for c in checks
    ]
