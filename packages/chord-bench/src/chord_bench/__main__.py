"""``python -m chord_bench``: the benchmark harness command line.

Examples::

    python -m chord_bench --list
    python -m chord_bench --quick --peer humming-kernels --out bench-results/
    python -m chord_bench --scenarios indexed masked --draws uniform --peer humming-kernels --peer-sweep
    python -m chord_bench --scenarios tp8 --impls bf16-ceiling,chord-indexed
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from chord_bench import scenarios as scenarios_mod
from chord_bench.impls import builtin_implementations
from chord_bench.peers import KNOWN_PEERS, make_peers
from chord_kernels import ChordInputError, ChordUnsupportedError

QUICK_REP_MS = 10.0
FULL_REP_MS = 25.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m chord_bench",
        description="Time Chord's MoE GEMMs side by side with the reference, the bf16 ceiling and "
                    "peers, on the same routing, with CUDA graphs (docs/benchmarking.md).",
    )
    p.add_argument("--quick", action="store_true",
                   help="uniform routing only and shorter timing windows")
    p.add_argument("--scenarios", nargs="+", metavar="ID",
                   help="ids, globs (ep8_*), series (tp8) or families (indexed, grouped, contiguous, "
                        "masked, all); default: all")
    p.add_argument("--draws", default=None,
                   help="comma-separated routing draws: uniform,skewed (default: both; --quick: uniform)")
    p.add_argument("--impls", default="reference,bf16-ceiling,chord-indexed",
                   help="comma-separated built-in implementations (default: %(default)s)")
    p.add_argument("--peer", action="append", default=[], metavar="NAME",
                   help=f"add an installed peer library ({', '.join(KNOWN_PEERS)}); repeatable; "
                        "default: $CHORD_BENCH_PEERS, comma-separated")
    p.add_argument("--peer-sweep", action="store_true",
                   help="also time each peer path's best configuration of a small sweep "
                        "(reported apart from the vLLM-default configuration)")
    p.add_argument("--out", type=Path, default=Path("bench-results"),
                   help="directory for results.json, table.md and side_by_side_*.png (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="base seed of weights, activations and routing")
    p.add_argument("--rep-ms", type=float, default=None,
                   help=f"timing window per measurement in ms (default {FULL_REP_MS}, --quick {QUICK_REP_MS})")
    p.add_argument("--timing", choices=("auto", "triton", "events"), default="auto",
                   help="auto: triton.testing.do_bench_cudagraph if importable, else CUDA events over graph replays")
    p.add_argument("--nominal-ceilings", action="store_true",
                   help="use the nominal H200 ceilings (4.27 TB/s, 790 TFLOP/s) instead of measuring them")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="stop starting new scenarios after this long (results so far are written)")
    p.add_argument("--device", default="cuda", help="CUDA device (default: %(default)s)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.add_argument("--list", action="store_true", help="list the selected scenarios with their floors and exit")
    p.add_argument("--from-json", type=Path, metavar="RESULTS",
                   help="re-render table/PNG of an earlier results.json into --out (no GPU); with "
                        "--nominal-ceilings its floors are recomputed against the nominal ceilings")
    return p.parse_args(argv)


def rerender(path: Path, out_dir: Path, *, nominal: bool, plot: bool) -> int:
    """Table, JSON and PNG of a stored run (optionally against the nominal ceilings)."""
    from chord_bench import report
    from chord_bench.results import RunResult

    run = RunResult.read_json(path)
    if nominal:
        c = scenarios_mod.NOMINAL_H200
        run = run.with_ceilings(c.copy_tbps, c.bf16_tflops, c.source)
    report.write_all(run, out_dir, with_plot=plot)
    report.print_table(run)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        chosen = scenarios_mod.select(args.scenarios)
        draws = tuple(d.strip() for d in (args.draws or ("uniform" if args.quick else "uniform,skewed")).split(","))
        for d in draws:
            if d not in scenarios_mod.DRAWS:
                raise ChordInputError(f"--draws: expected {list(scenarios_mod.DRAWS)}, got {d!r}")
        if args.from_json:
            return rerender(args.from_json, args.out, nominal=args.nominal_ceilings, plot=not args.no_plot)
        if args.list:
            for s in chosen:
                print(scenarios_mod.describe(s))
            return 0
        impl_names = [n.strip() for n in args.impls.split(",") if n.strip()]
        peer_names = args.peer or [p for p in os.environ.get("CHORD_BENCH_PEERS", "").split(",") if p.strip()]
        if args.peer_sweep and not peer_names:
            raise ChordInputError("--peer-sweep: name the peer to sweep with --peer (e.g. --peer humming-kernels)")
        impls = builtin_implementations(impl_names) + make_peers(peer_names, sweep=args.peer_sweep)
        # Chord's own kernels run last in each scenario: a kernel under development that faults
        # then cannot cost the reference, ceiling and peer numbers of that scenario.
        order = {"reference": 0, "ceiling": 1, "peer": 2, "chord": 3}
        impls.sort(key=lambda i: order.get(i.role, 3))
    except ChordInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    from chord_bench import report, runner

    out_dir: Path = args.out  # created by the first checkpoint: a run refused up front leaves nothing

    def checkpoint(result) -> None:
        report.write_all(result, out_dir, with_plot=False)

    try:
        result = runner.run(
            chosen, impls, draws=draws, seed=args.seed, device=args.device,
            rep_ms=args.rep_ms or (QUICK_REP_MS if args.quick else FULL_REP_MS),
            timing_method=args.timing, measure_ceilings=not args.nominal_ceilings,
            options={"quick": args.quick, "scenarios": [s.id for s in chosen], "peer_sweep": args.peer_sweep},
            on_update=checkpoint,
            deadline_s=None if args.max_minutes is None else args.max_minutes * 60,
        )
    except ChordUnsupportedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    files = report.write_all(result, out_dir, with_plot=not args.no_plot)
    print("wrote " + ", ".join(str(p) for p in files.values()), file=sys.stderr)
    report.print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
