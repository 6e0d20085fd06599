"""Functions run inside spawned ranks (importable by the children: spawn copies sys.path)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from chord_tokenweave.errors import TokenWeaveError
from chord_tokenweave.fused import allreduce_add_rmsnorm, fused_allreduce_rmsnorm
from chord_tokenweave.model import TINY_DENSE, TINY_MOE, TPModel
from chord_tokenweave.numerics import shard_range
from chord_tokenweave.overlap import TraceEvent, check_consistent
from chord_tokenweave.table import Decision

FUSED_CASES = [  # (tokens, hidden)
    (1, 8), (3, 24), (7, 64), (17, 40), (64, 64),
]


def rank_input(seed: int, rank: int, tokens: int, hidden: int) -> torch.Tensor:
    """Rank ``rank``'s partial sums for a case (reproducible in the parent)."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randn(tokens, hidden, generator=g).to(torch.bfloat16)


def shared_inputs(seed: int, tokens: int, hidden: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual and norm weight, identical on all ranks."""
    g = torch.Generator().manual_seed(seed * 7919 + 1)
    residual = torch.randn(tokens, hidden, generator=g).to(torch.bfloat16)
    weight = (1 + 0.1 * torch.randn(hidden, generator=g)).to(torch.bfloat16)
    return residual, weight


def fused_worker(rank: int, world_size: int, seed: int) -> list[dict[str, Any]]:
    out = []
    for case, (tokens, hidden) in enumerate(FUSED_CASES):
        x = rank_input(seed + case, rank, tokens, hidden)
        residual, weight = shared_inputs(seed + case, tokens, hidden)
        lo, hi = shard_range(tokens, world_size, rank)
        own = residual[lo:hi].clone()
        y_s, r_s = fused_allreduce_rmsnorm(x.clone(), own, weight, 1e-5, residual_mode="sharded")
        assert r_s.data_ptr() == own.data_ptr(), "sharded residual must be updated in place"
        rep = residual.clone()
        y_r, r_r = fused_allreduce_rmsnorm(
            x.clone(), rep, weight, 1e-5, residual_mode="replicated", algo="one_shot"
        )
        y_q, r_q = allreduce_add_rmsnorm(x.clone(), residual.clone(), weight, 1e-5)
        out.append({"y_sharded": y_s, "res_sharded": r_s.clone(), "y_rep": y_r,
                    "res_rep": r_r.clone(), "y_seq": y_q, "res_seq": r_q})
    return out


def model_worker(
    rank: int, world_size: int, model: str, tokens: int, split: int, seed: int
) -> dict[str, Any]:
    cfg = {"tiny-dense": TINY_DENSE, "tiny-moe": TINY_MOE}[model]
    m = TPModel(cfg, seed=seed)
    g = torch.Generator().manual_seed(seed + 5)
    x = torch.randn(tokens, cfg.hidden, generator=g).to(torch.bfloat16)
    decision = Decision(tokens, True, split, 4, None)
    trace: list[TraceEvent] = []
    outs = {
        "sequential": m.forward(x, "sequential"),
        "fused": m.forward(x, "fused"),
        "tokenweave": m.forward(x, "tokenweave", decision=decision, trace=trace),
        "nocomm": m.forward(x, "nocomm"),
    }
    # Selective enabling: a decision without weave runs fused-only.
    outs["fused_only_decision"] = m.forward(
        x, "tokenweave", decision=Decision(tokens, False, None, 4, None)
    )
    mismatch = ""
    bad = Decision(tokens, True, split + (rank % 2), 4, None)
    try:
        check_consistent(bad, force=True)
    except TokenWeaveError as exc:
        mismatch = str(exc)
    dist.barrier()
    return {"outs": outs, "trace": trace, "mismatch": mismatch, "x": x}


def sleepy_worker(rank: int, world_size: int) -> None:
    import time

    if rank == 1:
        time.sleep(120)
    dist.barrier()


def checks_worker(rank: int, world_size: int, model: str, tokens: int, split: int,
                  corrupt_row: int | None) -> dict[str, Any]:
    """Boundary checks of the fused variants; ``corrupt_row``: rank 0's fused op returns that
    row of ``y`` off by 0.5 (a planted bug the checks must catch)."""
    from chord_tokenweave import model as model_mod
    from chord_tokenweave.verify import RoutingLog, summarise_checks

    cfg = {"tiny-dense": TINY_DENSE, "tiny-moe": TINY_MOE}[model]
    m = TPModel(cfg, seed=7)
    x = torch.randn(tokens, cfg.hidden, generator=torch.Generator().manual_seed(8))
    x = x.to(torch.bfloat16)
    if corrupt_row is not None and rank == 0:
        real = model_mod.fused_allreduce_rmsnorm

        def broken(*args: Any, **kwargs: Any) -> Any:
            y, res = real(*args, **kwargs)
            y = y.clone()
            y[corrupt_row] += 0.5
            return y, res

        model_mod.fused_allreduce_rmsnorm = broken  # type: ignore[assignment]
    log = RoutingLog()
    ref = m.forward(x, "sequential", routing=log)
    out: dict[str, Any] = {}
    for variant in ("fused", "tokenweave"):
        checks: list[Any] = []
        y = m.forward(x, variant, decision=Decision(tokens, True, split, 4, None),
                      routing=log.frozen(), checks=checks)
        out[variant] = {"checks": summarise_checks(checks),
                        "err": (y.float() - ref.float()).abs().max().item()}
    return out


def plane_plumbing_worker(rank: int, world_size: int, model: str, tokens: int,
                          split: int) -> dict[str, float]:
    """The GPU path's buffer plumbing on CPU: partial sums written into workspace planes
    (``matmul(out=...)``), the fused op reading them in place and returning ``y`` as a view of
    the same plane, which the next stage reads while writing its own partial there. The
    kernel is emulated by the torch fallback writing into the plane; planes start as NaN so a
    read of a row nobody wrote shows."""
    from chord_tokenweave import model as model_mod
    from chord_tokenweave.fallback import fused_fallback as _fallback
    from chord_tokenweave.verify import RoutingLog

    cfg = {"tiny-dense": TINY_DENSE, "tiny-moe": TINY_MOE}[model]
    m = TPModel(cfg, seed=9)

    class Planes:
        def __init__(self, n: int) -> None:
            self.max_tokens = n
            self.planes = [torch.full((n, cfg.hidden), float("nan"), dtype=torch.bfloat16)
                           for _ in range(2)]

        def input_buffer(self, n: int, channel: int = 0) -> torch.Tensor:
            return self.planes[channel][:n]

    ws = Planes(tokens)

    def emulated(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                 group: Any = None, *, residual_mode: str, workspace: Any, channel: int,
                 num_ctas: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        plane = workspace.input_buffer(x.shape[0], channel)
        assert x.data_ptr() == plane.data_ptr(), "partial not written into the plane"
        return _fallback(x, residual, weight, eps, dist.group.WORLD, rank, world_size,
                         residual_mode, plane)

    m.workspace = lambda n: ws  # type: ignore[method-assign]
    model_mod.uses_gpu_path = lambda x, group=None: True  # type: ignore[assignment]
    model_mod.fused_allreduce_rmsnorm = emulated  # type: ignore[assignment]
    x = torch.randn(tokens, cfg.hidden, generator=torch.Generator().manual_seed(10))
    x = x.to(torch.bfloat16)
    log = RoutingLog()
    ref = m.forward(x, "sequential", routing=log)
    out = {}
    for variant in ("fused", "tokenweave"):
        y = m.forward(x, variant, decision=Decision(tokens, True, split, 4, None),
                      routing=log.frozen())
        out[variant] = (y.float() - ref.float()).abs().max().item()
    return out


def mismatch_worker(rank: int, world_size: int) -> dict[str, str]:
    """Calls whose arguments differ across ranks (or are wrong on one rank only): every rank
    must raise TokenWeaveInputError instead of aborting in gloo, computing garbage or waiting."""
    out: dict[str, str] = {}

    def call(name: str, tokens: int, hidden: int, dtype: torch.dtype, own_rows: int | None = None,
             fn: Any = fused_allreduce_rmsnorm) -> None:
        x = torch.ones(tokens, hidden, dtype=dtype)
        w = torch.ones(hidden, dtype=dtype)
        if fn is fused_allreduce_rmsnorm:
            lo, hi = shard_range(tokens, world_size, rank)
            res = torch.zeros(hi - lo if own_rows is None else own_rows, hidden, dtype=dtype)
        else:
            res = torch.zeros(tokens if own_rows is None else own_rows, hidden, dtype=dtype)
        try:
            y, _ = fn(x, res, w, 1e-5)
            out[name] = f"ok {list(y.shape)} {y.dtype}"
        except TokenWeaveError as exc:
            out[name] = f"{type(exc).__name__}: {exc}"

    call("tokens", 4 + rank, 8, torch.bfloat16)
    call("hidden", 4, 8 + rank, torch.bfloat16)
    call("dtype", 4, 8, torch.bfloat16 if rank == 0 else torch.float16)
    call("one_rank_bad_residual", 4, 8, torch.bfloat16, own_rows=3 if rank == 1 else None)
    call("sequential_tokens", 4 + rank, 8, torch.bfloat16, fn=allreduce_add_rmsnorm)
    call("sequential_bad_residual", 4, 8, torch.bfloat16, own_rows=3 if rank == 1 else None,
         fn=allreduce_add_rmsnorm)
    call("same", 4, 8, torch.bfloat16)  # the group still works afterwards
    return out
