# ruff: noqa: B008, B023  (the timed closures run within their loop iteration)
"""Session 19: TP8's down (N = 7168, K = 256) on the decode kernel at 24-64-token blocks against the
planned WGMMA items, (1) the GEMM alone from slot-order rows and (2) the layer: planned moe_experts
(routing-order activation) against gate_up planned + the down on the decode kernel (slot order,
its own routing when the block differs), interleaved CUDA graphs."""
import dataclasses
import json
import os
import sys

import torch

import chord_kernels
from chord_bench.layer import GLOBAL_EXPERTS, HIDDEN, TOP_K, LayerScenario
from chord_bench.problems import WeightSet
from chord_bench.timing import interleaved
from chord_kernels.indexed import choose_block_m, choose_config, moe_experts
from chord_kernels.indexed.api import gemm_topk_sum, run_gemm
from chord_kernels.routing import align_block_size

PRE = sys.argv[1:2] == ["precompile"]
dev = torch.device("cpu" if PRE else "cuda")
OUT = os.environ.get("OUT", "/tmp")
TOKENS = [int(t) for t in os.environ.get("TOKENS", "768,1024,1280,1536,2048,3072,4096").split(",")]
e, n, k = 384, 7168, 256


def dec_variants(bm):
    cfg = choose_config(n, k, bm)
    out = {f"dec{bm}": cfg}
    if cfg.schedule == "balanced":
        out[f"dec{bm}s"] = dataclasses.replace(cfg, schedule="strided")
    return out


if PRE:
    for bm in (24, 32, 48, 64):
        for cfg in dec_variants(bm).values():
            cfg.kernel().compile("sm_90a")
    sys.exit()

s0 = LayerScenario(1024, "tp8")
w13s = WeightSet.random(s0.local_experts, 2 * s0.intermediate, HIDDEN, seed=1, device=dev)
w2s = WeightSet.random(s0.local_experts, HIDDEN, s0.intermediate, seed=2, device=dev)
w13 = chord_kernels.pack("indexed", w13s.packed, w13s.scales, profile="h200_tp8")
w2 = chord_kernels.pack("indexed", w2s.packed, w2s.scales, profile="h200_tp8")
gemm_res, layer_res = [], []
for tokens in TOKENS:
    gen = torch.Generator(device=dev).manual_seed(tokens)
    hidden = (torch.randn(tokens, HIDDEN, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    probs = torch.softmax(torch.randn(tokens, GLOBAL_EXPERTS, device=dev, generator=gen), dim=-1)
    tw, ids = probs.topk(TOP_K, dim=-1)
    tw, ids = tw.float().contiguous(), ids.to(torch.int32).contiguous()
    slots = tokens * TOP_K
    tok_e = slots / e
    bm = min(choose_block_m(w13, slots), choose_block_m(w2, slots))
    routes = {}

    def route(b):
        if b not in routes:
            r = align_block_size(ids, b, e)
            routes[b] = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        return routes[b]

    # (1) the down GEMM alone, slot-order rows
    a = (torch.randn(slots, k, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    twf = tw.reshape(-1)
    variants = {"plan": (bm, None)}
    for b in (24, 32, 48, 64):
        if (b >= bm - 8 and b <= bm + 16) or b == 32:
            variants.update({t: (b, c) for t, c in dec_variants(b).items()})
    outs, fns = {}, {}
    for tag, (b, cfg) in variants.items():
        outs[tag] = torch.empty(slots, n, dtype=torch.bfloat16, device=dev)
        fns[tag] = (lambda r=route(b), b=b, cfg=cfg, out=outs[tag]:
                    run_gemm(a, w2, r, block_m=b, top_k=1, topk_weights=twf, out=out, config=cfg,
                             zero_nonlocal=False, tok_e=tok_e))
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    err = {t: ((o.float() - outs["plan"].float()).norm() / outs["plan"].float().norm()).item() for t, o in outs.items()}
    us = {t: x.median_us() for t, x in interleaved(fns, rounds=9).items()}
    gemm_res.append({"tokens": tokens, "tok_e": tok_e, "block_m": bm, "us": us, "rel_diff": err,
                     "configs": {t: str(c) for t, (_, c) in variants.items()}})
    print(f"down  tp8_{tokens:<5} bm {bm}: " + "  ".join(f"{t} {v:6.1f}" for t, v in us.items())
          + f"  maxdiff {max(err.values()):.1e}", flush=True)

    # (2) the layer
    lvariants = {"plan": None}
    for b in (24, 32, 48, 64):
        if (b >= bm - 8 and b <= bm + 16) or b == 32:
            lvariants.update(dec_variants(b))
    louts, lfns = {}, {}
    r_up = route(bm)
    for tag, cfg in lvariants.items():
        louts[tag] = torch.empty(tokens, HIDDEN, dtype=torch.bfloat16, device=dev)
        if cfg is None:
            lfns[tag] = lambda out=louts[tag]: moe_experts(hidden, w13, w2, r_up, tw, ids, block_m=bm, out=out)
            continue

        def f(cfg=cfg, out=louts[tag]):
            act = run_gemm(hidden, w13, r_up, block_m=bm, top_k=TOP_K, activation="silu", zero_nonlocal=False,
                           tok_e=tok_e)
            if cfg.block_m == bm:
                r = r_up
            else:  # its own routing, built inside the timed step
                rr = align_block_size(ids, cfg.block_m, e)
                r = (rr.sorted_token_ids, rr.expert_ids, rr.num_tokens_post_padded)
            gemm_topk_sum(act, w2, *r, tw, ids, block_m=cfg.block_m, out=out, config=cfg)
        lfns[tag] = f
    for f in lfns.values():
        f()
    torch.cuda.synchronize()
    lerr = {t: ((o.float() - louts["plan"].float()).norm() / louts["plan"].float().norm()).item() for t, o in louts.items()}
    lus = {t: x.median_us() for t, x in interleaved(lfns, rounds=9).items()}
    layer_res.append({"tokens": tokens, "tok_e": tok_e, "block_m": bm, "us": lus, "rel_diff": lerr})
    print(f"layer tp8_{tokens:<5} bm {bm}: " + "  ".join(f"{t} {v:6.1f} ({v / lus['plan'] - 1:+.1%})" for t, v in lus.items())
          + f"  maxdiff {max(lerr.values()):.1e}", flush=True)
    json.dump({"gemm": gemm_res, "layer": layer_res}, open(f"{OUT}/tp8_down.json", "w"), indent=1)
