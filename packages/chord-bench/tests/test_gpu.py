"""The harness end to end on a GPU, on small shapes (skipped without CUDA)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from chord_bench import report, runner, timing
from chord_bench import scenarios as S
from chord_bench.impls import Bf16CeilingImpl, ChordIndexedImpl, ReferenceImpl


@pytest.mark.gpu
def test_graph_timing_measures_a_copy():
    src = torch.randn(64 << 20, device="cuda")
    dst = torch.empty_like(src)
    t_events = timing.bench(lambda: dst.copy_(src), method="events", rep_ms=5)
    t_auto = timing.bench(lambda: dst.copy_(src), rep_ms=5)
    tbps = 2 * src.numel() * 4 / (t_events.us * 1e-6) / 1e12
    assert 0.2 < tbps < 10.0
    assert t_auto.us == pytest.approx(t_events.us, rel=0.3)


@pytest.mark.gpu
def test_interleaved_timing_orders_one_and_two_copies():
    src = torch.randn(32 << 20, device="cuda")
    dst = torch.empty_like(src)

    def twice() -> None:
        dst.copy_(src)
        dst.copy_(src)

    timers = timing.interleaved({"once": lambda: dst.copy_(src), "twice": twice}, rounds=3, reps=2)
    assert all(len(t.samples) == 6 for t in timers.values())
    assert timers["twice"].median_us() == pytest.approx(2 * timers["once"].median_us(), rel=0.25)


@pytest.mark.gpu
def test_graph_timer_keeps_captured_inputs_alive():
    """Timers are built first and replayed later (interleaved rounds): the tensors a graph reads
    must outlive the caller's references, or their memory is reused and the replays read junk."""

    def make() -> tuple[timing.GraphTimer, torch.Tensor]:
        x = torch.full((1 << 20,), 3.0, device="cuda")
        y = torch.zeros_like(x)
        return timing.GraphTimer(lambda: y.copy_(x), launches=2), y

    timer, y = make()
    y.zero_()
    junk = [torch.full((1 << 20,), -1.0, device="cuda") for _ in range(8)]  # would take x's freed block
    timer.run(reps=1)
    torch.cuda.synchronize()
    assert bool((y == 3.0).all()) and len(junk) == 8


@pytest.mark.gpu
def test_runner_small_scenarios(tmp_path):
    small = [
        dataclasses.replace(S.SCENARIOS[sid], num_experts=8 if sid.startswith("ep") else 32,
                            gate_up=S.GemmShape("gate_up", 256, 512), down=S.GemmShape("down", 512, 128),
                            tokens=64)
        for sid in ("ep8_tok16", "tp8_1024")
    ]
    result = runner.run(small, [ReferenceImpl(), Bf16CeilingImpl(), ChordIndexedImpl()], draws=("uniform", "skewed"),
                        measure_ceilings=False, rep_ms=2.0, log=lambda _: None)
    assert len(result.scenarios) == 4
    for s in result.scenarios:
        for name in ("reference", "bf16-ceiling", "chord-indexed"):
            r = s.impls[name]
            assert r.status == "ok", r.reason
            assert r.total_us and r.total_us > 0
        # The graphable winners were re-timed side by side; the eager reference was not.
        for name in ("bf16-ceiling", "chord-indexed"):
            for g in s.impls[name].gemms.values():
                assert g.us_sweep is not None and g.method.startswith("interleaved"), g
        assert all(g.us_sweep is None for g in s.impls["reference"].gemms.values())
    files = report.write_all(result, tmp_path)
    assert (tmp_path / "results.json").exists() and "latency_uniform" in files
