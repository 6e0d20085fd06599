# ruff: noqa
"""Session 69: the down GEMMs with the weights evict-normal and streaming output stores (WgmmaConfig.stream_out, the
plan from K <= 2048) against the same configurations without, as the layer runs them: the down alone from rows in
routing order (by slot), the down with its top-k sum (gemm_topk_sum), and the layer (gate_up planned, then that).
Outputs NaN-poisoned, compared bit for bit. Interleaved CUDA graphs, three timings.
argv: precompile [threads] | time [shape,...]"""
import dataclasses, json, os, sys, types

import torch
from chord_kernels import indexed
from chord_kernels.indexed import api
from chord_kernels.indexed.wgmma import WgmmaConfig

SMS, TOP_K, H = 132, 8, 7168
SHAPES = {**{f"ep{r}": (48, 384, 2048, r * 48, "h200_ep8") for r in (16, 43, 128, 341)},
          **{f"tp{t}": (384, 384, 256, t, "h200_tp8") for t in (4096, 8192)}}


def facts(name):
    e, eg, inter, tokens, profile = SHAPES[name]
    w13 = types.SimpleNamespace(n=2 * inter, k=H, num_experts=e, profile=profile, small_scales=True)
    w2 = types.SimpleNamespace(n=H, k=inter, num_experts=e, profile=profile, small_scales=True)
    slots = tokens * TOP_K * e // eg
    return e, eg, inter, tokens, profile, w13, w2, slots, indexed.layer_block_m(w13, w2, slots), tokens * TOP_K / eg


def down_variants(w2, bm, cap, tok_e, in_order):
    plan = api.launch_plan(w2, bm, cap, SMS, "sm_90a", tok_e=tok_e, block_rows=in_order).config
    if not isinstance(plan, WgmmaConfig):
        return {"plan": plan}
    return {"plan": plan, "no_stream": dataclasses.replace(plan, stream_out=not plan.stream_out)}


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for name in SHAPES:
        e, eg, inter, tokens, profile, w13, w2, slots, bm, tok_e = facts(name)
        for cap in range(slots // bm, slots // bm + e + 2):
            in_order = api.both_on_wgmma(w13, w2, bm, cap, SMS, "sm_90a", tok_e)
            k = api.launch_plan(w13, bm, cap, SMS, "sm_90a", tok_e=tok_e, activation="silu").config.kernel()
            ks[(k.source, k.flags)] = k
            for c in down_variants(w2, bm, cap, tok_e, in_order).values():
                for order in {in_order, True}:
                    k = api.launch_plan(w2, bm, cap, SMS, "sm_90a", config=c, block_rows=order).config.kernel()
                    ks[(k.source, k.flags)] = k
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
res = []
for name in (sys.argv[2].split(",") if len(sys.argv) > 2 else SHAPES):
    e, eg, inter, tokens, profile, _, _, slots, bm, tok_e = facts(name)
    g = torch.Generator(device=dev).manual_seed(690)
    w13 = chord_kernels.pack("indexed", *random_quantized(e, 2 * inter, H, generator=g, device=dev), profile=profile)
    w2 = chord_kernels.pack("indexed", *random_quantized(e, H, inter, generator=g, device=dev), profile=profile)
    ids = torch.rand(tokens, eg, generator=g, device=dev).topk(TOP_K, dim=1).indices.to(torch.int32).contiguous()
    tw = torch.rand(tokens, TOP_K, generator=g, device=dev)
    hidden = (torch.randn(tokens, H, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    emap = None
    if e < eg:
        emap = torch.full((eg,), -1, dtype=torch.int32, device=dev)
        emap[:e] = torch.arange(e, dtype=torch.int32, device=dev)
    r = align_block_size(ids, bm, eg, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
    in_order = api.routing_order_rows(w13, w2, route, bm, dev, tok_e) > 0
    act = api.run_gemm(hidden, w13, route, block_m=bm, top_k=TOP_K, activation="silu", zero_nonlocal=False,
                       out_position=in_order, tok_e=tok_e)
    vs = down_variants(w2, bm, cap, tok_e, in_order)
    base = vs["plan"]
    fns, outs = {}, {}
    slot_rows = torch.empty(tokens * TOP_K, H, dtype=torch.bfloat16, device=dev)
    for t, c in vs.items():
        o = outs[f"down_{t}"] = torch.full((tokens * TOP_K, H), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[f"down_{t}"] = lambda o=o, c=c: api.run_gemm(act, w2, route, block_m=bm, top_k=1, topk_weights=tw.view(-1), out=o,
                                                         config=c, block_rows=in_order, zero_nonlocal=False,
                                                         num_slots=tokens * TOP_K if in_order else None)
        o = outs[f"sum_{t}"] = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[f"sum_{t}"] = lambda o=o, c=c: indexed.gemm_topk_sum(act, w2, *route, tw, ids, block_m=bm, expert_map=emap,
                                                                 out=o, slot_rows=slot_rows, config=c, routing_order=in_order)
        o = outs[f"layer_{t}"] = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)
        def layer(o=o, c=c):
            a = api.run_gemm(hidden, w13, route, block_m=bm, top_k=TOP_K, activation="silu", zero_nonlocal=False,
                             out_position=in_order, tok_e=tok_e, out=act)
            indexed.gemm_topk_sum(a, w2, *route, tw, ids, block_m=bm, expert_map=emap, out=o, slot_rows=slot_rows,
                                  config=c, routing_order=in_order)
        fns[f"layer_{t}"] = layer
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    entries = r.sorted_token_ids.long()[:cap * bm]
    real_pos = (entries < tokens * TOP_K) & (r.expert_ids[:cap].repeat_interleave(bm) >= 0)
    real = torch.zeros(tokens * TOP_K, dtype=torch.bool, device=dev)
    real[entries[real_pos]] = True
    same = {}
    if "no_stream" in vs:
        same = {w: bool(torch.isfinite(outs[f"{w}_plan"][real if w == "down" else slice(None)]).all())
                   and torch.equal(outs[f"{w}_plan"][real if w == "down" else slice(None)],
                                   outs[f"{w}_no_stream"][real if w == "down" else slice(None)]) for w in ("down", "sum", "layer")}
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "5")))
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"shape": name, "block_m": bm, "tok_e": tok_e, "routing_order": in_order, "same": same, "us": runs,
                "config": str(base)})
    if "no_stream" in vs:
        print(f"{name:7s} bm {bm:3d} stream {int(getattr(base, 'stream_out', False))} | " + " | ".join(
            f"{w} no_stream " + " ".join(f"{x[w + '_no_stream']:7.1f}" for x in runs) + " plan "
            + " ".join(f"{x[w + '_plan'] / x[w + '_no_stream'] - 1:+.1%}" for x in runs) for w in ("down", "sum", "layer"))
            + ("" if all(same.values()) else f" SAME={same}"), flush=True)
    else:
        print(f"{name:7s} bm {bm:3d} decode kernel: no WGMMA down", flush=True)
    json.dump(res, open(f"{OUT}/stream_ab.json", "w"), indent=1)
    del w13, w2, hidden, outs, fns, act, slot_rows
    torch.cuda.empty_cache()
