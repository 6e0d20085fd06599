# ruff: noqa
"""Session 69: EP8's layer (indexed.moe_experts, the planned block, rows in routing order) and its down with the
top-k sum alone (gemm_topk_sum), with the single-slot twin (WgmmaConfig.topk_singles: rows of tokens with one local
slot stored to the output by the GEMM, the sum skipping them) against the plain two steps (the planner's choice with
_TopkSum.singles patched off). Interleaved CUDA graphs, three timings, outputs compared bit for bit.
argv: precompile [threads] | time [rows_per_expert,...]"""
import json, math, os, sys, types

import torch
import chord_kernels
from chord_kernels import indexed
from chord_kernels.indexed import api
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size

E, G, TOP_K, H, I = 48, 384, 8, 7168, 2048
ROWS = (16, 32, 43, 64, 100, 128, 200, 341)

if sys.argv[1] == "precompile":  # the layer kernels of both variants, one-fma forms (random_quantized's scales)
    from concurrent.futures import ThreadPoolExecutor
    w13 = types.SimpleNamespace(n=2 * I, k=H, num_experts=E, profile="h200_ep8", small_scales=True)
    w2 = types.SimpleNamespace(n=H, k=I, num_experts=E, profile="h200_ep8", small_scales=True)
    ks = {}
    for rows in ROWS:
        slots = rows * E
        bm = indexed.layer_block_m(w13, w2, slots)
        for cap in range(slots // bm, slots // bm + E + 2):
            in_order = api.both_on_wgmma(w13, w2, bm, cap, 132, "sm_90a", rows)
            ks[api.launch_plan(w13, bm, cap, 132, "sm_90a", tok_e=rows, activation="silu").config.kernel().source] = \
                api.launch_plan(w13, bm, cap, 132, "sm_90a", tok_e=rows, activation="silu").config.kernel()
            for singles in (False, True):
                k = api.launch_plan(w2, bm, cap, 132, "sm_90a", tok_e=rows, block_rows=in_order, topk_singles=singles).config.kernel()
                ks[k.source] = k
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ORIG = api._TopkSum.singles
OFF = property(lambda self: False)


def variant(fn, on):
    def f():
        api._TopkSum.singles = ORIG if on else OFF
        try:
            return fn()
        finally:
            api._TopkSum.singles = ORIG
    return f


res = []
for rows in (map(int, sys.argv[2].split(",")) if len(sys.argv) > 2 else ROWS):
    tokens = rows * G // TOP_K
    g = torch.Generator(device=dev).manual_seed(6900 + rows)
    w13 = chord_kernels.pack("indexed", *random_quantized(E, 2 * I, H, generator=g, device=dev), profile="h200_ep8")
    w2 = chord_kernels.pack("indexed", *random_quantized(E, H, I, generator=g, device=dev), profile="h200_ep8")
    ids = torch.rand(tokens, G, generator=g, device=dev).topk(TOP_K, dim=1).indices.to(torch.int32).contiguous()
    tw = torch.rand(tokens, TOP_K, generator=g, device=dev)
    hidden = (torch.randn(tokens, H, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    emap = torch.full((G,), -1, dtype=torch.int32, device=dev)
    emap[:E] = torch.arange(E, dtype=torch.int32, device=dev)
    bm = indexed.layer_block_m(w13, w2, tokens * TOP_K * E // G)
    r = align_block_size(ids, bm, G, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    tok_e = tokens * TOP_K / G
    in_order = api.routing_order_rows(w13, w2, route, bm, dev, tok_e) > 0
    act = api.run_gemm(hidden, w13, route, block_m=bm, top_k=TOP_K, activation="silu", zero_nonlocal=False,
                       out_position=in_order, tok_e=tok_e)
    cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
    down_cfg = api.launch_plan(w2, bm, cap, 132, "sm_90a", tok_e=tok_e, block_rows=in_order, topk_singles=True).config
    outs, fns = {}, {}
    slot_rows = torch.empty(tokens * TOP_K, H, dtype=torch.bfloat16, device=dev)
    for on in (False, True):
        tag = "singles" if on else "plain"
        for what in ("layer", "down"):
            o = outs[f"{what}_{tag}"] = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)
            if what == "layer":
                run = lambda o=o: indexed.moe_experts(hidden, w13, w2, route, tw, ids, block_m=bm, expert_map=emap, out=o)
            else:
                run = lambda o=o: indexed.gemm_topk_sum(act, w2, *route, tw, ids, block_m=bm, expert_map=emap, out=o,
                                                        slot_rows=slot_rows, routing_order=in_order)
            fns[f"{what}_{tag}"] = variant(run, on)
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = {w: bool(torch.isfinite(outs[f"{w}_singles"]).all()) and torch.equal(outs[f"{w}_singles"], outs[f"{w}_plain"])
            for w in ("layer", "down")}
    local = (emap[ids.long()] >= 0).sum(dim=1)
    share = {str(c): float((local == c).float().mean()) for c in range(4)}
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"rows_per_expert": rows, "tokens": tokens, "block_m": bm, "routing_order": in_order,
                "down_config": str(down_cfg), "singles_planned": bool(getattr(down_cfg, "topk_singles", False)),
                "local_slots_share": share, "same": same, "us": runs})
    print(f"ep8 {rows:4d} rows/expert bm {bm:3d} singles {int(getattr(down_cfg, 'topk_singles', False))} | "
          + " | ".join(f"{w} plain " + " ".join(f"{x[w + '_plain']:7.1f}" for x in runs) + " singles "
                       + " ".join(f"{x[w + '_singles'] / x[w + '_plain'] - 1:+.1%}" for x in runs) for w in ("layer", "down"))
          + ("" if all(same.values()) else f" SAME={same}"), flush=True)
    json.dump(res, open(f"{OUT}/singles_ab.json", "w"), indent=1)
    del w13, w2, hidden, outs, fns, act, slot_rows
    torch.cuda.empty_cache()
