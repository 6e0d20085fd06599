"""GPU test bodies, run inside NCCL ranks (one GPU each). They assert; failures propagate."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from chord_tokenweave.errors import BarrierTimeoutError
from chord_tokenweave.numerics import add_rmsnorm_reference, reduce_in_rank_order, shard_range
from chord_tokenweave.workspace import SymmetricWorkspace

EPS = 1e-5


def _data(rank: int, tokens: int, hidden: int, device: torch.device, seed: int):
    g = torch.Generator(device=device).manual_seed(seed * 100 + rank)
    x = torch.randn(tokens, hidden, generator=g, device=device).to(torch.bfloat16)
    g.manual_seed(seed * 100 + 99)
    residual = torch.randn(tokens, hidden, generator=g, device=device).to(torch.bfloat16)
    weight = (1 + 0.1 * torch.randn(hidden, generator=g, device=device)).to(torch.bfloat16)
    return x, residual, weight


def _references(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, world: int):
    """(exact fp32-order reference, NCCL all-reduce + reference norm)."""
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x)
    exact = add_rmsnorm_reference(reduce_in_rank_order(parts), residual, weight, EPS)
    nccl = x.clone()
    dist.all_reduce(nccl)
    return exact, add_rmsnorm_reference(nccl, residual, weight, EPS)


ULP = 2.0**-7  # bf16 spacing relative to the value (upper bound)


def _close(name: str, got: torch.Tensor, want: torch.Tensor, *, rtol: float,
           atol: float) -> float:
    """Assert |got - want| <= atol + rtol |want| elementwise; return the max abs error."""
    if got.numel() == 0:
        return 0.0
    diff = (got.float() - want.float()).abs()
    bad = diff > atol + rtol * want.float().abs()
    assert not bool(bad.any()), (
        f"{name}: {int(bad.sum())} elements off, max error {diff.max().item()}"
    )
    return diff.max().item()


def fused_vs_nccl(
    rank: int, world: int, cases: list[tuple[int, int]], modes: list[str],
    configs: list[tuple[int | None, int | None, int]],
) -> dict:
    device = torch.device("cuda", rank)
    errs: dict[str, Any] = {}
    max_t = max(t for t, _ in cases)
    workspaces: dict[tuple[str, int], SymmetricWorkspace] = {}
    for tokens, hidden in cases:
        for mode in modes:
            residual_mode = "sharded" if mode == "sharded" else "replicated"
            key = (residual_mode, hidden)
            if key not in workspaces:
                workspaces[key] = SymmetricWorkspace(
                    dist.group.WORLD, max_tokens=max_t, hidden=hidden, device=device,
                    channels=2, residual_mode=residual_mode,  # type: ignore[arg-type]
                )
            ws = workspaces[key]
            x, residual, weight = _data(rank, tokens, hidden, device, seed=tokens + hidden)
            (y_ex, h_ex), (y_nc, h_nc) = _references(x, residual, weight, world)
            lo, hi = shard_range(tokens, world, rank)
            res = residual[lo:hi].clone() if mode == "sharded" else residual.clone()
            algo = "one_shot" if mode == "one_shot" else "two_shot"
            for rows, warps, stages in configs:
                res_in = res.clone()
                y, h = ws(x, res_in, weight, EPS, channel=1, num_ctas=7, algo=algo,  # type: ignore[arg-type]
                          rows_per_iter=rows, num_warps=warps, stages=stages)
                torch.cuda.synchronize(device)
                ws.check()
                _compare(errs, f"{mode} T={tokens} D={hidden} cfg={rows},{warps},{stages}",
                         y, h, y_ex, h_ex, y_nc, h_nc, lo, hi, mode, world)
    return errs


def _compare(errs: dict, name: str, y, h, y_ex, h_ex, y_nc, h_nc, lo: int, hi: int, mode: str,
             world: int) -> None:
    h_ex_own = h_ex[lo:hi] if mode == "sharded" else h_ex
    h_nc_own = h_nc[lo:hi] if mode == "sharded" else h_nc
    # Same fp32 sums in the same order as the reference: h within one bf16 ulp (it should be
    # bit-equal), y within one ulp (rsqrt vs 1/sqrt, fma contraction).
    errs[name] = _close(name + " y vs exact", y, y_ex, rtol=ULP, atol=1e-6)
    _close(name + " h vs exact", h, h_ex_own, rtol=ULP, atol=1e-6)
    # NCCL rounds x0 + x1 to bf16 before the residual add: an absolute error of about one ulp of
    # the sum (|sum| < 8 here) that cancellation can make large relative to a small h.
    _close(name + " y vs nccl", y, y_nc, rtol=2 * ULP, atol=0.07)
    _close(name + " h vs nccl", h, h_nc_own, rtol=2 * ULP, atol=0.07)
    # Bit-identical across ranks (every row has one owner).
    gathered = [torch.empty_like(y) for _ in range(world)]
    dist.all_gather(gathered, y.contiguous())
    assert all(torch.equal(g, gathered[0]) for g in gathered), f"{name}: ranks differ"


def graph_and_back_to_back(rank: int, world: int, tokens: int, hidden: int) -> dict:
    device = torch.device("cuda", rank)
    ws = SymmetricWorkspace(dist.group.WORLD, max_tokens=tokens, hidden=hidden, device=device,
                            channels=1, residual_mode="sharded")
    lo, hi = shard_range(tokens, world, rank)
    # Two back-to-back calls on one stream, no sync in between.
    x1, r1, w = _data(rank, tokens, hidden, device, seed=1)
    x2, r2, _ = _data(rank, tokens, hidden, device, seed=2)
    (ref1, _), _ = _references(x1, r1, w, world)
    (ref2, _), _ = _references(x2, r2, w, world)
    out1 = torch.empty_like(x1)
    res1, res2 = r1[lo:hi].clone(), r2[lo:hi].clone()
    ws(x1, res1, w, EPS, out=out1)
    y2, _ = ws(x2, res2, w, EPS)
    torch.cuda.synchronize(device)
    ws.check()
    _close("back-to-back #1", out1, ref1, rtol=ULP, atol=1e-6)
    _close("back-to-back #2", y2, ref2, rtol=ULP, atol=1e-6)
    # CUDA graph: capture once, replay with fresh inputs copied into the static buffers.
    static_x = ws.input_buffer(tokens)
    static_res = torch.empty(hi - lo, hidden, dtype=torch.bfloat16, device=device)
    static_out = torch.empty(tokens, hidden, dtype=torch.bfloat16, device=device)
    side = torch.cuda.Stream(device=device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):  # warm up (compiles) outside the capture
        static_x.copy_(x1)
        static_res.copy_(r1[lo:hi])
        ws(static_x, static_res, w, EPS, out=static_out)
    torch.cuda.current_stream(device).wait_stream(side)
    torch.cuda.synchronize(device)
    dist.barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ws(static_x, static_res, w, EPS, out=static_out)
    errs = []
    for seed in (3, 4, 5):
        x, r, _ = _data(rank, tokens, hidden, device, seed=seed)
        (ref, h_ref), _ = _references(x, r, w, world)
        static_x.copy_(x)
        static_res.copy_(r[lo:hi])
        graph.replay()
        torch.cuda.synchronize(device)
        ws.check()
        errs.append(_close(f"graph replay {seed}", static_out, ref, rtol=ULP, atol=1e-6))
        _close(f"graph replay {seed} residual", static_res, h_ref[lo:hi], rtol=ULP, atol=1e-6)
    return {"graph_errs": errs}


def timeout_raises(rank: int, world: int) -> str:
    """Rank 0 calls the op alone: its barrier must time out and be reported, not hang."""
    device = torch.device("cuda", rank)
    ws = SymmetricWorkspace(dist.group.WORLD, max_tokens=64, hidden=256, device=device,
                            channels=1, residual_mode="sharded", timeout_ms=300,
                            trap_on_timeout=False)
    message = ""
    if rank == 0:
        x, r, w = _data(rank, 64, 256, device, seed=9)
        lo, hi = shard_range(64, world, rank)
        ws(x, r[lo:hi].clone(), w, EPS, num_ctas=2)
        torch.cuda.synchronize(device)
        try:
            ws.check()
        except BarrierTimeoutError as exc:
            message = str(exc)
        assert "timed out" in message, "the lonely rank's barrier did not report a timeout"
    dist.barrier()
    return message


def model_variants(rank: int, world: int, tokens: int) -> dict:
    """Variants agree; the comparison is exact up to rounding, so a real bug cannot hide.

    * end to end, with the MoE routing of the sequential run replayed (a last-bit difference
      can otherwise flip a near-tied top-k choice and change a token's output completely);
    * without replay too when no routing decision flipped;
    * every AllReduce+add+RMSNorm of the fused variants against the exact reference computed
      from the same partial sums and residual (one bf16 ulp).
    """
    from chord_tokenweave.model import LLAMA_3_3_70B, MIXTRAL_8X22B, TPModel
    from chord_tokenweave.table import Decision
    from chord_tokenweave.verify import RoutingLog, summarise_checks

    device = torch.device("cuda", rank)
    out: dict[str, Any] = {}
    for base in (LLAMA_3_3_70B, MIXTRAL_8X22B):
        cfg = base.scaled(hidden=1024, num_heads=16, num_kv_heads=8, head_dim=64,
                          intermediate=2048, num_layers=2)
        model = TPModel(cfg, num_layers=2, device=device, seed=11)
        x = torch.randn(tokens, cfg.hidden, device=device,
                        generator=torch.Generator(device=device).manual_seed(5)).to(torch.bfloat16)
        split = tokens // 2 // 64 * 64 or tokens // 2
        d = Decision(tokens, True, split, 16, None)
        log = RoutingLog()
        ref = model.forward(x, "sequential", routing=log)
        for v in ("fused", "tokenweave"):
            y = model.forward(x, v, decision=d, routing=log.frozen())
            err = (y.float() - ref.float()).abs().max().item()
            assert err < 0.1, f"{cfg.name} {v} vs sequential (same routing): max error {err}"
            free = RoutingLog()
            y = model.forward(x, v, decision=d, routing=free)
            free_err = (y.float() - ref.float()).abs().max().item()
            flips = log.flips(free) if cfg.is_moe else 0
            if flips == 0:
                assert free_err < 0.1, f"{cfg.name} {v}: max error {free_err}, no routing flip"
            checks: list = []
            model.forward(x, v, decision=d, checks=checks)
            summary = summarise_checks(checks)
            assert len(summary) == 2 * cfg.num_layers * (2 if v == "tokenweave" else 1)
            bad = [c for c in summary if c["bad"]]
            assert not bad, f"{cfg.name} {v}: fused op wrong at {bad}"
            out[f"{cfg.name} {v}"] = {"err": err, "free_err": free_err, "flips": flips,
                                      "boundary_y_err": max(c["y_err"] for c in summary)}
        if cfg.is_moe:
            # The grouped-GEMM experts (sync-free) against the per-expert loop, on this GPU.
            h = torch.randn(tokens, cfg.hidden, device=device,
                            generator=torch.Generator(device=device).manual_seed(6))
            h = h.to(torch.bfloat16)
            layer = model.layers[0]
            model._bounds = [0, tokens]
            topi, topw = model._route(0, 0, h)
            loop = model._experts(layer, h, topi, topw, impl="loop")
            grouped = model._experts(layer, h, topi, topw, impl="grouped")
            torch.testing.assert_close(grouped, loop, atol=2e-2, rtol=2e-2)
            out["moe grouped vs loop"] = (grouped - loop).abs().max().item()
        nocomm = model.forward(x, "nocomm")
        assert torch.isfinite(nocomm.float()).all()
    return out
