# ruff: noqa: B023  (the timed closures run within their loop iteration)
"""Session 19: the TP8 layer at 14-23 rows per expert, interleaved CUDA graphs: 24-token blocks
(one-block WGMMA gate_up, decode-kernel down), 32-token blocks with the down on the decode kernel
(the new plan) and on the WGMMA items (session 18's plan). Outputs compared by error (the down's
fp32 order differs between the kernels)."""
import json
import os

import torch

import chord_kernels
from chord_bench.layer import GLOBAL_EXPERTS, HIDDEN, TOP_K, LayerScenario
from chord_bench.problems import WeightSet
from chord_bench.timing import interleaved
from chord_kernels.indexed import api, moe_experts, planner
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
TOKENS = [int(t) for t in os.environ.get("TOKENS", "680,720,768,816,864,960,1024,1080").split(",")]
_new = planner.DECODE_ONE_BLOCK_MS
MODE = ["new"]


def set_mode(mode):
    if MODE[0] != mode:
        MODE[0] = mode
        planner.DECODE_ONE_BLOCK_MS = _new if mode == "new" else (24,)
        for f in (planner.cached_plan, planner.configs_for, api._silu_mul_twin, api._tma_rows_twin):
            f.cache_clear()


s0 = LayerScenario(1024, "tp8")
w13s = WeightSet.random(s0.local_experts, 2 * s0.intermediate, HIDDEN, seed=1, device=dev)
w2s = WeightSet.random(s0.local_experts, HIDDEN, s0.intermediate, seed=2, device=dev)
w13 = chord_kernels.pack("indexed", w13s.packed, w13s.scales, profile="h200_tp8")
w2 = chord_kernels.pack("indexed", w2s.packed, w2s.scales, profile="h200_tp8")
res = []
for tokens in TOKENS:
    gen = torch.Generator(device=dev).manual_seed(tokens)
    hidden = (torch.randn(tokens, HIDDEN, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    probs = torch.softmax(torch.randn(tokens, GLOBAL_EXPERTS, device=dev, generator=gen), dim=-1)
    tw, ids = probs.topk(TOP_K, dim=-1)
    tw, ids = tw.float().contiguous(), ids.to(torch.int32).contiguous()
    routes = {}
    for bm in (24, 32):
        r = align_block_size(ids, bm, GLOBAL_EXPERTS)
        routes[bm] = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    per_expert = torch.bincount(ids.flatten().long(), minlength=GLOBAL_EXPERTS)
    variants = {"b24": (24, "new"), "b32": (32, "new"), "b32w": (32, "old")}
    outs = {t: torch.empty(tokens, HIDDEN, dtype=torch.bfloat16, device=dev) for t in variants}

    def layer(tag):
        bm, mode = variants[tag]

        def f():
            set_mode(mode)
            moe_experts(hidden, w13, w2, routes[bm], tw, ids, block_m=bm, out=outs[tag])
        return f

    fns = {t: layer(t) for t in variants}
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    err = {t: ((o.float() - outs["b32"].float()).norm() / outs["b32"].float().norm()).item() for t, o in outs.items()}
    us = {t: x.median_us() for t, x in interleaved(fns, rounds=9).items()}
    set_mode("new")
    res.append({"tokens": tokens, "tok_e": tokens * TOP_K / GLOBAL_EXPERTS, "us": us, "rel_diff": err,
                "experts_over_24": int((per_expert > 24).sum()), "experts_over_32": int((per_expert > 32).sum())})
    print(f"tp8_{tokens:<5} tok_e {tokens * TOP_K / GLOBAL_EXPERTS:5.1f} >24: {res[-1]['experts_over_24']:3d} >32: "
          f"{res[-1]['experts_over_32']:3d}  " + "  ".join(f"{t} {v:6.1f} ({v / us['b32'] - 1:+.1%})" for t, v in us.items())
          + f"  maxdiff {max(err.values()):.1e}", flush=True)
    json.dump(res, open(f"{OUT}/tp8_narrow.json", "w"), indent=1)
