# ruff: noqa: E402, B023, B905, F401  (an experiment script as it ran: kernels swapped before the imports that plan them)
"""Session 22: the bulk-store epilogue (each token row leaves the staging tile as one
cp.async.bulk, two staging buffers) against the header before (threads' 16-byte stores, two
barriers per pass). The whole layer (moe_experts) and each of its GEMMs, kernels of both headers
on the same plan, interleaved CUDA graphs, outputs bit for bit and against the reference.
argv[1] == precompile: compile only."""
import dataclasses
import functools
import json
import os
import sys

import torch

from chord_kernels.indexed import wgmma as W
from chord_kernels.jit import CudaKernel

D = os.path.dirname(os.path.abspath(__file__))
BEFORE = open(f"{D}/wgmma_before.cuh").read()
USE_BEFORE = [False]
_kernel = W.WgmmaConfig.kernel


@functools.cache
def _before_kernel(cfg):
    src = cfg.source().replace('#include "chord/indexed/wgmma.cuh"', BEFORE)
    return CudaKernel(name="indexed_wgmma_before", source=src, entry=W.ENTRY, arch=W.ARCH)


W.WgmmaConfig.kernel = lambda self: _before_kernel(self) if USE_BEFORE[0] else _kernel(self)

import chord_kernels
from chord_kernels import reference
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import choose_block_m, gemm_topk_sum, moe_experts
from chord_kernels.indexed.api import routing_order_rows, run_gemm
from chord_kernels.routing import align_block_size

H, E, TOPK = 7168, 384, 8
CASES = [("tp8", 1024), ("tp8", 2048), ("tp8", 4096), ("tp8", 8192), ("ep8", 768), ("ep8", 2064), ("ep8", 6144),
         ("ep8", 16368)]
SHAPES = {"tp8": (E, 256), "ep8": (48, 2048)}  # experts on the rank, intermediate size

if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor

    from chord_kernels.indexed.api import _silu_mul_twin, _tma_rows_twin
    from chord_kernels.indexed.planner import configs_for
    ks = {}
    for mode, tokens in CASES:
        e, i = SHAPES[mode]
        slots = tokens * TOPK * e // E
        for n, k in ((2 * i, H), (H, i)):
            w0 = chord_kernels.pack("indexed", *random_quantized(e, n, 64), profile=f"h200_{mode}")
            bm = choose_block_m(w0, slots)
            for c in configs_for(n, k, bm, "sm_90a"):
                for x in (c, _silu_mul_twin(c, n), _tma_rows_twin(c)):
                    if isinstance(x, W.WgmmaConfig):
                        ks[_kernel(x).source] = _kernel(x)
                        ks[_before_kernel(x).source] = _before_kernel(x)
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels compiled", flush=True)
    sys.exit(0)

from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
weights = {}
g = torch.Generator(device=dev).manual_seed(22)
for mode, (e, i) in SHAPES.items():
    s13 = random_quantized(e, 2 * i, H, generator=g, device=dev)
    s2 = random_quantized(e, H, i, generator=g, device=dev)
    weights[mode] = (chord_kernels.pack("indexed", *s13, profile=f"h200_{mode}"), s13,
                     chord_kernels.pack("indexed", *s2, profile=f"h200_{mode}"), s2)


def variant(fn, before):
    def f():
        USE_BEFORE[0] = before
        try:
            fn()
        finally:
            USE_BEFORE[0] = False
    return f


res = []
for mode, tokens in CASES:
    w13, s13, w2, s2 = weights[mode]
    gen = torch.Generator(device=dev).manual_seed(tokens)
    hidden = (torch.randn(tokens, H, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    probs = torch.softmax(torch.randn(tokens, E, device=dev, generator=gen), dim=-1)
    tw, ids = probs.topk(TOPK, dim=-1)
    tw, ids = tw.float().contiguous(), ids.to(torch.int32).contiguous()
    emap = None
    if mode == "ep8":
        emap = torch.full((E,), -1, dtype=torch.int32, device=dev)
        emap[:48] = torch.arange(48, dtype=torch.int32, device=dev)
    slots = tokens * TOPK * w13.num_experts // E
    bm = min(choose_block_m(w13, slots), choose_block_m(w2, slots))
    r = align_block_size(ids, bm, E, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    tok_e = ids.numel() / E
    in_order = routing_order_rows(w13, w2, route, bm, dev, tok_e) > 0
    fns, outs = {}, {}
    for tag, before in (("new", False), ("before", True)):
        out = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)
        act = run_gemm(hidden, w13, route, block_m=bm, top_k=TOPK, activation="silu", zero_nonlocal=False,
                       out_position=in_order, tok_e=tok_e)
        act.fill_(float("nan"))
        o2 = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)
        outs[tag] = (out, act, o2)
        fns[f"layer_{tag}"] = variant(lambda out=out: moe_experts(hidden, w13, w2, route, tw, ids, block_m=bm,
                                                                  expert_map=emap, out=out), before)
        fns[f"gate_up_{tag}"] = variant(lambda act=act: run_gemm(
            hidden, w13, route, block_m=bm, top_k=TOPK, activation="silu", zero_nonlocal=False,
            out_position=in_order, tok_e=tok_e, out=act), before)
        fns[f"down_{tag}"] = variant(lambda act=act, o2=o2: gemm_topk_sum(
            act, w2, *route, tw, ids, block_m=bm, expert_map=emap, out=o2, routing_order=in_order), before)
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = all(torch.equal(a, b) for a, b in zip(outs["new"], outs["before"]))
    want = reference.moe_layer(hidden, s13, s2, tw, ids, global_num_experts=E, expert_map=emap).float()
    err = ((outs["new"][0].float() - want).abs().max() / want.abs().max()).item()
    us = {t: x.median_us() for t, x in interleaved(fns, rounds=5).items()}
    cfgs = {}
    res.append({"mode": mode, "tokens": tokens, "block_m": bm, "us": us, "bit_identical": same, "rel_err": err})
    print(f"{mode} {tokens:6d} bm {bm:3d} | layer {us['layer_new']:7.1f} vs {us['layer_before']:7.1f} "
          f"({us['layer_new'] / us['layer_before'] - 1:+.1%}) | gate_up {us['gate_up_new']:7.1f} vs "
          f"{us['gate_up_before']:7.1f} ({us['gate_up_new'] / us['gate_up_before'] - 1:+.1%}) | down "
          f"{us['down_new']:7.1f} vs {us['down_before']:7.1f} ({us['down_new'] / us['down_before'] - 1:+.1%}) | "
          f"bits {'same' if same else 'DIFF'} err {err:.2e}", flush=True)
    json.dump(res, open(f"{OUT}/epi_ab.json", "w"), indent=1)
