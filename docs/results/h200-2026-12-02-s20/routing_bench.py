# ruff: noqa: B023  (the timed closures run within their loop iteration)
"""Session 20: align_block_size as one CUDA kernel against its PyTorch path (CUDA graphs and eager
calls); fused_moe with each; a second routing for the down GEMM (gate_up at the layer's block,
slot-order activation, down at another block) against the planned layer."""
import json
import os
import sys
import time

import torch

import chord_kernels
from chord_bench.layer import GLOBAL_EXPERTS, HIDDEN, TOP_K, LayerScenario
from chord_bench.problems import WeightSet
from chord_bench.timing import interleaved
from chord_kernels import routing
from chord_kernels.indexed import api, choose_block_m, fused_moe, gemm_topk_sum, moe_experts
from chord_kernels.indexed.api import run_gemm

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
PART = sys.argv[1] if len(sys.argv) > 1 else "all"
SPLIT = os.environ.get("SPLIT", "1") == "1"  # the down GEMM on a second routing (off in the final run)
res = {"align": [], "fused_moe": [], "split": []}


def dump():
    json.dump(res, open(f"{OUT}/routing_bench.json", "w"), indent=1)


def batch(tokens, seed):
    gen = torch.Generator(device=dev).manual_seed(seed)
    hidden = (torch.randn(tokens, HIDDEN, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    probs = torch.softmax(torch.randn(tokens, GLOBAL_EXPERTS, device=dev, generator=gen), dim=-1)
    tw, ids = probs.topk(TOP_K, dim=-1)
    return hidden, tw.float().contiguous(), ids.to(torch.int32).contiguous()


def ep_map(local):
    m = torch.full((GLOBAL_EXPERTS,), -1, dtype=torch.int32, device=dev)
    m[:local] = torch.arange(local, dtype=torch.int32, device=dev)
    return m


def eager_us(fn, n=100):
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


if PART in ("all", "align"):
    from chord_kernels.ops import align
    for tokens, bm, local in [(16, 16, 0), (160, 16, 0), (512, 24, 0), (1024, 32, 0), (2048, 56, 0), (4096, 64, 0),
                              (8192, 64, 0), (16384, 64, 0), (768, 32, 48), (2064, 56, 48), (6144, 24, 48)]:
        _, _, ids = batch(tokens, tokens)
        emap = ep_map(local) if local else None
        want = routing._align_with_torch(ids, bm, GLOBAL_EXPERTS, emap)
        flat = ids.reshape(-1)
        outs = {}

        def forced(tag, **kw):
            o = (torch.empty_like(want.sorted_token_ids), torch.empty_like(want.expert_ids), torch.empty(1, dtype=torch.int32, device=dev))
            outs[tag] = o
            return lambda: align.align_into(flat, emap, bm, GLOBAL_EXPERTS, *o, **kw)

        fns = {"default": lambda: routing.align_block_size(ids, bm, GLOBAL_EXPERTS, emap),
               "single": forced("single", single_max_slots=1 << 30),
               "c256": forced("c256", single_max_slots=0, chunk_slots=256),
               "c512": forced("c512", single_max_slots=0, chunk_slots=512),
               "c1024": forced("c1024", single_max_slots=0, chunk_slots=1024),
               "c2048": forced("c2048", single_max_slots=0, chunk_slots=2048),
               "torch": lambda: routing._align_with_torch(ids, bm, GLOBAL_EXPERTS, emap)}
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        same = all(torch.equal(o[0], want.sorted_token_ids) and torch.equal(o[1], want.expert_ids)
                   and torch.equal(o[2], want.num_tokens_post_padded) for o in outs.values())
        us = {k: t.median_us() for k, t in interleaved(fns, rounds=7).items()}
        eager = {k: eager_us(fns[k]) for k in ("default", "torch")}
        res["align"].append({"tokens": tokens, "block_m": bm, "local": local, "graph_us": us, "eager_us": eager,
                             "identical": same})
        print(f"align {tokens:>6} bm {bm:>2} map {local:>2}: graph " + " ".join(f"{k} {v:6.1f}" for k, v in us.items())
              + f"  eager {eager['default']:6.1f} / {eager['torch']:7.1f}  identical {same}", flush=True)
        dump()


def weights(scn, seed=1):
    w13s = WeightSet.random(scn.local_experts, 2 * scn.intermediate, HIDDEN, seed=seed, device=dev)
    w2s = WeightSet.random(scn.local_experts, HIDDEN, scn.intermediate, seed=seed + 1, device=dev)
    return (chord_kernels.pack("indexed", w13s.packed, w13s.scales, profile=scn.profile),
            chord_kernels.pack("indexed", w2s.packed, w2s.scales, profile=scn.profile))


torch_align = routing._align_with_torch
cuda_align = routing.align_block_size

if PART in ("all", "layer"):
    tp8 = (160, 1024, 1150, 1220, 1300, 1400, 1536, 4096) if SPLIT else (160, 1024, 4096)
    for parallel, token_list in (("tp8", tp8), ("ep8", (768, 6144))):
        scn = LayerScenario(token_list[0], parallel)
        w13, w2 = weights(scn)
        emap = ep_map(scn.local_experts) if parallel == "ep8" else None
        gex = GLOBAL_EXPERTS
        for tokens in token_list:
            hidden, tw, ids = batch(tokens, tokens)
            slots = LayerScenario(tokens, parallel).local_slots
            bm = min(choose_block_m(w13, slots), choose_block_m(w2, slots))
            outs = {k: torch.empty(tokens, HIDDEN, dtype=torch.bfloat16, device=dev)
                    for k in ("fused_cuda", "fused_torch", "experts", "split")}

            def fused(kind):
                def f():
                    api.align_block_size = cuda_align if kind == "fused_cuda" else \
                        (lambda i, b, e, m=None: torch_align(i, b, e, m))
                    return fused_moe(hidden, w13, w2, tw, ids, global_num_experts=gex, expert_map=emap)
                return f

            r = cuda_align(ids, bm, gex, emap)
            route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
            fns = {"fused_cuda": fused("fused_cuda"), "fused_torch": fused("fused_torch"),
                   "experts": lambda: moe_experts(hidden, w13, w2, route, tw, ids, block_m=bm, expert_map=emap,
                                                  out=outs["experts"])}
            split_bm = {"tp8": 32, "ep8": 64}[parallel]
            if SPLIT and bm in (40, 24) and split_bm != bm:
                act = torch.empty(tokens * TOP_K, scn.intermediate, dtype=torch.bfloat16, device=dev)
                tok_e = ids.numel() / gex

                def split():
                    run_gemm(hidden, w13, route, block_m=bm, top_k=TOP_K, activation="silu", zero_nonlocal=False,
                             out=act, tok_e=tok_e)
                    r2 = cuda_align(ids, split_bm, gex, emap)
                    gemm_topk_sum(act, w2, r2.sorted_token_ids, r2.expert_ids, r2.num_tokens_post_padded, tw, ids,
                                  block_m=split_bm, expert_map=emap, out=outs["split"])
                fns["split"] = split
            for k, f in fns.items():
                out = f()
                if k.startswith("fused"):
                    outs[k].copy_(out)
            torch.cuda.synchronize()
            same = {k: torch.equal(outs["experts"], outs[k]) for k in fns}
            us = {k: t.median_us() for k, t in interleaved(fns, rounds=9).items()}
            eager = {k: eager_us(fns[k], 20) for k in ("fused_cuda", "fused_torch", "experts")}
            if tokens == token_list[0]:  # where an eager layer's host time goes
                import cProfile
                import io
                import pstats
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(20):
                    fused_moe(hidden, w13, w2, tw, ids, global_num_experts=gex, expert_map=emap)
                prof.disable()
                torch.cuda.synchronize()
                text = io.StringIO()
                pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
                open(f"{OUT}/profile_{parallel}_{tokens}.txt", "w").write(text.getvalue())
                print("\n".join(text.getvalue().splitlines()[:40]), flush=True)
            api.align_block_size = cuda_align
            res["fused_moe"].append({"parallel": parallel, "tokens": tokens, "block_m": bm,
                                                           "graph_us": us, "eager_us": eager, "identical": same})
            print(f"{parallel}_{tokens:<5} bm {bm:>2}: graph " + "  ".join(f"{k} {v:7.1f}" for k, v in us.items())
                  + "  eager " + "  ".join(f"{k} {v:7.1f}" for k, v in eager.items()) + f"  same {same}", flush=True)
            dump()
        del w13, w2
        torch.cuda.empty_cache()
