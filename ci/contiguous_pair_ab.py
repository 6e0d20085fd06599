"""The grouped contiguous mode's pair of launches (wide items or 64 x 2 items, chosen in the kernel
from ``m_indices``) against each launch alone, on the H200, in one device call: every GEMM of the
scenarios below where ``grouped.contiguous_config`` offers the wide items, on the uniform and the
skewed draw, checked (the three give the same bits on the real rows; the pair within the
reference's bound), then timed in interleaved rounds (three passes, the order reversed in the second).

    PYTHONPATH=packages/chord-kernels/src:packages/chord-bench/src python3 ci/contiguous_pair_ab.py --out $OUT

The EP8 indexed scenarios are routed contiguously first (``routing.contiguous_layout``), as
chord-bench's chord-grouped does. Prints a line per GEMM (the experts at 129-160 rows and past, the
launch the rule picks, µs of the pair and the change of the wide items alone and of the 64 x 2 items
alone, and µs of each of the pair's launches alone, one running, one declining; then the pair's launches in the
other order, and the chosen configuration alone followed by a one-CTA kernel, each against the chosen
configuration alone: what a second launch costs) and writes ``contiguous_pair_ab.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

SCENARIOS = ("ep32_contig128", "ep8_contig128", "ep8_tok128")


def log(msg: str) -> None:
    print(msg, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--draws", default="uniform,skewed")
    parser.add_argument("--seeds", default="0")
    args = parser.parse_args()

    from chord_bench import scenarios as S
    from chord_bench.impls import ChordGroupedImpl
    from chord_bench.problems import WeightCache, scenario_problems
    from chord_bench.timing import interleaved
    from chord_kernels import grouped, hardware, indexed, reference, routing
    from chord_kernels.indexed.api import ContiguousRows, run_gemm

    arch = hardware.arch(torch.cuda.current_device())
    impl = ChordGroupedImpl()
    rows_out = []
    for seed in (int(s) for s in args.seeds.split(",")):
        weights = WeightCache(seed, torch.device("cuda"))
        for sid in filter(None, args.scenarios.split(",")):
            for draw in args.draws.split(","):
                _, problems = scenario_problems(S.SCENARIOS[sid], draw, seed, weights)
                for p in problems:
                    w = impl._pack(p)
                    if p.layout is not None:
                        a, m_indices, expected_m = p.a, p.layout.m_indices, p.layout.expected_m
                    else:
                        layout = routing.contiguous_layout(p.topk_ids, p.num_experts)
                        a = p.a_flat()[layout.row_slots.clamp(min=0) // p.addr_top_k].contiguous()
                        m_indices, expected_m = layout.m_indices, layout.expected_m
                    m = a.shape[0]
                    wide = grouped.contiguous_config(w, m, expected_m, arch)
                    if wide is None:
                        log(f"{sid:15s} {draw:7s} seed {seed} {p.name:7s} no wide items offered (expected_m "
                            f"{expected_m}, {m // 128} segments): one launch")
                        continue
                    grouped.prepare(w, expected_m=expected_m)
                    workspace = indexed.new_workspace(indexed.max_workspace_bytes(w, device=a.device), a.device)
                    wide_rows = wide.block_m * wide.items
                    items = grouped.contiguous_tail_config(w, m, arch, hardware.num_sms(a.device.index))
                    members = ((items, False), (wide, True))  # (config, runs where the wide items pay)
                    outs = {t: torch.full((m, w.n), float("nan"), dtype=torch.bfloat16, device=a.device)
                            for t in ("pair", "wide", "items", "first_alone", "second_alone", "reversed",
                                      "chosen_tiny")}
                    pays = grouped.wide_items_pay(m_indices, w.num_experts, wide_rows)
                    tiny = torch.zeros(1, device=a.device)

                    def member(t: str, which: tuple, _a=a, _w=w, _mi=m_indices, _ws=workspace, _outs=outs,
                               _rows=wide_rows) -> None:
                        config, wide_items = which
                        route = ContiguousRows(_mi, choice_rows=_rows, choice_wide=wide_items)
                        run_gemm(_a, _w, route, block_m=config.block_m if config else 64, top_k=1, out=_outs[t],
                                 workspace=_ws, block_rows=True, config=config)

                    def launch(t: str, _a=a, _w=w, _mi=m_indices, _ws=workspace, _outs=outs, _em=expected_m,
                               _wide=wide, _members=members, _pays=pays, _tiny=tiny) -> None:
                        if t in ("first_alone", "second_alone"):  # one of the pair, which runs or declines
                            member(t, _members[t == "second_alone"])
                        elif t == "reversed":  # the pair's launches in the other order
                            member(t, _members[1])
                            member(t, _members[0])
                        elif t == "chosen_tiny":  # the chosen configuration alone, then a one-CTA kernel
                            grouped.contiguous(_a, _w, _mi, out=_outs[t], workspace=_ws,
                                               **({"config": _wide} if _pays else {}))
                            _tiny.add_(1)
                        else:
                            kwargs = {"pair": {"expected_m": _em}, "wide": {"config": _wide}, "items": {}}[t]
                            grouped.contiguous(_a, _w, _mi, out=_outs[t], workspace=_ws, **kwargs)

                    for t in outs:
                        launch(t)
                    real = m_indices >= 0
                    ref = reference.grouped_contiguous(a, (p.weight.packed, p.weight.scales), m_indices)
                    err = ((outs["pair"][real].float() - ref[real].float()).norm() / ref[real].float().norm()).item()
                    ran = "second_alone" if pays else "first_alone"
                    chosen = "wide" if pays else "items"
                    same = all(torch.equal(outs[t][real], outs["pair"][real])
                               for t in ("wide", "items", ran, "reversed", "chosen_tiny"))
                    untouched = bool(outs["pair"][~real].isnan().all())
                    declined = bool(outs["first_alone" if pays else "second_alone"].isnan().all())
                    counts = torch.bincount(m_indices[real].long(), minlength=w.num_experts)
                    fit = int(((counts > 128) & (counts <= wide_rows)).sum())
                    past, present = int((counts > wide_rows).sum()), int((counts > 0).sum())
                    runs = []
                    for rep in range(3):
                        order = list(outs) if rep % 2 == 0 else list(outs)[::-1]
                        timers = interleaved({t: (lambda t=t: launch(t)) for t in order}, rounds=5)
                        runs.append({t: timers[t].median_us() for t in outs})
                    row = {"scenario": sid, "draw": draw, "seed": seed, "proj": p.name, "m": m,
                           "expected_m": expected_m, "present": present, "fit": fit, "past": past,
                           "wide_pays": pays, "rel_err": err, "same_bits": same, "padding_untouched": untouched,
                           "other_declined": declined, "us": runs}
                    rows_out.append(row)
                    ok = "ok" if same and untouched and declined and err <= 5e-3 else "WRONG"
                    log(f"{sid:15s} {draw:7s} seed {seed} {p.name:7s} experts {present:3d}: {fit:3d} at 129-"
                        f"{wide_rows}, {past:3d} past -> {'wide' if pays else '64x2'} | pair "
                        + " ".join(f"{r['pair']:7.1f}" for r in runs)
                        + "".join(f" | {t} " + " ".join(f"{r[t] / r['pair'] - 1:+.1%}" for r in runs)
                                  for t in ("wide", "items"))
                        + " | alone 1st/2nd " + " ".join(f"{r['first_alone']:.1f}/{r['second_alone']:.1f}" for r in runs)
                        + "".join(f" | {t} vs chosen " + " ".join(f"{r[t] / r[chosen] - 1:+.1%}" for r in runs)
                                  for t in ("pair", "reversed", "chosen_tiny"))
                        + f" | {ok} (err {err:.1e})")
                    args.out.mkdir(parents=True, exist_ok=True)
                    (args.out / "contiguous_pair_ab.json").write_text(json.dumps(rows_out, indent=1))
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
