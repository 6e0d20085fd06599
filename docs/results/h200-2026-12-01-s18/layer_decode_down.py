# ruff: noqa: B023  (the timed closures run within their loop iteration)
"""Session 18: the TP8 layer at 9.5-14 rows per expert (24-token blocks) with the down GEMM on the
decode kernel's 24-token configuration (planned now: gate_up writes slot order) against both GEMMs
on the WGMMA one-block items (routing order; WGMMA_ONE_BLOCK_MIN_K = 0), interleaved CUDA graphs;
the two differ in the down's fp32 summation order, so they are compared to each other by error."""
import json
import os

import torch

import chord_kernels
from chord_bench.layer import GLOBAL_EXPERTS, HIDDEN, TOP_K, LayerScenario
from chord_bench.problems import WeightSet
from chord_bench.timing import interleaved
from chord_kernels.indexed import api, choose_block_m, moe_experts, planner
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
MODE = ["decode"]
_min_k = planner.WGMMA_ONE_BLOCK_MIN_K


def set_mode(mode):
    if MODE[0] != mode:
        MODE[0] = mode
        planner.WGMMA_ONE_BLOCK_MIN_K = _min_k if mode == "decode" else 0
        for f in (planner.cached_plan, planner.configs_for, api._silu_mul_twin, api._tma_rows_twin):
            f.cache_clear()


res = []
s0 = LayerScenario(512, "tp8")
w13s = WeightSet.random(s0.local_experts, 2 * s0.intermediate, HIDDEN, seed=1, device=dev)
w2s = WeightSet.random(s0.local_experts, HIDDEN, s0.intermediate, seed=2, device=dev)
w13 = chord_kernels.pack("indexed", w13s.packed, w13s.scales, profile="h200_tp8")
w2 = chord_kernels.pack("indexed", w2s.packed, w2s.scales, profile="h200_tp8")
for tokens in (456, 512, 576, 640, 672):
    s = LayerScenario(tokens, "tp8")
    gen = torch.Generator(device=dev).manual_seed(tokens)
    hidden = (torch.randn(tokens, HIDDEN, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    probs = torch.softmax(torch.randn(tokens, GLOBAL_EXPERTS, device=dev, generator=gen), dim=-1)
    tw, ids = probs.topk(TOP_K, dim=-1)
    tw, ids = tw.float().contiguous(), ids.to(torch.int32).contiguous()
    bm = min(choose_block_m(w13, s.local_slots), choose_block_m(w2, s.local_slots))
    assert bm == 24, bm
    route = align_block_size(ids, bm, GLOBAL_EXPERTS)
    rargs = (route.sorted_token_ids, route.expert_ids, route.num_tokens_post_padded)
    outs = {m: torch.empty(tokens, HIDDEN, dtype=torch.bfloat16, device=dev) for m in ("decode", "wgmma")}

    def layer(mode):
        def f():
            set_mode(mode)
            moe_experts(hidden, w13, w2, rargs, tw, ids, block_m=bm, out=outs[mode])
        return f

    fns = {m: layer(m) for m in ("decode", "wgmma")}
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    err = ((outs["decode"].float() - outs["wgmma"].float()).norm() / outs["wgmma"].float().norm()).item()
    tm = interleaved(fns, rounds=9)
    us = {m: t.median_us() for m, t in tm.items()}
    set_mode("decode")
    res.append({"case": f"tp8_{tokens}", "tok_e": s.local_slots / s.local_experts, "us": us, "rel_diff": err})
    print(f"tp8_{tokens:<5} wgmma {us['wgmma']:7.1f}  decode down {us['decode']:7.1f} ({us['decode'] / us['wgmma'] - 1:+.1%})"
          f"  rel diff {err:.1e}", flush=True)
    json.dump(res, open(f"{OUT}/layer_decode_down.json", "w"), indent=1)
