# ruff: noqa
"""Session 23: routing blocks one per item at 192-235 rows per expert, any number of blocks (BLOCKS, the first the
baseline); 112 and 120 with one row width (two spill). Session 22's text: 96-token routing blocks, one per item (the default configuration of that block:
256-K stages, row widths 80 and 88; the down in runs), against the planned 64 x 2 items at ~150-350 rows per expert. The whole layer
(moe_experts), each on its own routing, interleaved CUDA graphs, outputs compared bit for bit
and against the reference; and each GEMM of it alone.
argv[1] == precompile: compile only."""
import json
import os
import sys

import torch

from chord_kernels.indexed import wgmma as W

_orig = W._choose_wgmma_config


def _patched(n, k, block_m, rows):
    import dataclasses
    c = _orig(n, k, block_m, rows)
    if block_m in (112, 120) and c.dynamic:
        c = dataclasses.replace(c, row_widths=(block_m - 8,))
    return c


W._choose_wgmma_config = _patched

import chord_kernels
from chord_kernels import reference
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import moe_experts
from chord_kernels.indexed.api import routing_order_rows, run_gemm
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
H, I, E, TOPK = 7168, 256, 384, 8
BLOCKS = tuple(int(b) for b in os.environ.get("BLOCKS", "64,96").split(","))
B0 = BLOCKS[0]
CASES = [(m, int(t)) for m, t in (x.split(":") for x in os.environ.get("CASES", "tp8:8192,tp8:10240,tp8:12288,ep8:8208,ep8:16368").split(","))]

if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    from chord_kernels.indexed.api import _silu_mul_twin, _tma_rows_twin
    from chord_kernels.indexed.planner import configs_for
    ks = {}
    for n, k in ((2 * I, H), (H, I), (2 * 2048, H), (H, 2048)):
        for bm in BLOCKS:
            for c in configs_for(n, k, bm, "sm_90a"):
                for x in (c, _silu_mul_twin(c, n), _tma_rows_twin(c), c.topk_sum_twin(n) if hasattr(c, "topk_sum_twin") else None):
                    if x is not None and hasattr(x, "kernel"):
                        ks[x.kernel().source] = x.kernel()
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels compiled", flush=True)
    sys.exit(0)

g = torch.Generator(device=dev).manual_seed(22)
w13_set = random_quantized(E, 2 * I, H, generator=g, device=dev)
w2_set = random_quantized(E, H, I, generator=g, device=dev)
w13 = chord_kernels.pack("indexed", *w13_set, profile="h200_tp8")
w2 = chord_kernels.pack("indexed", *w2_set, profile="h200_tp8")
# EP8: 48 local experts, I = 2048 / 1 (whole intermediate), as the layer benchmark's ep8 weights
I8 = 2048
w13e_set = random_quantized(48, 2 * I8, H, generator=g, device=dev)
w2e_set = random_quantized(48, H, I8, generator=g, device=dev)
w13e = chord_kernels.pack("indexed", *w13e_set, profile="h200_ep8")
w2e = chord_kernels.pack("indexed", *w2e_set, profile="h200_ep8")

from chord_bench.timing import interleaved

res = []
for mode, tokens in CASES:
    a13, a2, s13, s2 = (w13, w2, w13_set, w2_set) if mode == "tp8" else (w13e, w2e, w13e_set, w2e_set)
    gen = torch.Generator(device=dev).manual_seed(tokens)
    hidden = (torch.randn(tokens, H, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    probs = torch.softmax(torch.randn(tokens, E, device=dev, generator=gen), dim=-1)
    tw, ids = probs.topk(TOPK, dim=-1)
    tw, ids = tw.float().contiguous(), ids.to(torch.int32).contiguous()
    emap = None
    if mode == "ep8":
        emap = torch.full((E,), -1, dtype=torch.int32, device=dev)
        emap[:48] = torch.arange(48, dtype=torch.int32, device=dev)
    tok_e = ids.numel() / E
    outs, layer, gu, dn = {}, {}, {}, {}
    for bm in BLOCKS:
        r = align_block_size(ids, bm, E, emap)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        out = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)
        outs[bm] = out
        layer[bm] = lambda route=route, out=out, bm=bm: moe_experts(hidden, a13, a2, route, tw, ids, block_m=bm,
                                                                  expert_map=emap, out=out)
        in_order = routing_order_rows(a13, a2, route, bm, dev, tok_e) > 0
        act = run_gemm(hidden, a13, route, block_m=bm, top_k=TOPK, activation="silu", zero_nonlocal=False,
                       out_position=in_order, tok_e=tok_e)
        gu[bm] = lambda route=route, bm=bm, act=act, in_order=in_order: run_gemm(
            hidden, a13, route, block_m=bm, top_k=TOPK, activation="silu", zero_nonlocal=False,
            out_position=in_order, tok_e=tok_e, out=act)
        from chord_kernels.indexed import gemm_topk_sum
        o2 = torch.empty(tokens, H, dtype=torch.bfloat16, device=dev)
        dn[bm] = lambda route=route, bm=bm, act=act, in_order=in_order, o2=o2: gemm_topk_sum(
            act, a2, *route, tw, ids, block_m=bm, expert_map=emap, out=o2, routing_order=in_order)
        layer[bm]()
    torch.cuda.synchronize()
    same = all(torch.equal(outs[B0], outs[b]) for b in BLOCKS)
    want = reference.moe_layer(hidden, s13, s2, tw, ids, global_num_experts=E, expert_map=emap).float()
    err = {bm: ((outs[bm].float() - want).abs().max() / want.abs().max()).item() for bm in outs}
    fns = {**{f"layer{bm}": f for bm, f in layer.items()}, **{f"gate_up{bm}": f for bm, f in gu.items()},
           **{f"down{bm}": f for bm, f in dn.items()}}
    us = {t: x.median_us() for t, x in interleaved(fns, rounds=5).items()}
    rec = {"mode": mode, "tokens": tokens, "tok_e": tok_e * (8 if mode == "ep8" else 1), "us": us, "bit_identical": same,
           "rel_err": err}
    res.append(rec)
    line = f"{mode} {tokens:6d} tok_e {rec['tok_e']:5.1f} layer {B0} {us[f'layer{B0}']:7.1f}"
    for b in BLOCKS[1:]:
        line += f" {b} {us[f'layer{b}'] / us[f'layer{B0}'] - 1:+.1%}"
    line += " | gu/dn"
    for b in BLOCKS[1:]:
        line += f" {b} {us[f'gate_up{b}'] / us[f'gate_up{B0}'] - 1:+.1%}/{us[f'down{b}'] / us[f'down{B0}'] - 1:+.1%}"
    print(line + f" | bits {'same' if same else 'DIFF'} err {max(err.values()):.2e}", flush=True)
    json.dump(res, open(f"{OUT}/blocks.json", "w"), indent=1)
