"""Timing on one or more ranks: CUDA-graph replays (eager where capture fails), events, median.

Every benchmark and the profiler of this package time through :func:`time_call`; the CUDA graph
itself is made in one place, :func:`_capture`. The rules:

* warm-up calls first; then ``launches`` calls captured in one CUDA graph (after one call on a
  side stream, so lazy per-stream initialisation stays out of the capture);
* if capture fails on any rank, every rank times eager calls instead (agreed by an all-reduce,
  so ranks never disagree on whether a collective inside ``fn`` runs in a graph), and says so;
* ranks line up on a barrier before each repetition, so the slowest rank is what is measured;
  the result is the median over repetitions, per call, maximum over the ranks of ``group``;
* on CPU (no CUDA events) the wall clock of eager calls.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, Literal

import torch
import torch.distributed as dist

CaptureMode = Literal["global", "thread_local", "relaxed"]


def time_call(
    fn: Callable[[], Any], *, device: torch.device, warmup: int = 2, reps: int = 5,
    launches: int = 1, group: dist.ProcessGroup | None = None, graph: bool = False,
    capture_error_mode: CaptureMode = "thread_local",
) -> tuple[float, bool]:
    """Median µs per call of ``fn`` (maximum over ranks) and whether a CUDA graph was used.

    ``graph``: capture ``launches`` calls in one CUDA graph and time its replays (no Python or
    launch overhead: what a serving engine's captured graphs see); eager otherwise, ``launches``
    calls per repetition. ``capture_error_mode="thread_local"`` lets the NCCL watchdog thread
    query events while a graph holding collectives is captured.
    """
    distributed = dist.is_available() and dist.is_initialized()
    cuda = device.type == "cuda"
    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize(device)
    g = None
    if graph and cuda:
        ok = True
        try:
            g = _capture(fn, device, launches, capture_error_mode)
        except Exception:
            ok = False
        torch.cuda.synchronize(device)
        if distributed:
            flag = torch.tensor([int(ok)], device=device)
            dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group)
            ok = bool(flag.item())
        if not ok:
            g = None

    def eager() -> None:
        for _ in range(launches):
            fn()

    run = g.replay if g is not None else eager
    samples = []
    for _ in range(reps):
        if distributed:
            dist.barrier(group=group)
        if cuda:
            torch.cuda.synchronize(device)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3 / launches)
        else:
            t0 = time.perf_counter()
            run()
            samples.append((time.perf_counter() - t0) * 1e6 / launches)
    value = statistics.median(samples)
    if distributed:
        t = torch.tensor([value], dtype=torch.float64, device=device if cuda else "cpu")
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
        value = float(t.item())
    return value, g is not None


def _capture(
    fn: Callable[[], Any], device: torch.device, launches: int, mode: CaptureMode
) -> torch.cuda.CUDAGraph:
    """One CUDA graph of ``launches`` back-to-back calls of ``fn`` (raises if capture fails)."""
    side = torch.cuda.Stream(device=device)  # lazy per-stream init off the capture
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream(device).wait_stream(side)
    torch.cuda.synchronize(device)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode=mode):
        for _ in range(launches):
            fn()
    return g
