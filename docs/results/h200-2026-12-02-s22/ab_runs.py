# ruff: noqa: B007, B023, E402, E741  (an experiment script: closures timed within their loop iteration, imports after the precompile switch)
"""Session 21, final A/B on the committed code, interleaved CUDA graphs, outputs bit for bit:
(1) TP8's down (N = 7168, K = 256): the planned configuration (runs of N tiles over a resident
    activation tile, consumers in turns) against the same one without runs (items of one N tile,
    the configuration of before), slot-order rows and routing-order rows, 1280-12288 tokens;
(2) configurations without runs, compiled from this header and from the one before
    (wgmma_before.cuh): the same SASS is expected, and the same time.
argv[1] == precompile: compile only."""
import dataclasses
import functools
import json
import os
import re
import subprocess
import sys

import torch

from chord_kernels.indexed import wgmma as W
from chord_kernels.jit import CudaKernel

D = os.path.dirname(os.path.abspath(__file__))
BEFORE = open(f"{D}/wgmma_before.cuh").read()
N, K, E = 7168, 256, 384
TOKENS = [int(t) for t in os.environ.get("TOKENS", "1280,1536,1792,2048,2560,3072,4096,8192,12288").split(",")]
# (name, experts, n, k, rows (slots), tok_e, block)
OTHERS = [("ep8_tok16_gate_up", 48, 4096, 7168, 768, 16.0, 32), ("ep8_tok43_down", 48, 7168, 2048, 2064, 43.0, 56),
          ("ep8_tok128_gate_up", 48, 4096, 7168, 6144, 128.0, 24), ("ep8_tok341_down", 48, 7168, 2048, 16368, 341.0, 64),
          ("tp8_8192_gate_up", 384, 512, 7168, 8192, 170.7, 64)]
if os.environ.get("NO_OTHERS"):
    OTHERS = []


class Before(W.WgmmaConfig):
    def kernel(self):
        return _before_kernel(self)


@functools.cache
def _before_kernel(cfg):
    plain = W.WgmmaConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)})
    src = plain.source().replace('#include "chord/indexed/wgmma.cuh"', BEFORE)
    return CudaKernel(name="indexed_wgmma_before", source=src, entry=W.ENTRY, arch=W.ARCH)


def before(c):
    return Before(**{f.name: getattr(c, f.name) for f in dataclasses.fields(c)})


def items_of(c):
    return dataclasses.replace(c, n_run=0, pingpong=False, stages=W.max_stages(c.block_m, c.mt, c.bk, items=c.items))


def block_for(tokens, e=E, top_k=8):
    import chord_kernels
    from chord_kernels import indexed
    from chord_kernels.formats import random_quantized
    w0 = chord_kernels.pack("indexed", *random_quantized(e, 64, 64), profile="h200_tp8")
    return indexed.choose_block_m(w0, tokens * top_k)


def all_kernels():
    ks = {}
    for t in TOKENS:
        c = W.choose_wgmma_config(N, K, block_for(t), t * 8 / E)
        for x in (c, items_of(c)):
            for y in (x, dataclasses.replace(x, tma_rows=True)):
                ks[y.kernel().source] = y.kernel()
    for _, e, n, k, rows, tok_e, bm in OTHERS:
        c = W.choose_wgmma_config(n, k, bm, tok_e)
        for y in (c, before(c)):
            ks[y.kernel().source] = y.kernel()
    return ks


if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    ks = all_kernels()
    with ThreadPoolExecutor(16) as ex:
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
res = {"tp8_down": [], "others": []}


def sass(cubin):
    out = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True).stdout
    return [re.sub(r"/\*[0-9a-f]{4,}\*/", "", l).split(";")[0].strip() for l in out.splitlines()
            if re.search(r"/\*[0-9a-f]{4}\*/", l)]


for name, e, n, k, rows, tok_e, bm in OTHERS:
    c = W.choose_wgmma_config(n, k, bm, tok_e)
    a_s, b_s = sass(c.kernel().compile("sm_90a")), sass(before(c).kernel().compile("sm_90a"))
    g = torch.Generator(device=dev).manual_seed(n + k)
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
    top_k = 8 if e == 384 else 1
    tokens = rows // 1 if top_k == 1 else rows
    a = (torch.randn(tokens, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    r = align_block_size(ids, bm, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    outs, fns = {}, {}
    for tag, cfg in (("now", c), ("before", before(c))):
        outs[tag] = torch.full((tokens * top_k, n), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[tag] = (lambda out=outs[tag], cfg=cfg: run_gemm(a, w, route, block_m=bm, top_k=top_k, out=out, config=cfg,
                                                            zero_nonlocal=False))
        fns[tag]()
    torch.cuda.synchronize()
    us = {t: x.median_us() for t, x in interleaved(fns, rounds=7).items()}
    same = torch.equal(outs["now"], outs["before"])
    res["others"].append({"name": name, "config": str(c), "us": us, "bit_identical": same, "sass_identical": a_s == b_s,
                          "sass_lines": [len(a_s), len(b_s)]})
    print(f"{name:20s} now {us['now']:7.1f} before {us['before']:7.1f} ({us['now'] / us['before'] - 1:+.1%})"
          f"  bits {'same' if same else 'DIFF'}  sass {'same' if a_s == b_s else f'differs {len(a_s)} vs {len(b_s)}'}",
          flush=True)

g = torch.Generator(device=dev).manual_seed(5)
w = chord_kernels.pack("indexed", *random_quantized(E, N, K, generator=g, device=dev), profile="h200_tp8")
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
    sti = r.sorted_token_ids.long()[: cap * bm]
    a_routed = torch.zeros(cap * bm, K, dtype=torch.bfloat16, device=dev)
    real = sti < m * 8
    a_routed[: sti.numel()][real] = a[sti[real]]
    line = f"tp8_{m:<5} {bm}x{c.items}"
    for mode in ("gather", "routed"):
        outs, fns = {}, {}
        for tag, cfg in (("runs", c), ("items", items_of(c))):
            outs[tag] = torch.full((m * 8, N), float("nan"), dtype=torch.bfloat16, device=dev)

            def f(out=outs[tag], cfg=cfg, mode=mode):
                if mode == "gather":
                    run_gemm(a, w, route, block_m=bm, top_k=1, topk_weights=tw, out=out, config=cfg, zero_nonlocal=False)
                else:
                    run_gemm(a_routed, w, route, block_m=bm, top_k=1, topk_weights=tw, out=out, config=cfg,
                             zero_nonlocal=False, block_rows=True, num_slots=m * 8)
            fns[tag] = f
            f()
        torch.cuda.synchronize()
        same = torch.equal(outs["runs"], outs["items"])
        us = {t: x.median_us() for t, x in interleaved(fns, rounds=7).items()}
        res["tp8_down"].append({"tokens": m, "mode": mode, "block_m": bm, "runs": str(c), "items": str(items_of(c)),
                                "us": us, "bit_identical": same})
        line += f" | {mode} runs {us['runs']:7.1f} items {us['items']:7.1f} ({us['runs'] / us['items'] - 1:+.1%}){'' if same else ' DIFF'}"
    print(line, flush=True)
    json.dump(res, open(f"{OUT}/final_ab.json", "w"), indent=1)
