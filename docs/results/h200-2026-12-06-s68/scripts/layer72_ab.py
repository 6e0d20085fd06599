# ruff: noqa
"""Session 68: the layer (indexed.moe_experts: gate_up with SiLU in routing order, down with the top-k sum) at
51-58 rows per expert (72-token routing blocks) with the 72-token gate_up items prefetching their next stage's rows
(PREFETCH_ROWS_MIN_TOKENS = 72, planned now) against without (80, before). EP8 (48 of 384 experts) and TP8 (384
experts of I / 8). Each callable plans at capture time under its threshold (the planner's caches cleared first).
Interleaved CUDA graphs, three timings, bit for bit. argv: time [tp8|ep8:tok_e,...]"""
import functools, json, os, sys, types

import torch
import chord_kernels
from chord_kernels import indexed
from chord_kernels.indexed import api, heuristics, planner, wgmma
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved


def clear_plans():
    for mod in (api, heuristics, planner, wgmma):
        for v in vars(mod).values():
            if callable(getattr(v, "cache_clear", None)):
                v.cache_clear()


dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
G, TOP_K, H = 384, 8, 7168
res = []
cases = sys.argv[2].split(",") if len(sys.argv) > 2 else ["ep8:52", "ep8:56", "tp8:52", "tp8:56"]
for case in cases:
    prof, tok_e = case.split(":")
    tok_e = int(tok_e)
    tp8 = prof == "tp8"
    E, I = (384, 256) if tp8 else (48, 2048)
    tokens = tok_e * E * G // (TOP_K * E) if not tp8 else tok_e * G // TOP_K
    g = torch.Generator(device=dev).manual_seed(680 + tok_e + tp8)
    profile = "h200_tp8" if tp8 else "h200_ep8"
    w13 = chord_kernels.pack("indexed", *random_quantized(E, 2 * I, H, generator=g, device=dev), profile=profile)
    w2 = chord_kernels.pack("indexed", *random_quantized(E, H, I, generator=g, device=dev), profile=profile)
    ids = torch.rand(tokens, G, generator=g, device=dev).topk(TOP_K, dim=1).indices.to(torch.int32).contiguous()
    tw = torch.rand(tokens, TOP_K, generator=g, device=dev)
    emap = None
    if not tp8:
        emap = torch.full((G,), -1, dtype=torch.int32, device=dev)
        emap[:E] = torch.arange(E, dtype=torch.int32, device=dev)
    hidden = (torch.randn(tokens, H, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    bm = indexed.layer_block_m(w13, w2, tokens * TOP_K * E // G)
    r = align_block_size(ids, bm, G, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    fns, outs = {}, {}
    for tag, min_tokens in (("before", 80), ("now", 72)):
        outs[tag] = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)

        def run(tag=tag, min_tokens=min_tokens):
            wgmma.PREFETCH_ROWS_MIN_TOKENS = min_tokens
            clear_plans()
            return indexed.moe_experts(hidden, w13, w2, route, tw, ids, block_m=bm, expert_map=emap, out=outs[tag])
        fns[tag] = run
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = torch.equal(outs["now"], outs["before"]) and bool(torch.isfinite(outs["now"]).all())
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
        runs.append({t: tm[t].median_us() for t in fns})
    wgmma.PREFETCH_ROWS_MIN_TOKENS = 72
    clear_plans()
    res.append({"case": case, "tokens": tokens, "block_m": bm, "same": same, "us": runs})
    print(f"layer {case:7s} tokens {tokens:5d} bm {bm:3d} before " + " ".join(f"{x['before']:7.1f}" for x in runs)
          + " | now " + " ".join(f"{x['now'] / x['before'] - 1:+.1%}" for x in runs) + ("" if same else " DIFF"), flush=True)
    json.dump(res, open(f"{OUT}/layer72_ab.json", "w"), indent=1)
    del w13, w2, hidden, outs, fns
    torch.cuda.empty_cache()
