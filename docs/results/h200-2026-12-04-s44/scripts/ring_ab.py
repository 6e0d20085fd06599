# ruff: noqa
"""Session 44: the grouped contiguous mode's 64 x 2 items (256-K stages, two fit) against the same items on
128-K activation stages with the weights in their own ring of 256-K tiles (three or four stages), tensor
copies, one GEMM at a time, interleaved, three timings; the real rows compared bit for bit.
argv: precompile [threads] | time."""
import dataclasses, json, os, sys

from chord_kernels.indexed import wgmma as W

N_K = {"gu": (4096, 7168), "dn": (7168, 2048)}


def ring(stages):
    return W.WgmmaConfig(block_m=64, mt=2, bk=128, stages=stages, items=2, weight_ring=True, dynamic=True,
                         row_widths=(96, 112), tma_rows=True, subnormal=True)


VARIANTS = {"r3": ring(3), "r4": ring(4)}
CASES = [("tok200", 48, "poisson:9600"), ("tok341", 48, "poisson:16368"), ("contig256", 48, "exact:256"),
         ("contig512", 48, "exact:512")]

if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {c.kernel().source: c.kernel() for c in VARIANTS.values()}
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels import grouped, indexed, routing
from chord_kernels.grouped.api import contiguous_routing
from chord_kernels.indexed.api import run_gemm
from chord_kernels.formats import random_quantized
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
res = []
for name, e, rows in CASES:
    for g_name, (n, k) in N_K.items():
        g = torch.Generator(device=dev).manual_seed(n + hash(name) % 1000)
        kind, val = rows.split(":")
        if kind == "exact":
            ids = torch.arange(e, device=dev, dtype=torch.int32).repeat_interleave(int(val))
        else:
            ids = torch.randint(0, e, (int(val),), generator=g, device=dev, dtype=torch.int32)
        ids = ids[torch.randperm(ids.numel(), generator=g, device=dev)].view(-1, 1).contiguous()
        layout = routing.contiguous_layout(ids, e)
        real = layout.row_slots >= 0
        m = layout.m_indices.numel()
        w = chord_kernels.pack("contiguous", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
        grouped.prepare(w, device=dev)
        a = (torch.randn(m, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        ws = indexed.new_workspace(indexed.max_workspace_bytes(w, device=dev) * 4, dev)
        outs, fns = {}, {}
        outs["plan"] = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=dev)
        fns["plan"] = lambda out=outs["plan"]: grouped.contiguous(a, w, layout.m_indices, out=out, workspace=ws)
        route = contiguous_routing(layout.m_indices, 64)
        for tag, c in VARIANTS.items():
            outs[tag] = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=dev)
            fns[tag] = lambda out=outs[tag], c=c: run_gemm(a, w, route, block_m=64, top_k=1, out=out, config=c,
                                                          workspace=ws, block_rows=True)
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        same = all(torch.equal(outs["plan"][real], o[real]) for o in outs.values())
        nan = any(bool(o[real].isnan().any()) for o in outs.values())
        runs = []
        for rep in range(3):
            order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
            tm = interleaved({t: fns[t] for t in order}, rounds=7)
            runs.append({t: tm[t].median_us() for t in fns})
        res.append({"name": name, "gemm": g_name, "m": m, "us": runs, "same": same, "nan": nan})
        print(f"{name:10s} {g_name} m={m:6d} plan " + " ".join(f"{x['plan']:7.1f}" for x in runs)
              + "".join(f" | {t} " + " ".join(f"{x[t] / x['plan'] - 1:+.1%}" for x in runs) for t in fns if t != "plan")
              + ("" if same and not nan else " DIFF/NAN"), flush=True)
        json.dump(res, open(f"{OUT}/ring_ab.json", "w"), indent=1)
