"""The WGMMA kernel's split tail (``WgmmaConfig.tail_parts``) against the plan, on the H200, in one
device call: every GEMM of the scenarios below on the uniform and the skewed draw, the planned
configuration and its split-tail twins checked against the reference, then timed in interleaved
rounds (three passes, the order reversed in the second).

    PYTHONPATH=packages/chord-kernels/src:packages/chord-bench/src python3 ci/split_tail_ab.py --out $OUT

Where the plan's items have two or more blocks and every width compiled, a third twin cuts the tail's
items into runs of their routing blocks instead (``tail_blocks``: the same bits as the plan, checked).
Prints a line per GEMM (items, rounds on this GPU's SMs, the tail's cut, µs of the plan and each
twin's change) and writes ``split_tail_ab.json`` to ``--out``. The twins are compiled first, several
nvcc at a time (each would otherwise compile at its first launch, one after another). Both sides run by slot
(``ChordIndexedImpl.candidate`` with a configuration), so a GEMM the layer runs in routing order is
compared by slot here. Configurations the split tail does not take (runs of N tiles, the weight
ring's wide items, the decode kernel) are listed as such. The grouped contiguous scenarios run
through ``grouped.contiguous``: its plan (the wide items where an expert passes one segment), and
the mode's 64 x 2 items (one per 128-row segment and N tile, a count the host knows) whole and cut.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

import torch

SCENARIOS = ("ep8_tok16", "ep8_masked16", "ep8_tok43", "ep8_masked32", "ep8_masked64", "ep8_tok341", "tp8_1024",
             "tp8_8192")
CONTIGUOUS = ("ep32_contig128", "ep8_contig128", "ep8_contig256", "ep8_contig512")
"""Through ``grouped.contiguous``: its plan, and its 64 x 2 items (one per 128-row segment) whole and cut."""
PARTS = (4, 8)


def log(msg: str) -> None:
    print(msg, flush=True)


def items_of(counts: list[int], cfg, n: int) -> int:
    """Work items of ``cfg`` over rows per expert ``counts`` (compact_items: runs of up to ``items`` blocks)."""
    return sum(math.ceil(math.ceil(c / cfg.block_m) / cfg.items) for c in counts) * cfg.ntiles(n)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--contiguous", default=",".join(CONTIGUOUS), help="grouped contiguous scenarios")
    parser.add_argument("--parts", default=",".join(map(str, PARTS)))
    parser.add_argument("--draws", default="uniform,skewed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one-fma-only", action="store_true",
                        help="compile the twins in the one-fma form only (the harness's weights: scales below 2^-5)")
    args = parser.parse_args()

    from chord_bench import scenarios as S
    from chord_bench.impls import ChordGroupedImpl, ChordIndexedImpl
    from chord_bench.problems import WeightCache, scenario_problems
    from chord_bench.timing import interleaved
    from chord_kernels import grouped, hardware, indexed
    from chord_kernels.grouped.api import blocks_cut
    from chord_kernels.indexed import WgmmaConfig
    from chord_kernels.indexed.planner import configs_for
    from chord_kernels.jit import compile_all

    sms = hardware.num_sms(torch.cuda.current_device())
    impl = ChordIndexedImpl()
    weights = WeightCache(args.seed, torch.device("cuda"))
    parts = [int(p) for p in args.parts.split(",")]
    cases = [(sid, draw) for sid in filter(None, args.scenarios.split(",")) for draw in args.draws.split(",")]

    def plans(sid: str, draw: str, say: bool = False):
        """(routing, problem, planned configuration by slot or None) of each GEMM of a scenario."""
        routing, problems = scenario_problems(S.SCENARIOS[sid], draw, args.seed, weights)
        for p in problems:
            detail = impl.candidate(p).detail or {}  # (compiles the plan's kernels)
            if "items" not in detail:
                if say:
                    log(f"{sid:15s} {draw:7s} {p.name:7s} the decode kernel: no split tail")
                yield routing, p, None
                continue
            plan = dataclasses.replace(WgmmaConfig(**detail), tma_rows=False)  # by slot, as the twins
            if plan.n_run or plan.weight_ring:
                if say:
                    log(f"{sid:15s} {draw:7s} {p.name:7s} {'runs of N tiles' if plan.n_run else 'weight ring'}: "
                        "no split tail")
                plan = None
            yield routing, p, plan

    grouped_impl = ChordGroupedImpl()
    contiguous_cases = [(sid, draw) for sid in filter(None, args.contiguous.split(",")) for draw in args.draws.split(",")]

    def launch_grid(p, cfg) -> int:
        """The CTAs ``gemm`` launches for ``p`` with ``cfg`` (fewer than the SMs where the routing holds few blocks)."""
        r = p.aligned(cfg.block_m)
        capacity = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, cfg.block_m)
        return indexed.plan(impl._pack(p), block_m=cfg.block_m, capacity=capacity, config=cfg).grid

    def segment_base(shape) -> WgmmaConfig:
        """The contiguous mode's 64 x 2 configuration of a GEMM shape (one item per 128-row segment and N tile)."""
        return configs_for(shape.n, shape.k, grouped.contiguous_block_m("sm_90a"), "sm_90a")[0]

    def segment_items(sid: str, draw: str):
        """(problem, its 64 x 2 configuration, its items) of each GEMM of a grouped contiguous scenario."""
        _, problems = scenario_problems(S.SCENARIOS[sid], draw, args.seed, weights)
        for p in problems:
            base = segment_base(p.shape)
            yield p, base, p.a.shape[0] // 128 * base.ntiles(p.shape.n)

    planned = [plan for sid, draw in cases for _, _, plan in plans(sid, draw, say=True) if plan is not None]
    bases = [segment_base(g) for sid in dict.fromkeys(sid for sid, _ in contiguous_cases) for g in S.SCENARIOS[sid].gemms]
    forms = (True,) if args.one_fma_only else (False, True)
    twins = {dataclasses.replace(plan, tail_parts=q, subnormal=sub) for plan in planned for q in parts
             for sub in forms}
    twins |= {dataclasses.replace(blocks_cut(plan), subnormal=sub) for plan in planned if blocks_cut(plan)
              for sub in forms}
    twins |= {dataclasses.replace(base, tail_parts=q, subnormal=sub, tma_rows=True) for base in bases
              for q in (0, *parts) for sub in forms}
    twins |= {dataclasses.replace(blocks_cut(base), subnormal=sub, tma_rows=True) for base in bases
              for sub in forms}
    compile_all([c.kernel() for c in twins], "sm_90a")
    log(f"{len(twins)} split-tail kernels compiled")
    rows = []

    def time_and_log(sid: str, draw: str, p, total: int, cuts: dict, cands: dict, config: dict) -> None:
        """Check every candidate against the reference, time those right in three interleaved passes
        (the order reversed in the second), print a line and rewrite the JSON."""
        wrong = {t: c.check(p) for t, c in cands.items()}
        if "blocks" in cands and wrong["blocks"] is None:  # the same bits as its uncut configuration
            uncut = cands.get("items64x2", cands["plan"])
            uncut.run()
            want = uncut.result().clone()
            cands["blocks"].run()
            if not torch.equal(cands["blocks"].result()[p.valid_rows()], want[p.valid_rows()]):
                wrong["blocks"] = "bits differ from the uncut items"
        good = {t: c for t, c in cands.items() if wrong[t] is None}
        runs = []
        for rep in range(3):
            order = list(good) if rep % 2 == 0 else list(good)[::-1]
            timers = interleaved({t: good[t].run for t in order}, rounds=5)
            runs.append({t: timers[t].median_us() for t in good})
        row = {"scenario": sid, "draw": draw, "proj": p.name, "items": total, "rounds": total / sms,
               "cuts": cuts, "us": runs, "wrong": {t: w for t, w in wrong.items() if w}, "config": config}
        rows.append(row)
        base = [r["plan"] for r in runs] if "plan" in good else None
        change = "".join(f" | {t}" + (f" {cuts[t][1]}p" if t in cuts else "") + " "
                         + " ".join(f"{r[t] / b - 1:+.1%}" for r, b in zip(runs, base, strict=True))
                         for t in good if t != "plan") if base else " plan EXCLUDED"
        log(f"{sid:15s} {draw:7s} {p.name:7s} items {total:5d} ({total / sms:5.2f} rounds) plan "
            + (" ".join(f"{b:7.1f}" for b in base) if base else "-") + change
            + ("".join(f" {t} WRONG: {w}" for t, w in row["wrong"].items())))
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "split_tail_ab.json").write_text(json.dumps(rows, indent=1))

    for sid, draw in cases:
        for routing, p, plan in plans(sid, draw):
            if plan is None:
                continue
            counts = routing.counts.tolist()
            total, grid = items_of(counts, plan, p.shape.n), launch_grid(p, plan)
            cuts = {f"tail{q}": dataclasses.replace(plan, tail_parts=q).tail_cut(total, grid, p.shape.k) for q in parts}
            cands = {"plan": impl.candidate(p, plan, "plan")}
            cands.update({t: impl.candidate(p, dataclasses.replace(plan, tail_parts=q), t)
                          for t, q in zip(cuts, parts, strict=True)})
            if blocks_cut(plan):
                cuts["blocks"] = blocks_cut(plan).tail_cut(total, grid, p.shape.k)
                cands["blocks"] = impl.candidate(p, blocks_cut(plan), "blocks")
            time_and_log(sid, draw, p, total, cuts, cands, dataclasses.asdict(plan))
        torch.cuda.empty_cache()
    for sid, draw in contiguous_cases:
        for p, base, total in segment_items(sid, draw):
            cuts = {f"tail{q}": dataclasses.replace(base, tail_parts=q).tail_cut(total, sms, p.shape.k) for q in parts}
            cands = {"plan": grouped_impl.candidate(p)}
            planned = cands["plan"].config
            if not planned.endswith(f"block_m={base.block_m}"):  # the plan is the wide items, not 64 x 2
                cands["items64x2"] = grouped_impl.candidate(p, base, "items64x2")
            cands.update({t: grouped_impl.candidate(p, dataclasses.replace(base, tail_parts=q), t)
                          for t, q in zip(cuts, parts, strict=True)})
            cuts["blocks"] = blocks_cut(base).tail_cut(total, sms, p.shape.k)
            cands["blocks"] = grouped_impl.candidate(p, blocks_cut(base), "blocks")
            time_and_log(sid, draw, p, total, cuts, cands, {"plan": planned, "items64x2": dataclasses.asdict(base)})
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
