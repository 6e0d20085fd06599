"""Render a :class:`~chord_bench.results.RunResult`: tables, JSON and a side-by-side chart.

Two tables: one row per (scenario, draw, implementation) with gate_up, down and their sum in µs,
% of the floor, TFLOP/s, the ratio against the best path of each peer group and the configuration
that ran; then a summary with one row per (scenario, draw), every implementation side by side,
and Chord's ratio against the best path of each peer group (> 1: Chord is faster).
"""

from __future__ import annotations

import sys
from pathlib import Path

from chord_bench.results import RunResult, ScenarioResult

GROUPED_NOTE = ("chord-indexed* on contiguous and masked scenarios: Chord's indexed kernel over the same "
                "rows; chord-grouped runs them through the grouped family, and expert-parallel indexed "
                "scenarios routed contiguously (128-row segments, the permutation untimed as for "
                "humming-contiguous).")


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{suffix}"


def ratio_vs_best(s: ScenarioResult, impl: str, peers: list[str]) -> float | None:
    """Best peer µs / ``impl`` µs in ``s`` (> 1: ``impl`` is faster than every peer of the group)."""
    best, mine = s.best(peers), s.impls.get(impl)
    total = mine.total_us if mine else None
    return None if best is None or not total else best[1] / total


def _chord_name(s: ScenarioResult, name: str, role: str) -> str:
    return f"{name}*" if role == "chord" and s.family != "indexed" else name


def _timed_names(run: RunResult) -> list[str]:
    """Implementations with a total in at least one scenario."""
    return [n for n in run.impl_names() if any(n in s.impls and s.impls[n].total_us for s in run.scenarios)]


def _groups(run: RunResult) -> dict[str, list[str]]:
    """Peer groups with at least one timed member."""
    timed = set(_timed_names(run))
    return {g: peers for g, peers in run.peer_groups().items() if timed & set(peers)}


def _chords(run: RunResult) -> list[str]:
    timed = set(_timed_names(run))
    return [c for c in run.chords() if c in timed]


def table_header(run: RunResult) -> list[str]:
    return ["scenario", "draw", "impl", "gate_up µs", "down µs", "sum µs", "floor µs", "% of floor",
            "TFLOP/s", *[f"vs best {g}" for g in _groups(run)], "config (gate_up / down) or reason"]


def table_rows(run: RunResult) -> list[list[str]]:
    """One row per (scenario, draw, implementation) that was attempted (an implementation that
    does not apply to a scenario, e.g. a humming path vLLM would not use there, has no row; the
    JSON keeps why)."""
    groups = _groups(run)
    roles = {i.name: i.role for i in run.implementations}
    rows = []
    for s in run.scenarios:
        for name in run.impl_names():
            r = s.impls.get(name)
            if r is None or r.status == "skipped":
                continue
            up, down = r.gemms.get("gate_up"), r.gemms.get("down")
            if r.status == "ok":
                configs = " / ".join(g.config or "—" for g in (up, down) if g)
            else:
                configs = f"{r.status}: {r.reason or ''}"
            rows.append([
                s.scenario, s.draw, _chord_name(s, name, roles.get(name, "")),
                _fmt(up.us if up else None, ".1f"), _fmt(down.us if down else None, ".1f"),
                _fmt(r.total_us, ".1f"), _fmt(s.floor_us, ".1f"), _fmt(s.pct_of_floor(name), ".0f", "%"),
                _fmt(s.tflops(name), ".0f"),
                *[_fmt(ratio_vs_best(s, name, peers), ".2f", "x") for peers in groups.values()], configs,
            ])
    return rows


def summary_header(run: RunResult) -> list[str]:
    cols = ["scenario", "draw", "floor µs", *[f"{n} µs" for n in _timed_names(run)]]
    for group in _groups(run):
        cols += [f"best {group}", f"best {group} % floor"]
    for c in _chords(run):
        cols += [f"{c} % floor", *[f"{c} vs best {group}" for group in _groups(run)]]
    return cols


def summary_rows(run: RunResult) -> list[list[str]]:
    """One row per (scenario, draw): every implementation's sum, the best path of each peer group
    and Chord's ratio against it (``*``: Chord ran its indexed kernel on a grouped scenario)."""
    names = _timed_names(run)
    groups = _groups(run)
    rows = []
    for s in run.scenarios:
        row = [_chord_name(s, s.scenario, "chord"), s.draw, _fmt(s.floor_us, ".1f")]
        row += [_fmt(s.impls[n].total_us if n in s.impls else None, ".1f") for n in names]
        for peers in groups.values():
            best = s.best(peers)
            row += [best[0] if best else "—", _fmt(s.pct_of_floor(best[0]) if best else None, ".0f", "%")]
        for c in _chords(run):
            row.append(_fmt(s.pct_of_floor(c), ".0f", "%"))
            row += [_fmt(ratio_vs_best(s, c, peers), ".2f", "x") for peers in groups.values()]
        rows.append(row)
    return rows


