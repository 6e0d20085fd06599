# ruff: noqa: B023  (the timed closures run within their loop iteration)
"""Session 19: TP8's down (N = 7168, K = 256) on the decode kernel with wider N tiles (192-512
channels: more warps or more atoms per warp) and fewer CTAs per SM, against the planned 128-channel
tiles, at 512-1024 tokens (24- and 32-token blocks), the GEMM alone, interleaved. SWEEP=1 and 2 are
the two sweeps that ran (down_tiles_1.json, down_tiles2.json)."""
import dataclasses
import json
import os
import sys

import torch

import chord_kernels
from chord_bench.timing import interleaved
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import choose_config
from chord_kernels.indexed.api import run_gemm
from chord_kernels.indexed.decode import DecodeConfig
from chord_kernels.indexed.heuristics import max_stages
from chord_kernels.routing import align_block_size

PRE = sys.argv[1:2] == ["precompile"]
dev = torch.device("cpu" if PRE else "cuda")
OUT = os.environ.get("OUT", "/tmp")
e, n, k, top_k = 384, 7168, 256, 8
SWEEP = os.environ.get("SWEEP", "2")
SHAPES = {"1": ((4, 2, 2), (4, 4, 2), (8, 2, 2), (4, 4, 1), (8, 2, 1), (8, 4, 1), (4, 8, 1), (4, 1, 4), (8, 1, 2)),
          "2": ((4, 4, 2), (8, 2, 2), (8, 4, 1), (16, 2, 1), (12, 2, 1), (8, 3, 1), (4, 6, 1), (6, 2, 2), (4, 3, 2),
                (16, 1, 1), (12, 1, 2))}[SWEEP]
CASES = {"1": ((512, 24), (768, 24), (1024, 32)),
         "2": ((512, 24), (640, 24), (768, 24), (896, 32), (1024, 32))}[SWEEP]


def variants(bm):
    out = {"plan": choose_config(n, k, bm)}
    for warps, mt, ctas in SHAPES:
        stages = max_stages(bm, warps=warps, mt=mt, bk=256, ctas_per_sm=ctas, limit=3)
        cfg = DecodeConfig(block_m=bm, warps=warps, mt=mt, bk=256, stages=stages, ctas_per_sm=ctas, schedule="balanced")
        if cfg.smem_bytes(0) <= cfg.per_cta_budget() and cfg != out["plan"]:
            out[f"w{warps}m{mt}c{ctas}s{stages}"] = cfg
            if SWEEP == "2" or mt * warps >= 16:
                out[f"w{warps}m{mt}c{ctas}s{stages}S"] = dataclasses.replace(cfg, schedule="strided")
    return out


if PRE:
    from concurrent.futures import ThreadPoolExecutor
    cfgs = {c for bm in (24, 32) for c in variants(bm).values()}
    print(len(cfgs), "kernels", flush=True)
    with ThreadPoolExecutor(2) as ex:
        list(ex.map(lambda c: c.kernel().compile("sm_90a"), cfgs))
    sys.exit()

g = torch.Generator(device=dev).manual_seed(7)
w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_tp8")
res = []
for m, bm in CASES:
    ids = torch.rand(m, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    tw = torch.rand(m * top_k, generator=g, device=dev)
    a = (torch.randn(m * top_k, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    r = align_block_size(ids, bm, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    vs = variants(bm)
    outs = {t: torch.empty(m * top_k, n, dtype=torch.bfloat16, device=dev) for t in vs}
    fns = {t: (lambda cfg=cfg, out=outs[t]: run_gemm(a, w, route, block_m=bm, top_k=1, topk_weights=tw, out=out,
                                                     config=cfg, zero_nonlocal=False)) for t, cfg in vs.items()}
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = {t: torch.equal(outs["plan"], o) for t, o in outs.items()}
    us = {t: x.median_us() for t, x in interleaved(fns, rounds=7).items()}
    res.append({"tokens": m, "block_m": bm, "us": us, "identical": same, "configs": {t: str(c) for t, c in vs.items()}})
    best = sorted(us.items(), key=lambda x: x[1])[:4]
    print(f"tp8_{m} bm {bm}: plan {us['plan']:.1f}; best " + "  ".join(f"{t} {v:.1f}" for t, v in best)
          + f"; identical {all(same.values())}", flush=True)
    print("   " + "  ".join(f"{t} {v:.1f}" for t, v in us.items()), flush=True)
    json.dump(res, open(f"{OUT}/down_tiles{'_1' if SWEEP == '1' else '2'}.json", "w"), indent=1)
