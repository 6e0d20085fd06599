# ruff: noqa: B023  (the timed closures run within their loop iteration)
"""Session 19: TP8's down (N = 7168, K = 256) on the WGMMA items of 40-80-token blocks with wider N
tiles per warpgroup (3 and 4 64-channel tiles: 384 and 512 channels per CTA) and narrower (1)
against the planned 2, the GEMM alone from slot-order rows, interleaved."""
import dataclasses
import json
import os
import sys

import torch

import chord_kernels
from chord_bench.timing import interleaved
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import run_gemm
from chord_kernels.indexed.wgmma import SMEM_LIMIT, choose_wgmma_config
from chord_kernels.routing import align_block_size

PRE = sys.argv[1:2] == ["precompile"]
e, n, k, top_k = 384, 7168, 256, 8
CASES = ((1280, 40), (1536, 48), (2048, 56), (3072, 80))


def variants(bm):
    plan = choose_wgmma_config(n, k, bm)
    out = {"plan": plan}
    for mt in (1, 3, 4):
        if mt * plan.tile > 352:
            continue
        for stages in (4, 3, 2):
            cfg = dataclasses.replace(plan, mt=mt, stages=stages, row_widths=())
            if cfg.smem_bytes(0) + 4 * 1024 <= SMEM_LIMIT:
                out[f"mt{mt}s{stages}"] = cfg
                break
    return out


if PRE:
    from concurrent.futures import ThreadPoolExecutor
    cfgs = {c for _, bm in CASES for c in variants(bm).values()}
    print(len(cfgs), "kernels", flush=True)
    with ThreadPoolExecutor(2) as ex:
        list(ex.map(lambda c: c.kernel().compile("sm_90a"), cfgs))
    sys.exit()

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
g = torch.Generator(device=dev).manual_seed(11)
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
    print(f"tp8_{m} bm {bm}: " + "  ".join(f"{t} {v:.1f}" for t, v in us.items()) + f"; identical {all(same.values())}",
          flush=True)
    json.dump(res, open(f"{OUT}/wgmma_down_tiles.json", "w"), indent=1)