def _markdown(header: list[str], rows: list[list[str]], free_last: bool = False) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    if free_last:
        widths[-1] = len(header[-1])  # do not pad the free-text column

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *(line(r) for r in rows)]


def _clock_line(clocks: dict) -> list[str]:
    if not clocks.get("samples"):
        return []
    reasons = ", ".join(clocks["event_reasons"]) or "none"
    return [f"SM clock while busy: median {clocks['sm_mhz_median']} MHz (min {clocks['sm_mhz_min']}, max "
            f"{clocks['sm_mhz_max']}), memory {clocks['mem_mhz_median']} MHz, power max {clocks['power_w_max']} W, "
            f"temperature max {clocks['temp_c_max']} C, clock-event reasons: {reasons}"]


def header_lines(run: RunResult) -> list[str]:
    env = run.environment
    c = run.ceilings
    peers = sorted({f"{i.version}" for i in run.implementations if i.role == "peer"})
    return [
        f"GPU {env.get('gpu')} (driver {env.get('driver')}), torch {env.get('torch')}, "
        f"triton {env.get('triton')}, chord-kernels {env.get('chord_kernels')}, commit {env.get('commit')}"
        + (f", peers: {', '.join(peers)}" if peers else ""),
        f"ceilings: copy {c['copy_tbps']:.2f} TB/s, bf16 {c['bf16_tflops']:.0f} TFLOP/s ({c['source']}); "
        f"run {run.created_utc}; command: {run.command}",
        *_clock_line(run.clocks),
    ]


def notes(run: RunResult) -> list[str]:
    """Implementations that did not run, excluded candidates, peer versions, the grouped caveat."""
    out = [f"- {i.name}: not run: {i.reason}" for i in run.implementations if not i.available]
    out += [f"- {n}" for n in exclusion_notes(run)]
    out += [f"- {i.name}: {i.version}" + (f"; {i.extra['mode']}" if i.extra.get("mode") else "")
            for i in run.implementations if i.role == "peer"]
    if _chords(run) and any(s.family != "indexed" for s in run.scenarios):
        out.append(f"- * {GROUPED_NOTE}")
    return out


def format_table(run: RunResult) -> str:
    """The whole report as Markdown (readable on a terminal too): environment, the per-GEMM table,
    notes, and the summary table last."""
    out = [*header_lines(run), "", *_markdown(table_header(run), table_rows(run), free_last=True)]
    extra = notes(run)
    if extra:
        out += ["", *extra]
    out += ["", *_markdown(summary_header(run), summary_rows(run))]
    return "\n".join(out)


def print_table(run: RunResult, file=None) -> None:
    """Print the report; on a terminal with ``rich`` installed, the summary as a rich table."""
    file = file or sys.stdout
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        Console = None
    if Console is None or not file.isatty():
        print(format_table(run), file=file, flush=True)
        return
    console = Console(file=file)
    print("\n".join([*header_lines(run), "", *_markdown(table_header(run), table_rows(run), free_last=True)]),
          file=file)
    for line in notes(run):
        console.print(line, markup=False)
    header, rows = summary_header(run), summary_rows(run)
    widths = summary_widths(header, rows, console.width)
    if widths is None:  # a box table would cut its numbers short ("1.0…"): the exact Markdown instead
        print("\n".join(["", *_markdown(header, rows)]), file=file, flush=True)
        return
    table = Table(title="summary: gate_up + down µs; Chord vs the best peer path (> 1: Chord faster)")
    for col, width in zip(header, widths, strict=True):
        table.add_column(col, justify="left" if col in ("scenario", "draw") or col.startswith("best ") else "right",
                         width=width, overflow="fold")
    for row in rows:
        table.add_row(*row)
    console.print(table)


