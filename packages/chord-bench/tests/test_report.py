"""Result schema, table, JSON round trip and plots of the harness, from fake timings (CPU)."""

from __future__ import annotations

import json

import pytest

from chord_bench import report
from chord_bench import scenarios as S
from chord_bench.results import (
    SCHEMA,
    CandidateResult,
    GemmInfo,
    GemmResult,
    ImplInfo,
    ImplResult,
    RunResult,
    ScenarioResult,
)

# Fake (gate_up, down) µs per implementation and scenario.
FAKE = {
    "ep8_decode": {"chord-indexed": (190.0, 95.0), "humming": (260.7, 146.2)},
    "ep8_tok128": {"chord-indexed": (600.0, 300.0), "humming": (1254.3, 679.6)},
    "tp8_1024": {"chord-indexed": (250.0, 150.0), "humming": (373.8, 383.3)},
}


def fake_run() -> RunResult:
    run = RunResult(
        created_utc="2026-11-30T03:00:00Z", command="python -m chord_bench --quick",
        environment={"gpu": "NVIDIA H200", "driver": "570.00", "torch": "2.11", "triton": "3.6",
                     "chord_kernels": "0.1.0", "commit": "abc123"},
        ceilings={"copy_tbps": 4.27, "bf16_tflops": 790.0, "source": "test"},
        options={"draws": ["uniform", "skewed"], "quick": False},
        implementations=[
            ImplInfo("chord-indexed", "chord", "0.1.0", True),
            ImplInfo("humming", "peer", "git 2d9d953", True, extra={"path": "/src/humming"}),
            ImplInfo("chord-grouped", "chord", "0.1.0", False, "not built yet"),
        ],
    )
    for draw in ("uniform", "skewed"):
        for sid, impls in FAKE.items():
            s = S.SCENARIOS[sid]
            d = S.draw_routing(s, draw)
            costs = S.gemm_costs(s, d.counts)
            sres = ScenarioResult(
                scenario=sid, family=s.family, series=s.series, draw=draw, seed=0, tokens=s.tokens,
                top_k=s.top_k, num_experts=s.num_experts, tok_e=s.tok_e, experts_used=d.experts_used,
                max_rows_per_expert=int(d.counts.max()), floor_us=S.layer_floor_us(costs),
                gemms=[GemmInfo(c.name, c.n, c.k, c.bytes, c.flops, c.floor_us(), c.bound()) for c in costs],
            )
            for name, (up, down) in impls.items():
                cands = [CandidateResult("cfg-a", "ok", up), CandidateResult("cfg-b", "wrong", None, "mismatch")]
                sres.impls[name] = ImplResult("ok", None, {
                    "gate_up": GemmResult(up, "cfg-a", "fake", cands),
                    "down": GemmResult(down, "cfg-a", "fake", [CandidateResult("cfg-a", "ok", down)]),
                })
            run.scenarios.append(sres)
    run.scenarios[0].impls["bf16-ceiling"] = ImplResult("failed", "out of memory")
    return run


def test_totals_ratios_and_floor_fraction():
    run = fake_run()
    s = run.scenarios[0]
    assert s.impls["chord-indexed"].total_us == pytest.approx(285.0)
    assert s.ratio("humming", "chord-indexed") == pytest.approx((260.7 + 146.2) / 285.0)
    assert s.pct_of_floor("chord-indexed") == pytest.approx(100 * s.floor_us / 285.0)
    assert s.impls["bf16-ceiling"].total_us is None and s.pct_of_floor("bf16-ceiling") is None
    assert s.ratio("humming", "bf16-ceiling") is None
    assert [c.config for c in s.impls["humming"].gemms["gate_up"].excluded] == ["cfg-b"]


def test_table_shows_microseconds_ratio_floor_and_exclusions():
    run = fake_run()
    text = report.format_table(run)
    lines = text.splitlines()
    row = next(line for line in lines if line.startswith("| ep8_decode") and "chord-indexed" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    header = [c.strip() for c in next(line for line in lines if line.startswith("| scenario")).strip("|").split("|")]
    got = dict(zip(header, cells, strict=True))
    assert got["gate_up µs"] == "190.0" and got["down µs"] == "95.0" and got["sum µs"] == "285.0"
    assert got["humming µs / impl µs"] == f"{(260.7 + 146.2) / 285.0:.2f}x"
    assert got["% of floor"] == f"{100 * run.scenarios[0].floor_us / 285.0:.0f}%"
    assert "NVIDIA H200" in text and "570.00" in text and "abc123" in text
    assert "chord-grouped: not run: not built yet" in text
    assert "1 of 2 configs excluded: [cfg-b] wrong: mismatch" in text
    assert "failed: out of memory" in text


def test_json_round_trip_and_schema(tmp_path):
    run = fake_run()
    path = run.write_json(tmp_path / "results.json")
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA
    for key in ("created_utc", "command", "environment", "ceilings", "options", "implementations", "scenarios"):
        assert key in data
    assert {"gpu", "driver", "torch", "commit"} <= set(data["environment"])
    first = data["scenarios"][0]
    assert first["impls"]["humming"]["gemms"]["gate_up"]["candidates"][1]["status"] == "wrong"
    back = RunResult.read_json(path)
    assert back == run
    data["schema"] = "chord-bench/0"
    with pytest.raises(ValueError, match="schema"):
        RunResult.from_dict(data)


def test_plots_one_png_per_draw(tmp_path):
    pytest.importorskip("matplotlib")
    files = report.write_all(fake_run(), tmp_path)
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["latency_skewed.png", "latency_uniform.png"]
    for name in pngs:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (tmp_path / name).stat().st_size > 10_000
    assert files["table"].read_text().startswith("GPU NVIDIA H200")


def test_series_groups_points_by_rows():
    groups = report._series(fake_run(), "uniform")
    assert [s.scenario for s in groups["ep8"]] == ["ep8_decode", "ep8_tok128"]
    assert [s.scenario for s in groups["tp8"]] == ["tp8_1024"]


def test_with_ceilings_recomputes_floors_from_stored_bytes_and_flops():
    run = fake_run()
    half = run.with_ceilings(4.27 / 2, 790.0, "half bandwidth")
    s0, h0 = run.scenarios[0], half.scenarios[0]  # ep8_decode: memory-bound
    assert h0.floor_us == pytest.approx(2 * s0.floor_us, rel=1e-3)
    assert half.ceilings["measured"]["copy_tbps"] == 4.27 and half.ceilings["source"] == "half bandwidth"
    assert run.scenarios[0].floor_us == s0.floor_us  # the original is untouched
    fast = run.with_ceilings(4.27, 1e6, "infinite math")
    assert all(g.bound == "memory" for s in fast.scenarios for g in s.gemms)


def test_cli_rerenders_a_stored_run(tmp_path, capsys):
    from chord_bench.__main__ import main

    fake_run().write_json(tmp_path / "in.json")
    assert main(["--from-json", str(tmp_path / "in.json"), "--nominal-ceilings", "--no-plot",
                 "--out", str(tmp_path / "out")]) == 0
    assert "BENCHMARKS.md nominal" in capsys.readouterr().out
    assert RunResult.read_json(tmp_path / "out" / "results.json").ceilings["copy_tbps"] == 4.27
