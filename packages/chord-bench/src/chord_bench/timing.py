"""Timing as docs/benchmarking.md says: CUDA graphs, warm-up, median.

``triton.testing.do_bench_cudagraph`` (median) when Triton is importable; otherwise the same
method by hand: capture ``n`` back-to-back calls in one CUDA graph, replay it several times with
CUDA events around each replay, and report the median per call. No L2 flush: MoE weights are far
larger than L2. Callables that cannot be captured (the eager reference) are timed with events
around plain calls.

:func:`interleaved` times several callables in alternating rounds (a b c a b c ...): the H200 runs
memory-bound kernels at its power cap, where the SM clock wanders (chord_bench.clocks), so only
alternation makes two implementations see the same clock states.

:class:`GraphTimer` is the one CUDA-graph timer of the repository (the harness, ``ci/`` and, through
its ``before_replay`` hook and ``capture_error_mode``, multi-GPU benchmarks); its constructor,
:meth:`GraphTimer.run`, :meth:`GraphTimer.median_us`, :meth:`GraphTimer.median_mhz` and the
``samples`` / ``launches`` attributes are a stable API.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Timing:
    """Median microseconds per call and how it was measured."""

    us: float
    method: str
    samples: int


def _triton_bench() -> Callable | None:
    try:
        from triton.testing import do_bench_cudagraph
    except Exception:  # triton absent or broken: fall back to our own graph timing
        return None
    return do_bench_cudagraph


def _estimate_ms(fn: Callable[[], object], calls: int = 3) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls


def bench_graph_events(fn: Callable[[], object], rep_ms: float = 20.0, replays: int = 10) -> Timing:
    """CUDA-events timing of replays of one graph holding ~``rep_ms`` worth of calls."""
    per_call = max(_estimate_ms(fn), 1e-3)
    timer = GraphTimer(fn, launches=max(1, min(1000, int(rep_ms / per_call))))
    timer.run(replays)
    return Timing(timer.median_us(), f"cuda-graph x{timer.launches} + events", replays)


def bench_eager(fn: Callable[[], object], reps: int = 3) -> Timing:
    """Median of CUDA-event timings of plain calls (for callables that cannot be captured)."""
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    return Timing(statistics.median(samples), "eager + events", reps)


def bench(fn: Callable[[], object], *, graphable: bool = True, rep_ms: float = 20.0, method: str = "auto") -> Timing:
    """Median µs per call of ``fn``. ``method``: ``auto`` (Triton if present), ``triton`` or ``events``."""
    if not graphable:
        return bench_eager(fn)
    triton_bench = _triton_bench() if method in ("auto", "triton") else None
    if method == "triton" and triton_bench is None:
        raise RuntimeError("timing method 'triton' requested but triton.testing is not importable")
    if triton_bench is not None:
        ms = triton_bench(fn, rep=rep_ms, return_mode="median")
        return Timing(float(ms) * 1e3, "triton.testing.do_bench_cudagraph (median)", 10)
    return bench_graph_events(fn, rep_ms=rep_ms)


class GraphTimer:
    """One CUDA graph of ``launches`` back-to-back calls of ``fn``, timed by replays.

    Stable API (used by the harness, ``ci/`` and other packages' benchmarks):

    - ``GraphTimer(fn, launches=10, *, device=None, capture_error_mode="global")``: calls ``fn``
      once on a side stream (lazy initialization, allocator), then captures ``launches`` calls.
      ``fn`` must be capturable; its closure keeps the tensors the graph reads alive (the graph
      does not). ``capture_error_mode`` goes to ``torch.cuda.graph`` (``"thread_local"`` where
      another thread, e.g. NCCL's watchdog, queries events during capture). Capture errors raise.
    - :meth:`run` ``(reps, clocks=None, before_replay=None)``: replays ``reps`` times with CUDA
      events around each replay, appending µs per call to ``samples``; ``before_replay`` runs
      before each replay's start event (e.g. a ``dist.barrier`` so every rank starts together);
      ``clocks`` (a :class:`~chord_bench.clocks.ClockSampler`) records the median SM clock of the
      batch.
    - :meth:`median_us`, :meth:`median_mhz`; ``samples`` (µs per call, one per replay) and
      ``launches``.
    """

    def __init__(self, fn: Callable[[], object], launches: int = 10, *, device: torch.device | None = None,
                 capture_error_mode: str = "global") -> None:
        self.launches = launches
        self.fn = fn  # a graph does not keep the tensors it reads alive; fn's closure does
        self.stream = torch.cuda.Stream(device=device)
        self.stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(self.stream):
            fn()  # warm-up outside the graph (lazy init, allocator)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, stream=self.stream, capture_error_mode=capture_error_mode):
                for _ in range(launches):
                    fn()
            self.graph.replay()
        self.stream.synchronize()
        torch.cuda.current_stream(device).wait_stream(self.stream)
        self.samples: list[float] = []
        self.mhz: list[float] = []

    def run(self, reps: int, clocks: object | None = None, before_replay: Callable[[], object] | None = None) -> None:
        """Replay ``reps`` times; each replay adds its µs per call to ``samples``."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.monotonic()
        with torch.cuda.stream(self.stream):
            for _ in range(reps):
                if before_replay is not None:
                    before_replay()
                start.record()
                self.graph.replay()
                end.record()
                end.synchronize()
                self.samples.append(start.elapsed_time(end) * 1e3 / self.launches)
        mhz = clocks.median_sm_mhz(t0, time.monotonic()) if clocks is not None else None
        if mhz:
            self.mhz.append(mhz)

    def median_us(self) -> float:
        """Median µs per call over every replay so far."""
        return statistics.median(self.samples)

    def median_mhz(self) -> float | None:
        """Median of the batches' median SM clocks (None without a clock sampler)."""
        return round(statistics.median(self.mhz)) if self.mhz else None


def interleaved(fns: dict[str, Callable[[], object]], *, rounds: int = 5, reps: int = 3, launch_ms: float = 2.0,
                clocks: object | None = None) -> dict[str, GraphTimer]:
    """Time graph-capturable callables in alternating rounds; each timer holds its samples.

    Each graph holds about ``launch_ms`` of calls (at least 3); every round replays every graph
    ``reps`` times, in the given order."""
    timers = {}
    for name, fn in fns.items():
        per_call = max(_estimate_ms(fn), 1e-3)
        timers[name] = GraphTimer(fn, launches=max(3, min(200, int(launch_ms / per_call))))
    for _ in range(rounds):
        for timer in timers.values():
            timer.run(reps, clocks)
    return timers