def summary_widths(header: list[str], rows: list[list[str]], terminal: int) -> list[int] | None:
    """Cell widths of a box table of the summary in ``terminal`` columns that show every cell
    whole (headers may wrap), or None where none do. Spare room widens columns, left to right,
    first to their header's longest word, then to the whole header."""
    widths = [max([len(r[i]) for r in rows] + [1]) for i in range(len(header))]
    room = terminal - 3 * len(header) - 1  # per column a border and two spaces of padding; the last border
    if sum(widths) > room:
        return None
    for wants in ([max(len(w) for w in h.split()) for h in header], [len(h) for h in header]):
        for i, want in enumerate(wants):
            widths[i] += max(0, min(room - sum(widths), want - widths[i]))
    return widths


def exclusion_notes(run: RunResult) -> list[str]:
    """Candidates that were built but excluded (wrong output or errors), grouped per GEMM."""
    found = []
    for s in run.scenarios:
        for name, r in s.impls.items():
            for gemm_name, g in r.gemms.items():
                bad = g.excluded
                if bad:
                    detail = "; ".join(f"[{b.config}] {b.status}: {b.reason}" for b in bad)
                    found.append(f"{name} {s.scenario}/{s.draw} {gemm_name}: {len(bad)} of "
                                 f"{len(g.candidates)} configs excluded: {detail}")
    return found


def plot(run: RunResult, out_dir: Path) -> list[Path]:
    """One PNG per routing draw: per scenario, every implementation's % of the floor side by side
    (higher is better, 100 % = the floor), with Chord's ratio against the best peer path above."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    names = _timed_names(run)
    groups = _groups(run)
    chords = _chords(run)
    for draw in sorted({s.draw for s in run.scenarios}):
        items = [s for s in run.scenarios if s.draw == draw]
        width = 0.8 / max(1, len(names))
        fig, ax = plt.subplots(figsize=(max(8.0, 0.9 * len(items) * max(1, len(names)) / 2.5), 4.8))
        for j, name in enumerate(names):
            xs = [i + (j - (len(names) - 1) / 2) * width for i in range(len(items))]
            ys = [s.pct_of_floor(name) or 0.0 for s in items]
            ax.bar(xs, ys, width, label=name)
        for i, s in enumerate(items):
            labels = []
            for c in chords:
                for group, peers in groups.items():
                    ratio = ratio_vs_best(s, c, peers)
                    if ratio is not None:
                        labels.append(f"{ratio:.2f}x" + ("" if len(groups) == 1 else f" {group}"))
            top = max([s.pct_of_floor(n) or 0.0 for n in names] + [0.0])
            if labels:
                ax.text(i, top + 3, "\n".join(labels), ha="center", va="bottom", fontsize=7,
                        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "0.7"})
        ax.axhline(100, color="k", ls="--", lw=1)
        ax.set_xticks(range(len(items)), [f"{s.scenario}{'*' if s.family != 'indexed' else ''}" for s in items],
                      rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("% of the floor (higher is better)")
        if chords and any(s.family != "indexed" for s in items):
            ax.set_xlabel("* grouped scenario (chord-indexed: the indexed kernel over the same rows)", fontsize=8)
        ax.set_ylim(0, 125)
        gpu = run.environment.get("gpu") or "GPU"
        ax.set_title(f"gate_up + down on {gpu}, {draw} routing, {run.created_utc}; "
                     f"above: Chord vs the best peer path", fontsize=9)
        ax.legend(fontsize=7, ncol=min(6, len(names)), loc="upper center", bbox_to_anchor=(0.5, -0.25))
        ax.grid(True, axis="y", alpha=0.3)
        fig.tight_layout()
        path = out_dir / f"side_by_side_{draw}.png"
        tmp = path.with_name(path.stem + ".tmp.png")
        fig.savefig(tmp, dpi=110)
        plt.close(fig)
        tmp.replace(path)
        paths.append(path)
    return paths


def write_all(run: RunResult, out_dir: Path, *, with_plot: bool = True) -> dict[str, Path]:
    """results.json, table.md and side_by_side_<draw>.png under ``out_dir`` (each written whole:
    to a temporary name, then renamed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"json": run.write_json(out_dir / "results.json")}
    table = out_dir / "table.md"
    tmp = table.with_suffix(".md.tmp")
    tmp.write_text(format_table(run) + "\n")
    tmp.replace(table)
    files["table"] = table
    if with_plot and run.scenarios:
        try:
            pngs = plot(run, out_dir)
        except ModuleNotFoundError as exc:
            if exc.name != "matplotlib":
                raise
            print("no PNG: matplotlib is not installed (pip install 'chord-bench[plot]', or pass --no-plot)",
                  file=sys.stderr)
            pngs = []
        for p in pngs:
            files[p.stem] = p
    return files
