"""Session 17: the grouped contiguous GEMMs (harness problems: every expert 128 / 256 / 512 rows, and
EP8 tok85 / tok341 routed contiguously) with the planner's row widths and without, interleaved."""
import dataclasses
import json
import os

import torch

import chord_kernels
from chord_bench import scenarios as S
from chord_bench.problems import WeightCache, scenario_problems
from chord_bench.timing import interleaved
from chord_kernels.grouped.api import contiguous_routing
from chord_kernels.indexed import wgmma as W
from chord_kernels.indexed.api import run_gemm

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
weights = WeightCache(0, dev)
res = []
for sid in ("ep8_contig128", "ep8_contig256", "ep8_contig512"):
    _, problems = scenario_problems(S.SCENARIOS[sid], "uniform", 0, weights)
    for gi, p in enumerate(problems):
        w = chord_kernels.pack("contiguous", p.weight.packed, p.weight.scales, profile=p.scenario.profile)
        on = dataclasses.replace(W.choose_wgmma_config(p.shape.n, p.shape.k, 64), tma_rows=True)
        cfgs = {"on": on, "off": dataclasses.replace(on, row_widths=())}
        route = contiguous_routing(p.layout.m_indices, 64)
        outs = {m: torch.zeros(p.a.shape[0], p.shape.n, dtype=torch.bfloat16, device=dev) for m in cfgs}
        fns = {m: (lambda c=c, m=m, p=p, w=w, route=route, outs=outs: run_gemm(
                   p.a, w, route, block_m=64, top_k=1, out=outs[m], config=c, block_rows=True)) for m, c in cfgs.items()}
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        same = torch.equal(outs["on"], outs["off"])
        tm = interleaved(fns, rounds=9)
        us = {m: t.median_us() for m, t in tm.items()}
        name = f"{sid}_{'gate_up' if gi == 0 else 'down'}"
        res.append({"case": name, "us": us, "identical": same, "config": str(on)})
        print(f"{name:22} off {us['off']:7.1f} on {us['on']:7.1f} ({us['on'] / us['off'] - 1:+.1%}) identical {same}", flush=True)
        json.dump(res, open(f"{OUT}/contig_ab.json", "w"), indent=1)
