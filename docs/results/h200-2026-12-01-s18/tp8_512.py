# ruff: noqa: B023  (the timed closures run within their loop iteration)
"""Session 18: TP8 at 512 tokens (10.7 rows per expert), each GEMM alone: gate_up (SiLU fused) and
down (top-k weights) on the planned 24-token one-block WGMMA items against the decode kernel's
24- and 16-token blocks and the WGMMA 16-token blocks, interleaved, outputs bit for bit."""
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
from chord_kernels.indexed.wgmma import choose_wgmma_config
from chord_kernels.routing import align_block_size

dev = torch.device("cuda" if sys.argv[1:2] != ["precompile"] else "cpu")
OUT = os.environ.get("OUT", "/tmp")
e, m, top_k = 384, int(os.environ.get("TOKENS", "512")), 8
g = torch.Generator(device=dev).manual_seed(5)
ids = torch.rand(m, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
tw = torch.rand(m * top_k, generator=g, device=dev)
res = []
for name, n, k in (("gate_up", 512, 7168), ("down", 7168, 256)):
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_tp8")
    up = name == "gate_up"
    rows = m if up else m * top_k
    a = (torch.randn(rows, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    variants = {"wgmma24": (24, choose_wgmma_config(n, k, 24, m * top_k / e)), "decode24": (24, choose_config(n, k, 24)),
                "decode16": (16, choose_config(n, k, 16)), "wgmma16": (16, choose_wgmma_config(n, k, 16))}
    for tag in ("decode24", "decode16"):  # what choose_schedule switches to with many items per CTA
        bm, cfg = variants[tag]
        variants[tag + "s"] = (bm, dataclasses.replace(cfg, schedule="strided"))
    if sys.argv[1:2] == ["precompile"]:
        for _, cfg in variants.values():
            cfg.kernel().compile("sm_90a")
            if up and hasattr(cfg, "silu_mul") and cfg.fits_silu_mul(n):
                dataclasses.replace(cfg, silu_mul=True).kernel().compile("sm_90a")
        continue
    fns, outs = {}, {}
    for tag, (bm, cfg) in variants.items():
        r = align_block_size(ids, bm, e)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        outs[tag] = torch.empty(m * top_k, n // 2 if up else n, dtype=torch.bfloat16, device=dev)
        fns[tag] = (lambda route=route, bm=bm, cfg=cfg, out=outs[tag]:
                    run_gemm(a, w, route, block_m=bm, top_k=top_k if up else 1, topk_weights=None if up else tw,
                             out=out, config=cfg, activation="silu" if up else None, zero_nonlocal=False))
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = {t: torch.equal(outs["wgmma24"], o) for t, o in outs.items()}
    tm = interleaved(fns, rounds=9)
    us = {t: x.median_us() for t, x in tm.items()}
    res.append({"gemm": name, "tokens": m, "us": us, "identical": same, "configs": {t: str(c) for t, (_, c) in variants.items()}})
    print(f"tp8_{m} {name:8} " + "  ".join(f"{t} {v:7.1f}" for t, v in us.items()) + f"  identical {all(same.values())}",
          flush=True)
    json.dump(res, open(f"{OUT}/tp8_{m}.json", "w"), indent=1)
