"""The one timer of the profiler and the benchmarks: what it calls, and the CUDA-graph path."""

from __future__ import annotations

import pytest
import torch

from chord_tokenweave.timing import time_call


def test_cpu_times_eager_calls_per_call() -> None:
    calls = []
    us, graphed = time_call(lambda: calls.append(1), device=torch.device("cpu"), warmup=2,
                            reps=3, launches=4, graph=True)  # no graph on CPU
    assert not graphed and us > 0
    assert len(calls) == 2 + 3 * 4


@pytest.mark.gpu
def test_cuda_graph_is_captured_once_and_replayed() -> None:
    device = torch.device("cuda", 0)
    x = torch.randn(1 << 20, device=device)
    y = torch.empty_like(x)
    calls = []

    def copy() -> None:
        calls.append(1)
        y.copy_(x)

    us, graphed = time_call(copy, device=device, warmup=2, reps=5, launches=3, graph=True)
    assert graphed and us > 0
    assert len(calls) == 2 + 1 + 3  # warm-up, one side-stream call, the captured calls
    assert torch.equal(y, x)


@pytest.mark.gpu
def test_capture_failure_falls_back_to_eager() -> None:
    device = torch.device("cuda", 0)
    x = torch.ones(4, device=device)

    def syncs() -> None:
        float(x.sum())  # a host sync: not capturable

    us, graphed = time_call(syncs, device=device, warmup=1, reps=3, launches=2, graph=True)
    assert not graphed and us > 0
