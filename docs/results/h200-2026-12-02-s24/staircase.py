# ruff: noqa
"""Session 24: the waves' staircase, Chord against humming. EP8's GEMMs (the GEMM harness's ep8_tok16 problems) with
exactly 16 rows on each of A active experts, A = 44..58; Chord (indexed, planned) and humming's indexed path (vLLM's
choice, stream-K) timed side by side, all interleaved per GEMM. Where Chord steps at whole waves and humming does not,
the partial last wave is Chord's loss."""
import dataclasses, json, os
import torch
from chord_bench.impls import ChordIndexedImpl
from chord_bench.peers.humming import HummingKernels, HummingPath
from chord_bench.problems import WeightSet, build_problems
from chord_bench.scenarios import SCENARIOS, RoutingDraw
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ACTIVE = [int(x) for x in os.environ.get("ACTIVE", "44,46,47,48,49,50,52,56,58").split(",")]
base = dataclasses.replace(SCENARIOS["ep8_tok16"], num_experts=64)  # room for up to 64 active experts
E = base.num_experts
up, down = base.gemms
weights = (WeightSet.random(E, up.n, up.k, seed=1, device=dev), WeightSet.random(E, down.n, down.k, seed=2, device=dev))
scen = {a: dataclasses.replace(base, id=f"ep8_active{a}", tokens=16 * a) for a in ACTIVE}
lib = HummingKernels()
hum = HummingPath(lib, "indexed")
hum.warm_up(list(scen.values()), dev, print)
from chord_kernels import indexed as _ix
_plan = _ix.plan
_ix.choose_block_m = lambda w, n: 32  # ep8_tok16's block (tok_e 16), whatever A
_ix.plan = lambda *a, **k: _plan(*a, **{**k, "tok_e": 16.0})
chord = ChordIndexedImpl()
problems = {}
for a, s in scen.items():
    ids = torch.arange(a, dtype=torch.int32).repeat_interleave(16).reshape(-1, 1)
    perm = torch.randperm(ids.numel(), generator=torch.Generator().manual_seed(a))
    ids = ids[perm].contiguous()
    counts = torch.bincount(ids.reshape(-1).long(), minlength=E)
    draw = RoutingDraw(s.id, "exact16", a, ids, torch.rand(ids.shape, generator=torch.Generator().manual_seed(a)), counts, None)
    problems[a] = build_problems(s, draw, weights, seed=a, device=dev)
res = []
for gi, gname in enumerate(("gate_up", "down")):
    fns, labels = {}, {}
    for a in ACTIVE:
        p = problems[a][gi]
        c = chord.candidate(p)
        h = next(iter(hum.candidates(p)))
        fns[f"chord{a}"] = c.run
        fns[f"humming{a}"] = h.run
        labels[a] = (c.config, h.config)
        c.run(); h.run()
        torch.cuda.synchronize()
        for tag, cand in (("chord", c), ("humming", h)):
            err = cand.check(p)
            if err:
                print(f"{gname} A={a} {tag}: {err}", flush=True)
    us = {k: t.median_us() for k, t in interleaved(fns, rounds=5).items()}
    for a in ACTIVE:
        rec = {"gemm": gname, "active": a, "chord_us": us[f"chord{a}"], "humming_us": us[f"humming{a}"],
               "chord_config": labels[a][0], "humming_config": labels[a][1]}
        res.append(rec)
        print(f"{gname:7s} A={a:2d} chord {rec['chord_us']:7.1f} humming {rec['humming_us']:7.1f} ratio {rec['humming_us'] / rec['chord_us']:.3f}", flush=True)
    json.dump(res, open(f"{OUT}/staircase.json", "w"), indent=1)
print("configs:", json.dumps({str(a): labels[a] for a in ACTIVE[:1] + ACTIVE[-1:]}))
