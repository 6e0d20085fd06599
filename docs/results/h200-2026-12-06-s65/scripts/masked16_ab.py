# ruff: noqa
"""Session 65: the grouped masked mode (DeepEP low-latency buffers, 48 groups) at 121-149 expected rows per group:
16-token blocks (the wide items of ten, planned now to 136) against 24-token blocks (the 24 x 7 items), gate_up
with SiLU fused and the down. Interleaved, three timings, bit for bit on the real rows.
argv: precompile | time [expected,...]"""
import json, os, sys, types

import torch
from chord_kernels.indexed.api import launch_plan

G, MAX_M, SHAPES, ARCH = 48, 256, ((4096, 7168, "silu"), (7168, 2048, None)), "sm_90a"
EXPECTED = (121, 128, 136, 140)
if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for n, k, act in SHAPES:
        for small in (True, False):
            w = types.SimpleNamespace(n=n, k=k, num_experts=G, profile="h200_ep8", small_scales=small)
            for bm in (16, 24):
                for e in EXPECTED:
                    kk = launch_plan(w, bm, 64, 132, ARCH, tok_e=float(e), activation=act, block_rows=True).config.kernel()
                    ks[kk.source] = kk
    with ThreadPoolExecutor(2) as ex:
        list(ex.map(lambda kk: kk.compile(ARCH), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import chord_kernels
from chord_kernels import grouped
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import MaskedRows, run_gemm
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
res = []
for expected in (map(int, sys.argv[2].split(",")) if len(sys.argv) > 2 else EXPECTED):
    g = torch.Generator(device=dev).manual_seed(2000 + expected)
    masked_m = torch.poisson(torch.full((G,), float(expected), device=dev), generator=g).clamp(0, MAX_M).to(torch.int32)
    for n, k, act in SHAPES:
        w = chord_kernels.pack("masked", *random_quantized(G, n, k, generator=g, device=dev), profile="h200_ep8")
        a = (torch.randn(G * MAX_M, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        width = n // 2 if act else n
        planned = grouped.masked_block_m(w, expected)
        outs, fns = {}, {}
        for bm in (16, 24):
            outs[bm] = torch.full((G * MAX_M, width), float("nan"), dtype=torch.bfloat16, device=dev)
            fns[f"bm{bm}"] = lambda bm=bm: run_gemm(a, w, MaskedRows(masked_m, MAX_M), block_m=bm, top_k=1, out=outs[bm],
                                                    activation=act, zero_nonlocal=False, tok_e=expected)
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        real = (torch.arange(MAX_M, device=dev).unsqueeze(0) < masked_m.unsqueeze(1)).reshape(-1)
        same = torch.equal(outs[16][real], outs[24][real]) and not outs[16][real].isnan().any()
        runs = []
        for rep in range(3):
            order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
            tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
            runs.append({t: tm[t].median_us() for t in fns})
        gname = "gate_up" if act else "down"
        res.append({"expected_m": expected, "gemm": gname, "planned_block": planned, "same": same, "us": runs})
        print(f"masked {expected:3d} {gname:7s} (planned {planned}) bm24 " + " ".join(f"{x['bm24']:7.1f}" for x in runs)
              + " | bm16 " + " ".join(f"{x['bm16'] / x['bm24'] - 1:+.1%}" for x in runs) + ("" if same else " DIFF"),
              flush=True)
        json.dump(res, open(f"{OUT}/masked16_ab.json", "w"), indent=1)
