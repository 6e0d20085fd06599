"""Result schema, table, JSON round trip and plots of the harness, from fake timings (CPU)."""

from __future__ import annotations

import json
import sys

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
    "ep8_decode": {"chord-indexed": (190.0, 95.0), "humming-indexed": (200.0, 112.7),
                   "humming-contiguous": (195.0, 105.8)},
    "ep8_tok128": {"chord-indexed": (1800.0, 930.4), "humming-indexed": (800.0, 445.4),
                   "humming-contiguous": (690.0, 347.5)},
    "tp8_1024": {"chord-indexed": (250.0, 150.0), "humming-indexed": (240.0, 241.0)},
    "ep8_masked32": {"chord-indexed": (600.0, 316.3), "humming-indexed": (300.0, 159.8),
                     "humming-masked": (310.0, 172.6)},
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
            *[ImplInfo(f"humming-{p}", "peer", "humming-kernels 0.1.19", True, group="humming",
                       extra={"mode": "vLLM 0.33 default (heuristic range)"})
              for p in ("indexed", "contiguous", "masked")],
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
                parallel=s.parallel, expert_max_tokens=s.expert_max_tokens,
            )
            for name, (up, down) in impls.items():
                cands = [CandidateResult("cfg-a", "ok", up), CandidateResult("cfg-b", "wrong", None, "mismatch")]
                sres.impls[name] = ImplResult("ok", None, {
                    "gate_up": GemmResult(up, "cfg-a", "fake", cands),
                    "down": GemmResult(down, "cfg-a", "fake", [CandidateResult("cfg-a", "ok", down)]),
                })
            run.scenarios.append(sres)
    run.scenarios[0].impls["bf16-ceiling"] = ImplResult("failed", "out of memory")
    run.scenarios[0].impls["humming-masked"] = ImplResult("skipped", "vLLM does not run humming grouped_masked here")
    return run


def test_totals_ratios_and_floor_fraction():
    run = fake_run()
    s = run.scenarios[0]
    assert s.impls["chord-indexed"].total_us == pytest.approx(285.0)
    assert s.ratio("humming-indexed", "chord-indexed") == pytest.approx(312.7 / 285.0)
    assert s.pct_of_floor("chord-indexed") == pytest.approx(100 * s.floor_us / 285.0)
    assert s.tflops("chord-indexed") == pytest.approx(s.flops / 285e-6 / 1e12)
    assert s.impls["bf16-ceiling"].total_us is None and s.pct_of_floor("bf16-ceiling") is None
    assert s.ratio("humming-indexed", "bf16-ceiling") is None
    assert [c.config for c in s.impls["humming-indexed"].gemms["gate_up"].excluded] == ["cfg-b"]
    assert run.peer_groups() == {"humming": ["humming-indexed", "humming-contiguous", "humming-masked"]}
    # Chord is compared with the best humming path of each scenario.
    assert s.best(run.peer_groups()["humming"]) == ("humming-contiguous", pytest.approx(300.8))
    assert report.ratio_vs_best(s, "chord-indexed", run.peer_groups()["humming"]) == pytest.approx(300.8 / 285.0)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip("|").split("|")]


