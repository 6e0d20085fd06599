"""Run scenarios x routing draws x implementations (the method of docs/benchmarking.md).

First every implementation may compile ahead what the scenarios will launch (``warm_up``). For
each scenario and draw: build both GEMM problems once (same weights, activations and routing for
every implementation), then for each implementation and GEMM check every candidate's output
against the reference before timing it, and keep the fastest correct one. The winners of all
implementations are then timed again side by side, in alternating rounds (timing.interleaved), and
that is the reported time. gate_up and down are timed separately and reported as a sum. Results
are handed to ``on_update`` after every scenario so that an interrupted run still leaves its
numbers behind.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

import torch

from chord_bench import ceilings as ceilings_mod
from chord_bench.clocks import ClockSampler, cuda_uuid
from chord_bench.impls import Candidate, Implementation
from chord_bench.problems import GemmProblem, WeightCache, scenario_problems
from chord_bench.results import (
    CandidateResult,
    GemmInfo,
    GemmResult,
    ImplInfo,
    ImplResult,
    RunResult,
    ScenarioResult,
)
from chord_bench.scenarios import (
    NOMINAL_H200,
    Ceilings,
    Scenario,
    gemm_costs,
)
from chord_bench.timing import bench, interleaved
from chord_kernels import ChordUnsupportedError

Log = Callable[[str], None]


def _stderr_log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _run_quiet(cmd: Sequence[str], cwd: str | None = None) -> str | None:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def environment(device: torch.device) -> dict[str, object]:
    """GPU, driver, CUDA, library versions and the repository commit."""
    import chord_kernels

    env: dict[str, object] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "chord_kernels": chord_kernels.__version__,
        "hostname": platform.node(),
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except Exception:
        env["triton"] = None
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env["gpu"] = props.name
        env["gpu_sms"] = props.multi_processor_count
        env["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
        env["compute_capability"] = f"{props.major}.{props.minor}"
        index = device.index if device.index is not None else torch.cuda.current_device()
        env["driver"] = _run_quiet(
            ["nvidia-smi", f"--id={index}", "--query-gpu=driver_version", "--format=csv,noheader"]
        )
    here = str(Path(__file__).resolve().parent)
    env["commit"] = _run_quiet(["git", "rev-parse", "HEAD"], cwd=here)
    status = _run_quiet(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here)
    env["dirty"] = bool(status) if env["commit"] else None
    return env


def _device_error() -> str | None:
    """A sticky CUDA error (illegal address, ...) leaves the context unusable; detect it."""
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


class DeviceLost(RuntimeError):
    """The CUDA context is unusable; the run stops and keeps what it has."""


def _time_gemm(impl: Implementation, problem: GemmProblem, rep_ms: float, method: str, log: Log,
               clocks: ClockSampler | None = None) -> tuple[GemmResult, Candidate | None]:
    best: GemmResult = GemmResult(None, None, None)
    winner: Candidate | None = None
    for cand in impl.candidates(problem):

        def record_failure(message: str, reason: str, exc: Exception, cand=cand) -> None:
            """Exclude the candidate; stop the run if it left the CUDA context unusable."""
            best.candidates.append(CandidateResult(cand.config, "failed", reason=reason))
            log(f"    {impl.name} {problem.name} [{cand.config}] {message}")
            lost = _device_error()
            if lost:
                raise DeviceLost(f"{impl.name} [{cand.config}] left the GPU unusable: {lost}") from exc

        if cand.error:
            best.candidates.append(CandidateResult(cand.config, "failed", reason=cand.error))
            log(f"    {impl.name} {problem.name} [{cand.config}] excluded: {cand.error}")
            continue
        try:
            wrong = cand.check(problem)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            record_failure(f"failed: {reason}", reason, exc)
            continue
        if wrong:
            best.candidates.append(CandidateResult(cand.config, "wrong", reason=wrong))
            log(f"    {impl.name} {problem.name} [{cand.config}] WRONG, excluded: {wrong}")
            continue
        try:
            t0 = time.monotonic()
            t = bench(cand.run, graphable=cand.graphable, rep_ms=rep_ms, method=method)
            mhz = clocks.median_sm_mhz(t0, time.monotonic()) if clocks else None
        except Exception as exc:
            reason = f"timing failed: {type(exc).__name__}: {exc}"
            record_failure(reason, reason, exc)
            continue
        best.candidates.append(CandidateResult(cand.config, "ok", us=round(t.us, 2), sm_mhz=mhz, detail=cand.detail))
        log(f"    {impl.name} {problem.name} [{cand.config}] {t.us:9.1f} us" + (f"  (SM {mhz:.0f} MHz)" if mhz else ""))
        if best.us is None or t.us < best.us:
            best.us, best.config, best.method, best.sm_mhz = round(t.us, 2), cand.config, t.method, mhz
            best.detail = cand.detail
            winner = cand
    return best, winner


def _side_by_side(problem: GemmProblem, results: dict[str, ImplResult], winners: dict[str, Candidate],
                  log: Log, clocks: ClockSampler) -> None:
    """Re-time every implementation's winning candidate on ``problem`` in alternating rounds and
    report that median (the sweep's time stays in ``us_sweep``)."""
    fns = {name: c.run for name, c in winners.items() if c.graphable}
    if len(fns) < 2:
        return
    try:
        timers = interleaved(fns, clocks=clocks)
    except Exception as exc:  # keep the sweep's times, say why
        log(f"    side by side {problem.name} failed ({type(exc).__name__}: {exc}); keeping the sweep's times")
        return
    for name, timer in timers.items():
        gemm = results[name].gemms[problem.name]
        gemm.us_sweep, gemm.us = gemm.us, round(timer.median_us(), 2)
        gemm.sm_mhz = timer.median_mhz()
        gemm.method = f"interleaved rounds: {len(timer.samples)} replays of a {timer.launches}-call CUDA graph"
    log(f"    side by side {problem.name}: " + ", ".join(
        f"{name} {results[name].gemms[problem.name].us:.1f} us" for name in timers))


def _run_impl(impl: Implementation, problems: Sequence[GemmProblem], rep_ms: float, method: str, log: Log,
              clocks: ClockSampler | None = None,
              winners: dict[str, dict[str, Candidate]] | None = None) -> ImplResult:
    reasons = [impl.unsupported(p) for p in problems]
    if any(reasons):
        return ImplResult("skipped", next(r for r in reasons if r))
    result = ImplResult("ok")
    for problem in problems:
        try:
            gemm, winner = _time_gemm(impl, problem, rep_ms, method, log, clocks)
            if winner is not None and winners is not None:
                winners.setdefault(problem.name, {})[impl.name] = winner
        except DeviceLost:
            raise
        except Exception as exc:  # preparation itself failed (packing, compiling, import...)
            msg = f"{problem.name}: {type(exc).__name__}: {exc}"
            log(f"    {impl.name} failed: {msg}")
            lost = _device_error()
            if lost:
                raise DeviceLost(f"{impl.name} left the GPU unusable: {lost}") from exc
            return ImplResult("failed", msg[:500], result.gemms)
        result.gemms[problem.name] = gemm
        if gemm.us is None:
            bad = gemm.candidates
            status = "wrong" if bad and all(c.status == "wrong" for c in bad) else "failed"
            result.status = status
            result.reason = f"{problem.name}: no correct candidate ({len(bad)} tried)"
    return result


def run(
    scenarios: Sequence[Scenario],
    impls: Sequence[Implementation],
    *,
    draws: Sequence[str] = ("uniform", "skewed"),
    seed: int = 0,
    device: str | torch.device = "cuda",
    rep_ms: float = 20.0,
    timing_method: str = "auto",
    measure_ceilings: bool = True,
    options: dict[str, object] | None = None,
    on_update: Callable[[RunResult], None] | None = None,
    deadline_s: float | None = None,
    log: Log = _stderr_log,
) -> RunResult:
    """Benchmark ``scenarios`` x ``draws`` with ``impls``; see the module docstring."""
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        raise ChordUnsupportedError("the benchmark needs a CUDA GPU (use --list to inspect scenarios on a CPU)")
    start = time.monotonic()
    if device.index is None:  # several torch APIs (e.g. memory queries) need an explicit index
        device = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.set_device(device)
    with ClockSampler(device.index, uuid=cuda_uuid(device)) as clocks:
        result = _run(scenarios, impls, draws=draws, seed=seed, device=device, rep_ms=rep_ms,
                      timing_method=timing_method, measure_ceilings=measure_ceilings, options=options,
                      on_update=on_update, deadline_s=deadline_s, log=log, start=start, clocks=clocks)
    result.clocks = clocks.summary()
    if result.clocks.get("samples"):
        log(f"clocks: {result.clocks}")
    return result


def _run(scenarios: Sequence[Scenario], impls: Sequence[Implementation], *, draws: Sequence[str], seed: int,
         device: torch.device, rep_ms: float, timing_method: str, measure_ceilings: bool,
         options: dict[str, object] | None, on_update: Callable[[RunResult], None] | None,
         deadline_s: float | None, log: Log, start: float, clocks: ClockSampler) -> RunResult:
    ceilings: Ceilings = ceilings_mod.measure(device) if measure_ceilings else NOMINAL_H200
    log(f"ceilings: copy {ceilings.copy_tbps:.2f} TB/s, bf16 {ceilings.bf16_tflops:.0f} TFLOP/s ({ceilings.source})")
    result = RunResult(
        created_utc=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        command=shlex.join([os.path.basename(sys.executable), "-m", "chord_bench", *sys.argv[1:]]),
        environment=environment(device),
        ceilings={"copy_tbps": ceilings.copy_tbps, "bf16_tflops": ceilings.bf16_tflops, "source": ceilings.source,
                  "nominal": {"copy_tbps": NOMINAL_H200.copy_tbps, "bf16_tflops": NOMINAL_H200.bf16_tflops}},
        options={"draws": list(draws), "seed": seed, "rep_ms": rep_ms, "timing_method": timing_method,
                 **(options or {})},
    )
    live: list[Implementation] = []
    for impl in impls:
        reason = impl.unavailable()
        extra = {k: v for k, v in impl.describe().items() if k not in ("name", "role", "version", "group")}
        result.implementations.append(
            ImplInfo(impl.name, impl.role, impl.version, reason is None, reason, extra, impl.group))
        if reason:
            log(f"{impl.name}: unavailable: {reason}")
        else:
            live.append(impl)
    for impl in live:
        t0 = time.monotonic()
        try:
            impl.warm_up(scenarios, device, log)
        except Exception as exc:  # candidates compile on first use instead, and fail there with the reason
            log(f"{impl.name}: warm-up failed ({type(exc).__name__}: {exc}); compiling on first use")
        if time.monotonic() - t0 > 1.0:
            log(f"{impl.name}: warm-up took {time.monotonic() - t0:.0f} s")
    weights = WeightCache(seed, device)
    generation = weights.generation
    for scenario in scenarios:
        for draw in draws:
            if deadline_s is not None and time.monotonic() - start > deadline_s:
                log(f"time budget of {deadline_s:.0f} s reached; stopping before {scenario.id}/{draw}")
                result.options["stopped_early"] = True
                return result
            routing, problems = scenario_problems(scenario, draw, seed, weights)
            if weights.generation != generation:  # other weights: per-weight state is stale
                for impl in live:
                    impl.release()
                generation = weights.generation
            costs = gemm_costs(scenario, routing.counts)
            sres = ScenarioResult(
                scenario=scenario.id, family=scenario.family, series=scenario.series, draw=draw, seed=seed,
                tokens=scenario.tokens, top_k=scenario.top_k, num_experts=scenario.num_experts,
                tok_e=round(scenario.tok_e, 2), experts_used=routing.experts_used,
                max_rows_per_expert=int(routing.counts.max()),
                floor_us=round(sum(c.floor_us(ceilings) for c in costs), 2),
                gemms=[GemmInfo(c.name, c.n, c.k, c.bytes, c.flops, round(c.floor_us(ceilings), 2), c.bound(ceilings))
                       for c in costs],
                parallel=scenario.parallel, expert_max_tokens=scenario.expert_max_tokens,
            )
            log(f"{scenario.id} [{draw}] tok_e={scenario.tok_e:.1f} experts_used={routing.experts_used} "
                f"floor={sres.floor_us:.1f} us")
            for p in problems:
                p.reference()
            winners: dict[str, dict[str, Candidate]] = {}
            for impl in live:
                try:
                    sres.impls[impl.name] = _run_impl(impl, problems, rep_ms, timing_method, log, clocks, winners)
                except DeviceLost as exc:
                    log(f"stopping: {exc}")
                    sres.impls[impl.name] = ImplResult("failed", str(exc)[:500])
                    result.scenarios.append(sres)
                    result.options["stopped_early"] = f"device lost: {exc}"[:500]
                    return result
            for p in problems:
                finalists = {name: c for name, c in winners.get(p.name, {}).items()
                             if sres.impls[name].gemms.get(p.name) is not None}
                _side_by_side(p, sres.impls, finalists, log, clocks)
            for impl in live:
                r = sres.impls[impl.name]
                total = r.total_us
                log(f"  {impl.name:<16} {r.status:<8} " + (f"{total:9.1f} us" if total else (r.reason or "")))
            result.scenarios.append(sres)
            del problems
            torch.cuda.empty_cache()
            if on_update is not None:
                result.clocks = clocks.summary()
                on_update(result)
    return result
