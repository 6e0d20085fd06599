# ruff: noqa: B007, B023, E402  (the timed closures run within their loop iteration; imports after the precompile exit)
"""Session 18: consumer 1 started one stage behind consumer 0 (wgmma_stagger.cuh), so that one
warpgroup's epilogue overlaps the other's K loop, against the current header (base), planned
configurations, own routings, interleaved, outputs bit for bit. argv[1] == precompile: compile."""
import functools
import json
import os
import sys

import torch

from chord_kernels.indexed import wgmma as W
from chord_kernels.jit import CudaKernel

D = os.path.dirname(os.path.abspath(__file__))
HDR = open(f"{D}/wgmma_stagger.cuh").read()  # the committed wgmma.cuh with stagger.patch applied
CUR = [None]
_orig = W.wgmma_kernel


@functools.cache
def stagger_kernel(cfg):
    src = cfg.source().replace('#include "chord/indexed/wgmma.cuh"', HDR)
    assert src != cfg.source()
    return CudaKernel(name="indexed_wgmma_stagger", source=src, entry=W.ENTRY, arch=W.ARCH)


W.wgmma_kernel = lambda cfg: stagger_kernel(cfg) if CUR[0] == "stagger" else _orig(cfg)
UP_EP, DN_EP, UP_TP, DN_TP = (4096, 7168), (7168, 2048), (512, 7168), (7168, 256)
# (name, experts, (n, k), top_k, tokens)
CASES = [("tp8_1024", 384, DN_TP, 8, 1024), ("tp8_1024", 384, UP_TP, 8, 1024), ("tp8_2048", 384, DN_TP, 8, 2048),
         ("tp8_4096", 384, DN_TP, 8, 4096), ("tp8_8192", 384, DN_TP, 8, 8192), ("ep8_tok16", 48, UP_EP, 1, 768),
         ("ep8_tok16", 48, DN_EP, 1, 768), ("ep8_tok43", 48, DN_EP, 1, 2064), ("ep8_tok128", 48, DN_EP, 1, 6144),
         ("ep8_tok341", 48, UP_EP, 1, 16368)]


if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor

    import chord_kernels
    from chord_kernels.formats import random_quantized
    from chord_kernels.indexed import choose_block_m
    ks = {}
    for name, e, (n, k), tk, m in CASES:
        w = chord_kernels.pack("indexed", *random_quantized(e, 64, 64), profile="h200_ep8")
        bm = choose_block_m(w, m * tk)
        c = W.choose_wgmma_config(n, k, bm, m * tk / e)
        for kk in (c.kernel(), stagger_kernel(c)):
            ks[kk.source] = kk
    print(len(ks), "kernels", flush=True)
    with ThreadPoolExecutor(2) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
    sys.exit(0)

import chord_kernels
from chord_bench.timing import interleaved
from chord_kernels import indexed
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import run_gemm
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
res = []
WS = {}
for name, e, (n, k), top_k, m in CASES:
    if (e, n, k) not in WS:
        WS.clear()
        g = torch.Generator(device=dev).manual_seed(n + k)
        WS[(e, n, k)] = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev),
                                           profile="h200_ep8" if e == 48 else "h200_tp8")
    w = WS[(e, n, k)]
    gen = torch.Generator(device=dev).manual_seed(m * 7 + n)
    up = (n, k) in (UP_EP, UP_TP)
    rows = m if up else m * top_k
    a = (torch.randn(rows, k, generator=gen, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(m, e, generator=gen, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    tw = None if up else torch.rand(m * top_k, generator=gen, device=dev)
    bm = indexed.choose_block_m(w, m * top_k)
    r = align_block_size(ids, bm, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    c = W.choose_wgmma_config(n, k, bm, m * top_k / e)
    outs, fns = {}, {}
    for tag in ("base", "stagger"):
        outs[tag] = torch.full((m * top_k, n), float("nan"), dtype=torch.bfloat16, device=dev)

        def f(out=outs[tag], tag=tag):
            CUR[0] = tag
            try:
                run_gemm(a, w, route, block_m=bm, top_k=top_k if up else 1, topk_weights=tw, out=out, config=c)
            finally:
                CUR[0] = None
        fns[tag] = f
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = torch.equal(outs["base"].nan_to_num(7.0), outs["stagger"].nan_to_num(7.0))
    tm = interleaved(fns, rounds=int(os.environ.get("ROUNDS", "9")))
    us = {t: x.median_us() for t, x in tm.items()}
    label = f"{name}_{'up' if up else 'down'}_bm{bm}"
    res.append({"case": label, "us": us, "identical": same, "config": str(c)})
    print(f"{label:22} base {us['base']:7.1f}  stagger {us['stagger']:7.1f} ({us['stagger'] / us['base'] - 1:+.1%})"
          f"  identical {same}", flush=True)
    json.dump(res, open(f"{OUT}/stagger_bench.json", "w"), indent=1)
