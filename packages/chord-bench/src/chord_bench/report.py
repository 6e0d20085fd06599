"""Render a :class:`~chord_bench.results.RunResult`: table, JSON, latency-vs-tokens PNG."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from chord_bench.results import RunResult, ScenarioResult


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{suffix}"


def table_rows(run: RunResult) -> list[list[str]]:
    """One row per (scenario, draw, implementation) that was attempted."""
    peers = run.peers()
    rows = []
    for s in run.scenarios:
        for name in run.impl_names():
            r = s.impls.get(name)
            if r is None:
                continue
            up, down = r.gemms.get("gate_up"), r.gemms.get("down")
            ratios = [_fmt(s.ratio(p, name), ".2f", "x") for p in peers]
            if r.status == "ok":
                configs = " / ".join(g.config or "—" for g in (up, down) if g)
            else:
                configs = f"{r.status}: {r.reason or ''}"
            rows.append([
                s.scenario, s.draw, name,
                _fmt(up.us if up else None, ".1f"), _fmt(down.us if down else None, ".1f"),
                _fmt(r.total_us, ".1f"), _fmt(s.floor_us, ".1f"), _fmt(s.pct_of_floor(name), ".0f", "%"),
                *ratios, configs,
            ])
    return rows


def table_header(run: RunResult) -> list[str]:
    return ["scenario", "draw", "impl", "gate_up µs", "down µs", "sum µs", "floor µs", "% of floor",
            *[f"{p} µs / impl µs" for p in run.peers()], "config (gate_up / down) or reason"]


def _clock_line(clocks: dict) -> list[str]:
    if not clocks.get("samples"):
        return []
    reasons = ", ".join(clocks["event_reasons"]) or "none"
    return [f"SM clock while busy: median {clocks['sm_mhz_median']} MHz (min {clocks['sm_mhz_min']}, max "
            f"{clocks['sm_mhz_max']}), memory {clocks['mem_mhz_median']} MHz, power max {clocks['power_w_max']} W, "
            f"temperature max {clocks['temp_c_max']} C, clock-event reasons: {reasons}"]


def format_table(run: RunResult) -> str:
    """A Markdown table (readable on a terminal too) plus the environment and exclusions."""
    header = table_header(run)
    rows = table_rows(run)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    widths[-1] = len(header[-1])  # do not pad the free-text column

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    env = run.environment
    c = run.ceilings
    out = [
        f"GPU {env.get('gpu')} (driver {env.get('driver')}), torch {env.get('torch')}, "
        f"triton {env.get('triton')}, chord-kernels {env.get('chord_kernels')}, commit {env.get('commit')}",
        f"ceilings: copy {c['copy_tbps']:.2f} TB/s, bf16 {c['bf16_tflops']:.0f} TFLOP/s ({c['source']}); "
        f"run {run.created_utc}; command: {run.command}",
        *_clock_line(run.clocks),
        "",
        line(header),
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
        *(line(r) for r in rows),
    ]
    notes = exclusion_notes(run)
    unavailable = [i for i in run.implementations if not i.available]
    if notes or unavailable:
        out.append("")
    out += [f"- {i.name}: not run: {i.reason}" for i in unavailable]
    out += [f"- {n}" for n in notes]
    out += [f"- {i.name}: {i.version}" for i in run.implementations if i.role == "peer"]
    return "\n".join(out)


def exclusion_notes(run: RunResult) -> list[str]:
    """Candidates that were built but excluded (wrong output or errors), grouped per GEMM."""
    notes = []
    for s in run.scenarios:
        for name, r in s.impls.items():
            for gemm_name, g in r.gemms.items():
                bad = g.excluded
                if bad:
                    detail = "; ".join(f"[{b.config}] {b.status}: {b.reason}" for b in bad)
                    notes.append(f"{name} {s.scenario}/{s.draw} {gemm_name}: {len(bad)} of "
                                 f"{len(g.candidates)} configs excluded: {detail}")
    return notes


def _series(run: RunResult, draw: str) -> dict[str, list[ScenarioResult]]:
    groups: dict[str, list[ScenarioResult]] = defaultdict(list)
    for s in run.scenarios:
        if s.draw == draw:
            groups[s.series].append(s)
    return {k: sorted(v, key=lambda s: s.tokens) for k, v in groups.items()}


def plot(run: RunResult, out_dir: Path) -> list[Path]:
    """One PNG per routing draw: a latency-vs-rows panel per series, one line per implementation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    paths = []
    draws = sorted({s.draw for s in run.scenarios})
    for draw in draws:
        groups = _series(run, draw)
        cols = min(3, len(groups))
        nrows = -(-len(groups) // cols)
        fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 4.0 * nrows), squeeze=False)
        for ax, (series, items) in zip(axes.flat, groups.items(), strict=False):
            x = [s.tokens for s in items]
            ax.plot(x, [s.floor_us for s in items], "k--", marker="_", ms=10, lw=1.2, label="floor")
            for name in run.impl_names():
                pts = [(s.tokens, s.impls[name].total_us) for s in items
                       if name in s.impls and s.impls[name].total_us]
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", ms=4, label=name)
            unit = "tokens (top-8)" if items[0].top_k > 1 else "routed rows"
            ax.set(xscale="log", yscale="log", xlabel=unit, ylabel="gate_up + down, µs",
                   title=f"{series} — {draw} routing (lower is better)")
            ax.set_xticks(x, [str(v) for v in x], rotation=30, fontsize=8)
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(groups):]:
            ax.axis("off")
        gpu = run.environment.get("gpu") or "GPU"
        fig.suptitle(f"Chord MoE GEMM latency on {gpu}, {run.created_utc}", fontsize=10)
        fig.tight_layout()
        path = out_dir / f"latency_{draw}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def write_all(run: RunResult, out_dir: Path, *, with_plot: bool = True) -> dict[str, Path]:
    """results.json, table.md and latency_<draw>.png under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"json": run.write_json(out_dir / "results.json")}
    table = out_dir / "table.md"
    table.write_text(format_table(run) + "\n")
    files["table"] = table
    if with_plot and run.scenarios:
        for p in plot(run, out_dir):
            files[p.stem] = p
    return files
