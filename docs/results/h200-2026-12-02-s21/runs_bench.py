# ruff: noqa: B023, E402, RUF005  (an experiment script: closures timed within their loop iteration, imports after the precompile switch)
"""Session 21: TP8's down (N = 7168, K = 256) with runs of N tiles over a resident activation tile
(n_run) and ping-pong consumers, against the planned configuration; slot-order rows (gather) and
routing-order rows (tensor copies, the layer's path); outputs NaN-poisoned, compared bit for bit;
interleaved CUDA graphs. argv[1] == precompile: compile only."""
import dataclasses
import json
import os
import sys

import torch

from chord_kernels.indexed import wgmma as W

N, K, E = 7168, 256, 384
TOKENS = [int(t) for t in os.environ.get("TOKENS", "2048,3072,4096,8192,12288").split(",")]
VARIANTS = os.environ.get("VARIANTS", "r7,r14,r28,r7pp,r14pp,r28pp,r14pp_dyn,r28pp_dyn").split(",")


def variant(c, tag):
    if tag == "base":
        return c
    n_run = int(tag[1:].split("pp")[0].split("_")[0])
    v = dataclasses.replace(c, n_run=n_run, pingpong="pp" in tag, dynamic="dyn" in tag or c.dynamic)
    return dataclasses.replace(v, stages=min(8, W.max_stages(c.block_m, c.mt, 256, items=c.items, n_run=n_run)))


def block_for(tokens):
    import chord_kernels
    from chord_kernels import indexed
    from chord_kernels.formats import random_quantized
    w0 = chord_kernels.pack("indexed", *random_quantized(E, 64, 64), profile="h200_tp8")
    return indexed.choose_block_m(w0, tokens * 8)


if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for t in TOKENS:
        c = W.choose_wgmma_config(N, K, block_for(t), t * 8 / E)
        for tag in ["base"] + VARIANTS:
            for tma in (False, True):
                k = dataclasses.replace(variant(c, tag), tma_rows=tma).kernel()
                ks[k.source] = k
    with ThreadPoolExecutor(int(os.environ.get("JOBS", "16"))) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels compiled", flush=True)
    sys.exit(0)

import chord_kernels
from chord_bench.timing import interleaved
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import run_gemm
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
g = torch.Generator(device=dev).manual_seed(5)
w = chord_kernels.pack("indexed", *random_quantized(E, N, K, generator=g, device=dev), profile="h200_tp8")
res = []
for m in TOKENS:
    gen = torch.Generator(device=dev).manual_seed(m)
    a = (torch.randn(m * 8, K, generator=gen, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(m, E, generator=gen, device=dev).argsort(dim=1)[:, :8].to(torch.int32)
    tw = torch.rand(m * 8, generator=gen, device=dev)
    bm = block_for(m)
    r = align_block_size(ids, bm, E)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    c = W.choose_wgmma_config(N, K, bm, m * 8 / E)
    cap = r.expert_ids.numel()
    # routing-order rows: row p of a_routed is the routing entry p's slot row (padding: zeros)
    sti = r.sorted_token_ids.long()[: cap * bm]
    a_routed = torch.zeros(cap * bm, K, dtype=torch.bfloat16, device=dev)
    real = sti < m * 8
    a_routed[: sti.numel()][real] = a[sti[real]]
    for mode in ("gather", "routed"):
        outs, fns = {}, {}
        for tag in ["base"] + VARIANTS:
            cfg = variant(c, tag)
            outs[tag] = torch.full((m * 8, N), float("nan"), dtype=torch.bfloat16, device=dev)

            def f(out=outs[tag], cfg=cfg):
                if mode == "gather":
                    run_gemm(a, w, route, block_m=bm, top_k=1, topk_weights=tw, out=out, config=cfg, zero_nonlocal=False)
                else:
                    run_gemm(a_routed, w, route, block_m=bm, top_k=1, topk_weights=tw, out=out, config=cfg,
                             zero_nonlocal=False, block_rows=True, num_slots=m * 8)
            fns[tag] = f
            f()
            torch.cuda.synchronize()
        same = {t: bool(torch.equal(o, outs["base"])) for t, o in outs.items()}
        nan = int(outs["base"].isnan().sum())
        us = {t: x.median_us() for t, x in interleaved(fns, rounds=7).items()}
        res.append({"tokens": m, "mode": mode, "block_m": bm, "config": str(c), "us": us, "bit_identical": same,
                    "base_nan": nan})
        print(f"tp8_{m} {mode:6s} {c.block_m}x{c.items} s{c.stages}: " + "  ".join(
            f"{t} {v:6.1f} ({v / us['base'] - 1:+.0%}{'' if same[t] else ' DIFF'})" for t, v in us.items())
            + f"  nan {nan}", flush=True)
        json.dump(res, open(f"{OUT}/runs_bench.json", "w"), indent=1)
