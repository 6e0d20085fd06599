"""The harness end to end on a GPU, on small shapes (skipped without CUDA)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from chord_kernels.bench import report, runner, timing
from chord_kernels.bench import scenarios as S
from chord_kernels.bench.impls import Bf16CeilingImpl, ReferenceImpl


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
def test_runner_small_scenarios(tmp_path):
    small = [
        dataclasses.replace(S.SCENARIOS[sid], num_experts=8 if sid.startswith("ep") else 32,
                            gate_up=S.GemmShape("gate_up", 256, 512), down=S.GemmShape("down", 512, 128),
                            tokens=64)
        for sid in ("ep8_tok16", "tp8_1024")
    ]
    result = runner.run(small, [ReferenceImpl(), Bf16CeilingImpl()], draws=("uniform", "skewed"),
                        measure_ceilings=False, rep_ms=2.0, log=lambda _: None)
    assert len(result.scenarios) == 4
    for s in result.scenarios:
        for name in ("reference", "bf16-ceiling"):
            r = s.impls[name]
            assert r.status == "ok", r.reason
            assert r.total_us and r.total_us > 0
    files = report.write_all(result, tmp_path)
    assert (tmp_path / "results.json").exists() and "latency_uniform" in files