def _table(text: str, first_columns: list[str]) -> list[dict[str, str]]:
    """The rows of the Markdown table whose header starts with ``first_columns``."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines)
              if line.startswith("|") and _cells(line)[:len(first_columns)] == first_columns)
    header = _cells(lines[at])
    rows = []
    for line in lines[at + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, _cells(line), strict=True)))
    return rows


def test_table_shows_microseconds_ratio_floor_and_exclusions():
    run = fake_run()
    text = report.format_table(run)
    rows = _table(text, ["scenario", "draw", "impl"])
    got = next(r for r in rows if r["scenario"] == "ep8_decode" and r["impl"] == "chord-indexed")
    assert got["gate_up µs"] == "190.0" and got["down µs"] == "95.0" and got["sum µs"] == "285.0"
    assert got["vs best humming"] == f"{300.8 / 285.0:.2f}x"
    assert got["% of floor"] == f"{100 * run.scenarios[0].floor_us / 285.0:.0f}%"
    assert got["TFLOP/s"] == f"{run.scenarios[0].tflops('chord-indexed'):.0f}"
    # Chord on a grouped scenario is marked: it ran its indexed kernel there.
    assert any(r["scenario"] == "ep8_masked32" and r["impl"] == "chord-indexed*" for r in rows)
    assert "chord-indexed* on contiguous and masked scenarios" in text
    assert "NVIDIA H200" in text and "570.00" in text and "abc123" in text and "humming-kernels 0.1.19" in text
    assert "chord-grouped: not run: not built yet" in text
    assert "1 of 2 configs excluded: [cfg-b] wrong: mismatch" in text
    assert "failed: out of memory" in text
    assert not any(r["impl"] == "humming-masked" and r["scenario"] == "ep8_decode" for r in rows)  # not applicable


def test_summary_is_last_and_holds_every_implementation_and_the_ratio_to_the_best_path():
    run = fake_run()
    text = report.format_table(run)
    summary = _table(text, ["scenario", "draw", "floor µs"])
    assert text.rstrip().splitlines()[-1] == report._markdown(report.summary_header(run), report.summary_rows(run))[-1]
    by_id = {(r["scenario"], r["draw"]): r for r in summary}
    assert len(by_id) == len(run.scenarios)
    tok128 = by_id[("ep8_tok128", "uniform")]
    assert tok128["chord-indexed µs"] == "2730.4" and tok128["humming-contiguous µs"] == "1037.5"
    assert tok128["best humming"] == "humming-contiguous"
    assert tok128["chord-indexed vs best humming"] == f"{1037.5 / 2730.4:.2f}x"  # slower: below 1
    masked = by_id[("ep8_masked32*", "uniform")]
    assert masked["best humming"] == "humming-indexed" and masked["humming-contiguous µs"] == "—"
    s = next(x for x in run.scenarios if x.scenario == "ep8_masked32")
    assert masked["best humming % floor"] == f"{100 * s.floor_us / 459.8:.0f}%"
    assert masked["chord-indexed % floor"] == f"{100 * s.floor_us / 916.3:.0f}%"


def test_print_table_falls_back_to_markdown_off_a_terminal(capsys):
    report.print_table(fake_run())
    out = capsys.readouterr().out
    assert out.startswith("GPU NVIDIA H200") and _table(out, ["scenario", "draw", "floor µs"])


def test_json_round_trip_and_schema(tmp_path):
    run = fake_run()
    run.scenarios[0].impls["chord-indexed"].gemms["gate_up"].detail = {"block_m": 8}
    path = run.write_json(tmp_path / "results.json")
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA == "chord-bench/2"
    for key in ("created_utc", "command", "environment", "ceilings", "options", "implementations", "scenarios"):
        assert key in data
    assert {"gpu", "driver", "torch", "commit"} <= set(data["environment"])
    assert data["implementations"][1]["version"] == "humming-kernels 0.1.19"
    assert data["implementations"][1]["group"] == "humming"
    first = data["scenarios"][0]
    assert first["parallel"] == "ep" and first["impls"]["humming-indexed"]["gemms"]["gate_up"]["candidates"][1]["status"] == "wrong"
    back = RunResult.read_json(path)
    assert back == run
    assert not list(tmp_path.glob("*.tmp"))  # written whole, then renamed
    data["schema"] = "chord-bench/0"
    with pytest.raises(ValueError, match="schema"):
        RunResult.from_dict(data)


def test_schema_1_files_still_load():
    data = fake_run().to_dict()
    data["schema"] = "chord-bench/1"
    for i in data["implementations"]:
        del i["group"]
    for s in data["scenarios"]:
        del s["parallel"], s["expert_max_tokens"]
        for r in s["impls"].values():
            for g in r["gemms"].values():
                del g["detail"]
                for c in g["candidates"]:
                    del c["detail"]
    run = RunResult.from_dict(data)
    assert run.peer_groups() == {n: [n] for n in ("humming-indexed", "humming-contiguous", "humming-masked")}
    assert report.format_table(run).count("vs best humming-") >= 3  # one group per ungrouped peer


def test_plots_one_png_per_draw(tmp_path):
    pytest.importorskip("matplotlib")
    files = report.write_all(fake_run(), tmp_path)
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["side_by_side_skewed.png", "side_by_side_uniform.png"]
    for name in pngs:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (tmp_path / name).stat().st_size > 10_000
    assert files["table"].read_text().startswith("GPU NVIDIA H200")
    assert files["side_by_side_uniform"] == tmp_path / "side_by_side_uniform.png"


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
    assert "nominal H200" in capsys.readouterr().out
    assert RunResult.read_json(tmp_path / "out" / "results.json").ceilings["copy_tbps"] == 4.27


def test_a_host_without_matplotlib_gets_the_table_and_a_note(tmp_path, capsys, monkeypatch):
    from chord_bench.__main__ import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ModuleNotFoundError
    fake_run().write_json(tmp_path / "in.json")
    assert main(["--from-json", str(tmp_path / "in.json"), "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert "GPU NVIDIA H200" in captured.out and "pip install 'chord-bench[plot]'" in captured.err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["results.json", "table.md"]


class _Terminal:
    """A text stream that says it is a terminal (print_table then renders the summary with rich)."""

    def __init__(self) -> None:
        import io

        self.buffer = io.StringIO()

    def write(self, text: str) -> int:
        return self.buffer.write(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def text(self) -> str:
        import re

        return re.sub(r"\x1b\[[0-9;]*m", "", self.buffer.getvalue())


@pytest.mark.parametrize("columns", [80, 120, 250])
def test_summary_on_a_terminal_shows_every_number_whole(columns, monkeypatch):
    pytest.importorskip("rich")
    monkeypatch.setenv("COLUMNS", str(columns))
    run = fake_run()
    term = _Terminal()
    report.print_table(run, file=term)
    text = term.text()
    assert "…" not in text  # rich cut 1.06x to "1.0…" and 2730.4 to "273…" at 80 and 120 columns
    summary = text[max(text.rfind("summary: gate_up"), text.rfind("| scenario")):]  # the rich title or Markdown
    for row in report.summary_rows(run):
        line = next(x for x in summary.splitlines() if x.strip("|│ ").startswith(row[0] + " ") and row[1] in x)
        assert [c for c in row if c not in line] == []
    lines = [x for x in summary.splitlines()[1:] if x.strip()]
    assert all(len(x) <= columns for x in lines) or all(x.startswith("|") for x in lines)  # a box that fits, or Markdown


def test_summary_widths_fit_the_terminal_or_give_up():
    header, rows = ["scenario", "chord vs best humming"], [["ep8_decode", "1.06x"]]
    widths = report.summary_widths(header, rows, 40)
    assert widths is not None and sum(widths) + 3 * 2 + 1 <= 40 and widths[0] >= 10 and widths[1] >= 5
    assert report.summary_widths(header, rows, 3 * 2 + 1 + 14) is None  # 10 + 5 cells need 15


def test_rerendering_twice_keeps_the_measured_ceilings():
    run = fake_run()
    run.ceilings = {"copy_tbps": 4.1, "bf16_tflops": 680.0, "source": "measured at run start"}
    once = run.with_ceilings(4.27, 790.0, "nominal")
    twice = RunResult.from_dict(once.to_dict()).with_ceilings(4.27, 790.0, "nominal")
    assert twice.ceilings["measured"] == {"copy_tbps": 4.1, "bf16_tflops": 680.0, "source": "measured at run start"}


def test_rerendering_a_schema_1_file_keeps_its_label(tmp_path):
    from chord_bench.__main__ import main

    data = fake_run().to_dict()
    data["schema"] = "chord-bench/1"
    for i in data["implementations"]:
        del i["group"]
    (tmp_path / "in.json").write_text(json.dumps(data))
    assert main(["--from-json", str(tmp_path / "in.json"), "--no-plot", "--out", str(tmp_path / "out")]) == 0
    # its peers have no groups and its scenarios no parallelism: it is not a chord-bench/2 file
    assert json.loads((tmp_path / "out" / "results.json").read_text())["schema"] == "chord-bench/1"
