"""Benchmarks on N NVLink-connected GPUs (one process per GPU, NCCL), all in one run.

* ``kernel_worker``: NVLink P2P pull/push bandwidth per CTA count (the floor), then for each token
  count: NCCL all-reduce, add+RMSNorm, NCCL + norm, torch symmetric-memory two-shot + norm, and
  the fused kernel (two-shot; one-shot for small counts) over a CTA-count sweep, after checking
  the fused result against NCCL + the reference norm.
* ``layer_worker``: the reference layer stack (Llama-3.3-70B / Mixtral-8x22B shapes) four ways.
* ``profile_worker``: the profiler's table for a model.

Times are medians over repetitions of a CUDA graph holding ``iters`` calls (eager if capture
fails; recorded), maximum over ranks. Multicast is never enabled (see chord_tokenweave.env).
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from chord_tokenweave.fused import add_rmsnorm_
from chord_tokenweave.launch import SMEM_LIMIT, pipeline_smem
from chord_tokenweave.numerics import add_rmsnorm_reference, reduce_in_rank_order, shard_range
from chord_tokenweave.timing import time_call
from chord_tokenweave.verify import beyond_one_ulp
from chord_tokenweave.workspace import SymmetricWorkspace, symmetric_alloc

DEFAULT_TOKENS = (1024, 2048, 4096, 8192, 16384, 32768)
DEFAULT_CTAS = (4, 8, 16, 24, 32, 48, 64)
BW_CTAS = (4, 8, 16, 32, 64, 132)
# (rows per loop iteration, warps, pipeline stages): more rows or stages = more bytes in flight
# per CTA (stages > 1 prefetch the next rows with cp.async into shared memory).
FUSED_VARIANTS = ((1, 8, 1), (2, 16, 1), (1, 8, 2), (1, 8, 3), (2, 16, 2), (2, 16, 3))


def bench_us(
    fn: Callable[[], Any], device: torch.device, *, iters: int = 10, reps: int = 15,
    graph: bool = True,
) -> tuple[float, bool]:
    """The kernel benchmark's timing: ``iters`` calls per CUDA graph (torch's default capture
    mode), median µs per call of ``reps`` replays, max over ranks; whether the graph was used."""
    return time_call(fn, device=device, warmup=3, reps=reps, launches=iters, graph=graph,
                     capture_error_mode="global")


def _safe(record: dict[str, Any], key: str, fn: Callable[[], Any]) -> Any:
    """Run one measurement; a failure is recorded (with its traceback), not fatal."""
    try:
        value = fn()
        record[key] = value
        return value
    except Exception as exc:
        record.setdefault("errors", {})[key] = f"{exc!r}\n{traceback.format_exc(limit=4)}"
        return None


# ----------------------------------------------------------------------------- P2P bandwidth


def p2p_bandwidth(
    rank: int, world_size: int, device: torch.device, nbytes_per_peer: int | None = None,
    ctas: Sequence[int] = BW_CTAS,
) -> dict[str, dict[int, float]]:
    """GB/s per direction per rank, every rank pulling from (pushing to) all its peers at once.

    Keys of the inner dicts are the CTA counts actually launched (rounded up to a multiple of
    the number of peers). With 2 ranks this is the plain peer-to-peer bandwidth.
    """
    from chord_tokenweave import kernels

    peers = [p for p in range(world_size) if p != rank]
    npeers = len(peers)
    per_peer = (nbytes_per_peer or max(32 << 20, (256 << 20) // npeers)) // 4
    # Symmetric buffer: slot i receives what rank i pushes; local: slot j = pulled from peer j.
    buf, handle = symmetric_alloc(world_size * per_peer, torch.int32, device, dist.group.WORLD)
    if int(handle.multicast_ptr) != 0:
        raise RuntimeError("multicast mapping on the bandwidth buffer (multicast_ptr != 0)")
    buf.random_(0, 1 << 20)
    local = torch.randint(0, 1 << 20, (npeers * per_peer,), dtype=torch.int32, device=device)
    ptrs = [int(a) for a in handle.buffer_ptrs]
    word = 4
    peer_src = torch.tensor([ptrs[p] + rank * per_peer * word for p in peers],
                            dtype=torch.int64, device=device)
    local_slots = torch.tensor([local.data_ptr() + i * per_peer * word for i in range(npeers)],
                               dtype=torch.int64, device=device)
    torch.cuda.synchronize(device)
    dist.barrier()
    out: dict[str, dict[int, float]] = {"pull": {}, "push": {}}
    moved = npeers * per_peer * word
    for n in ctas:
        grid = -(-n // npeers) * npeers

        def pull(grid: int = grid) -> None:
            kernels.p2p_copy_kernel[(grid,)](peer_src, local_slots, per_peer, NPEERS=npeers,
                                             BLOCK=4096, num_warps=8)

        def push(grid: int = grid) -> None:
            kernels.p2p_copy_kernel[(grid,)](local_slots, peer_src, per_peer, NPEERS=npeers,
                                             BLOCK=4096, num_warps=8)

        for name, fn in (("pull", pull), ("push", push)):
            us, _ = bench_us(fn, device, iters=3, reps=5, graph=False)
            out[name][grid] = moved / (us * 1e-6) / 1e9
    dist.barrier()
    return out


# ----------------------------------------------------------------------------- kernel benchmark


def _check_fused(
    ws: SymmetricWorkspace, rank: int, world_size: int, num_tokens: int, hidden: int,
    device: torch.device, algo: str, ctas: int, rows_per_iter: int | None = None,
    num_warps: int | None = None, stages: int | None = None,
) -> float:
    """Max |fused - reference| on fresh data; raises beyond one bf16 ulp (relative 2^-7)."""
    g = torch.Generator(device=device).manual_seed(1000 + rank)
    x = torch.randn(num_tokens, hidden, generator=g, device=device).to(torch.bfloat16)
    g.manual_seed(77)
    residual = torch.randn(num_tokens, hidden, generator=g, device=device).to(torch.bfloat16)
    weight = (1 + 0.1 * torch.randn(hidden, generator=g, device=device)).to(torch.bfloat16)
    parts = [torch.empty_like(x) for _ in range(world_size)]
    dist.all_gather(parts, x)
    y_ref, h_ref = add_rmsnorm_reference(reduce_in_rank_order(parts), residual, weight, 1e-5)
    lo, hi = shard_range(num_tokens, world_size, rank)
    res = residual[lo:hi].clone() if ws.residual_mode == "sharded" else residual.clone()
    ws.input_buffer(num_tokens).copy_(x)
    y, h = ws(ws.input_buffer(num_tokens), res, weight, 1e-5, num_ctas=ctas, algo=algo,  # type: ignore[arg-type]
              rows_per_iter=rows_per_iter, num_warps=num_warps, stages=stages)
    torch.cuda.synchronize(device)
    ws.check()
    h_ref_own = h_ref[lo:hi] if ws.residual_mode == "sharded" else h_ref
    err, bad = 0.0, 0.0
    for got, want in ((y, y_ref), (h, h_ref_own)):
        if got.numel() == 0:
            continue
        diff = (got.float() - want.float()).abs()
        bad = max(bad, float(beyond_one_ulp(diff, want).any()))
        err = max(err, diff.max().item())
    # Agree across ranks, so that every rank skips (or keeps) this configuration together.
    flags = torch.tensor([bad, err], dtype=torch.float64, device=device)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    if flags[0].item():
        raise AssertionError(f"fused {algo} T={num_tokens} ctas={ctas} rows={rows_per_iter} "
                             f"warps={num_warps} stages={stages}: max error {flags[1].item()} "
                             "(beyond one bf16 ulp on some rank)")
    return float(flags[1].item())


def kernel_worker(
    rank: int, world_size: int, hidden: int = 8192, tokens: Sequence[int] = DEFAULT_TOKENS,
    ctas: Sequence[int] = DEFAULT_CTAS, oneshot_max_tokens: int = 4096,
) -> dict[str, Any]:
    """Everything of the kernel-level comparison on this rank (rank 0's dict is reported)."""
    import torch.distributed._symmetric_memory as symm

    device = torch.device("cuda", rank)
    dtype = torch.bfloat16
    result: dict[str, Any] = {
        "world_size": world_size, "hidden": hidden, "device": torch.cuda.get_device_name(device),
        "torch": torch.__version__, "sms": torch.cuda.get_device_properties(device).multi_processor_count,
    }
    import triton

    result["triton"] = triton.__version__
    bw = _safe(result, "p2p_gbps", lambda: p2p_bandwidth(rank, world_size, device))
    max_t = max(tokens)
    ws = SymmetricWorkspace(dist.group.WORLD, max_tokens=max_t, hidden=hidden, dtype=dtype,
                            device=device, channels=1, residual_mode="sharded", max_ctas=max(ctas))
    ws1 = SymmetricWorkspace(dist.group.WORLD, max_tokens=oneshot_max_tokens, hidden=hidden,
                             dtype=dtype, device=device, channels=1, residual_mode="replicated",
                             max_ctas=max(ctas))
    result["multicast_ptr"] = [int(ws.handle.multicast_ptr), int(ws1.handle.multicast_ptr)]
    sym = symm.empty(max_t * hidden, dtype=dtype, device=device)
    sym_handle = symm.rendezvous(sym, dist.group.WORLD.group_name)
    if int(sym_handle.multicast_ptr) != 0:
        raise RuntimeError("torch symmetric memory came back with multicast (multicast_ptr != 0)")
    group_name = dist.group.WORLD.group_name
    weight = (1 + 0.1 * torch.randn(hidden, device=device)).to(dtype)

    def measure(num_tokens: int) -> dict[str, Any]:
        row: dict[str, Any] = {"tokens": num_tokens}
        lo, hi = shard_range(num_tokens, world_size, rank)
        x = torch.randn(num_tokens, hidden, device=device).to(dtype)
        residual = torch.randn(num_tokens, hidden, device=device).to(dtype)
        res_own = residual[lo:hi].clone()
        xs = ws.input_buffer(num_tokens)
        xs.copy_(x)
        nccl_buf = x.clone()
        sym_view = sym[: num_tokens * hidden].view(num_tokens, hidden)
        sym_view.copy_(x)

        def nccl() -> None:
            dist.all_reduce(nccl_buf)

        def norm() -> None:
            add_rmsnorm_(nccl_buf, residual, weight, 1e-5)

        def nccl_norm() -> None:
            dist.all_reduce(nccl_buf)
            add_rmsnorm_(nccl_buf, residual, weight, 1e-5)

        def two_shot_norm() -> None:
            torch.ops.symm_mem.two_shot_all_reduce_(sym_view, "sum", group_name)
            add_rmsnorm_(sym_view, residual, weight, 1e-5)

        for key, fn in (("nccl_us", nccl), ("norm_us", norm), ("nccl_norm_us", nccl_norm),
                        ("two_shot_norm_us", two_shot_norm)):
            _safe(row, key, lambda fn=fn: bench_us(fn, device)[0])
        _safe(row, "two_shot_us", lambda: bench_us(
            lambda: torch.ops.symm_mem.two_shot_all_reduce_(sym_view, "sum", group_name),
            device)[0])
        _safe(row, "check_max_err", lambda: _check_fused(
            ws, rank, world_size, num_tokens, hidden, device, "two_shot", 16))
        sweep: dict[str, float] = {}
        for n in ctas:
            for rows_per_iter, warps, stages in FUSED_VARIANTS:
                key = f"ctas{n}_rows{rows_per_iter}_warps{warps}_stages{stages}"
                if pipeline_smem(world_size, hidden, rows_per_iter, stages) > SMEM_LIMIT:
                    continue
                if num_tokens == tokens[0]:  # every configuration is checked once
                    _safe(row, f"check_{key}", lambda n=n, r=rows_per_iter, w=warps, st=stages:
                          _check_fused(ws, rank, world_size, num_tokens, hidden, device,
                                       "two_shot", n, r, w, st))
                    if f"check_{key}" in row.get("errors", {}):
                        continue

                def fused(n: int = n, r: int = rows_per_iter, w: int = warps,
                          st: int = stages) -> None:
                    ws(xs, res_own, weight, 1e-5, num_ctas=n, rows_per_iter=r, num_warps=w,
                       stages=st)

                t = _safe(row, f"_{key}", lambda fused=fused: bench_us(fused, device, reps=10))
                if t is not None:
                    sweep[key] = t[0]
                    row["graph"] = t[1]
        row.pop("graph", None)
        row["fused_sweep_us"] = sweep
        if num_tokens <= oneshot_max_tokens:
            _safe(row, "oneshot_check_max_err", lambda: _check_fused(
                ws1, rank, world_size, num_tokens, hidden, device, "one_shot", 16))
            xs1 = ws1.input_buffer(num_tokens)
            xs1.copy_(x)
            res_full = residual.clone()
            one: dict[str, float] = {}
            for n in ctas:
                for stages in (1, 2):
                    def oneshot(n: int = n, st: int = stages) -> None:
                        ws1(xs1, res_full, weight, 1e-5, num_ctas=n, algo="one_shot", stages=st)

                    t = _safe(row, f"_oneshot{n}_{stages}",
                              lambda oneshot=oneshot: bench_us(oneshot, device, reps=10))
                    if t is not None:
                        one[f"ctas{n}_stages{stages}"] = t[0]
            row["oneshot_sweep_us"] = one
        for key in [k for k in row if k.startswith("_")]:
            row.pop(key)
        _summarise(row, bw, num_tokens, hidden, world_size)
        ws.check()
        ws1.check()
        return row

    result["rows"] = [measure(t) for t in tokens]
    return result


def _summarise(
    row: dict[str, Any], bw: dict[str, dict[int, float]] | None, num_tokens: int, hidden: int,
    world_size: int,
) -> None:
    """Best fused config, fewest CTAs within 10% of it, floor fraction and ratios."""
    sweep = row.get("fused_sweep_us") or {}
    if not sweep:
        return
    best_key = min(sweep, key=sweep.__getitem__)
    best = sweep[best_key]
    row["fused_best_us"], row["fused_best_config"] = best, best_key

    def ctas_of(key: str) -> int:
        return int(key.split("_")[0][len("ctas"):])

    near = [k for k in sweep if sweep[k] <= 1.10 * best]
    few = min(near, key=lambda k: (ctas_of(k), sweep[k]))
    row["fused_fewest_ctas_within_10pct"] = {"config": few, "us": sweep[few], "ctas": ctas_of(few)}
    one = row.get("oneshot_sweep_us") or {}
    if one:
        k1 = min(one, key=one.__getitem__)
        row["oneshot_best_us"], row["oneshot_best_config"] = one[k1], k1
    if bw:
        # Each rank pulls its rows from W-1 peers and pushes its normalised rows to W-1 peers.
        moved = (world_size - 1) * math.ceil(num_tokens / world_size) * hidden * 2
        pull, push = max(bw["pull"].values()), max(bw["push"].values())
        floor = moved / (pull * 1e9) * 1e6 + moved / (push * 1e9) * 1e6
        row["floor_us"] = floor
        row["fused_floor_ratio"] = best / floor
    for base in ("nccl_norm_us", "two_shot_norm_us"):
        if row.get(base):
            row[f"speedup_vs_{base.removesuffix('_us')}"] = row[base] / best


# ----------------------------------------------------------------------------- layer benchmark


def layer_worker(
    rank: int, world_size: int, model_name: str, tokens: Sequence[int], num_layers: int = 2,
    num_ctas: int = 16, table_path: str | None = None, device_kind: str = "cuda",
    scale: str = "full", graph: bool = True, reps: int = 5,
) -> dict[str, Any]:
    """Four variants of the layer stack per token count (µs per forward, max over ranks).

    On GPU each forward is captured in a CUDA graph and replayed (``graph``), both streams of
    the weave inside the capture; a variant whose capture fails anywhere is timed eagerly and
    says so (``graph`` per variant). Correctness per token count: outputs of the fused variants
    against sequential with sequential's MoE routing replayed (``*_max_err``), without replay
    (``*_free_err``, routing flips counted), and every AllReduce+add+RMSNorm of the fused
    variants against the exact reference (``boundary_*``).
    ``device_kind="cpu"`` with ``scale="tiny"`` is a smoke run of the same code (tests)."""
    from chord_tokenweave.model import MODELS, TINY_DENSE, TINY_MOE, TPModel
    from chord_tokenweave.table import Decision, SplitTable

    device = torch.device("cuda", rank) if device_kind == "cuda" else torch.device("cpu")
    cfg = MODELS[model_name]
    if scale == "tiny":
        cfg = TINY_MOE if cfg.is_moe else TINY_DENSE
    model = TPModel(cfg, num_layers=num_layers, device=device, seed=3)
    if device.type == "cuda":
        model.workspace(max(tokens))
    table = SplitTable.load(table_path, world_size=world_size) if table_path else None
    out: dict[str, Any] = {"model": cfg.name, "num_layers": num_layers, "rows": []}
    gen = torch.Generator(device=device)
    for num_tokens in tokens:
        gen.manual_seed(num_tokens)  # the same x on every rank, by construction
        x = torch.randn(num_tokens, cfg.hidden, generator=gen, device=device).to(torch.bfloat16)
        row: dict[str, Any] = {"tokens": num_tokens, "graph": {}}
        forced = model.decide(num_tokens, threshold=0, num_ctas=num_ctas)
        forced = Decision(num_tokens, forced.split is not None, forced.split, num_ctas, None)
        row["split"] = forced.split

        def timed(key: str, variant: str, d: Decision | None, row: dict[str, Any] = row,
                  x: torch.Tensor = x) -> None:
            def run() -> float:
                us, graphed = time_call(lambda: model.forward(x, variant, decision=d),  # type: ignore[arg-type]
                                        device=device, warmup=2, reps=reps, graph=graph)
                row["graph"][key] = graphed
                return us

            _safe(row, f"{key}_us", run)

        for variant in ("sequential", "fused", "tokenweave", "nocomm"):
            timed(variant, variant, forced)
        if table is not None:
            d = table.decide(num_tokens)
            row["table_decision"] = {"weave": d.weave, "split": d.split, "num_ctas": d.num_ctas}
            timed("table", "tokenweave", d)
        _safe(row, "check_ok", lambda row=row, x=x, forced=forced: _layer_errors(
            model, x, forced, row))
        if row.get("tokenweave_us") and row.get("sequential_us"):
            row["speedup_vs_sequential"] = row["sequential_us"] / row["tokenweave_us"]
        if row.get("table_us") and row.get("sequential_us"):
            row["table_speedup_vs_sequential"] = row["sequential_us"] / row["table_us"]
        if row.get("tokenweave_us") and row.get("nocomm_us"):
            row["fraction_of_nocomm"] = row["nocomm_us"] / row["tokenweave_us"]
        out["rows"].append(row)
    return out


def _layer_errors(model: Any, x: torch.Tensor, forced: Any, row: dict[str, Any]) -> bool:
    """Fill ``row`` with the correctness numbers of :func:`layer_worker`; True when all pass."""
    from chord_tokenweave.verify import RoutingLog, gather_full, summarise_checks

    world = model.world_size
    gathered = gather_full(x, model.group, world)
    row["x_same_on_ranks"] = all(torch.equal(g, gathered[0]) for g in gathered)
    log = RoutingLog()
    ref = model.forward(x, "sequential", routing=log)
    refs = gather_full(ref, model.group, world)
    row["sequential_same_on_ranks"] = all(torch.equal(g, refs[0]) for g in refs)
    ok = row["x_same_on_ranks"] and row["sequential_same_on_ranks"]
    for variant in ("fused", "tokenweave"):
        y = model.forward(x, variant, decision=forced, routing=log.frozen())
        row[f"{variant}_max_err"] = (y.float() - ref.float()).abs().max().item()
        free_log = RoutingLog()
        y = model.forward(x, variant, decision=forced, routing=free_log)
        row[f"{variant}_free_err"] = (y.float() - ref.float()).abs().max().item()
        if model.cfg.is_moe:
            row[f"{variant}_routing_flips"] = log.flips(free_log)
        checks: list[Any] = []
        model.forward(x, variant, decision=forced, checks=checks)
        summary = summarise_checks(checks)
        row[f"boundary_{variant}_max_y_err"] = max((c["y_err"] for c in summary), default=0.0)
        bad = [c for c in summary if c["bad"]]
        row[f"boundary_{variant}_bad"] = bad[:4]
        ok = ok and not bad and row[f"{variant}_max_err"] < 0.1
    flag = torch.tensor([int(ok)], device=x.device if x.is_cuda else "cpu")
    if world > 1:
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def profile_worker(
    rank: int, world_size: int, model_name: str, tokens: Sequence[int], num_layers: int,
    output: str, device_kind: str = "cuda", scale: str = "full",
) -> dict[str, Any]:
    """Run the profiler for ``model_name`` and write the table (rank 0)."""
    from chord_tokenweave.model import MODELS, TINY_DENSE, TINY_MOE, TPModel
    from chord_tokenweave.profile import profile_model

    cfg = MODELS[model_name]
    if scale == "tiny":
        cfg = TINY_MOE if cfg.is_moe else TINY_DENSE
    device = torch.device("cuda", rank) if device_kind == "cuda" else torch.device("cpu")
    model = TPModel(cfg, num_layers=num_layers, device=device, seed=5)
    logs: list[str] = []
    table = profile_model(model, tokens, log=logs.append)
    if rank == 0:
        table.save(output)
    return {"table": table.to_json(), "log": logs}
