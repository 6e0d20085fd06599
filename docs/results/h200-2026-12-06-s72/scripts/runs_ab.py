# ruff: noqa
"""Session 71 (session 72: TOKENS from the environment): TP8's one-block 24- and 32-token downs (K = 256) — the planned decode kernel against the WGMMA
kernel's runs of N tiles on four consumer warpgroups of one tile (session 47's form, there from 40 tokens) with
session 69's streamed output, which neither existed when session 38 kept the decode kernel here. The down alone
and the layer (gate_up planned, then the down with its top-k sum). NaN-poisoned outputs; the WGMMA variants
compared bit for bit with one another, every variant's max |diff| against the plan. Interleaved CUDA graphs, three
timings. argv: precompile [threads] | time [tokens,...]"""
import dataclasses, json, os, sys, types

import torch
from chord_kernels import indexed
from chord_kernels.indexed import api, wgmma
from chord_kernels.indexed.wgmma import WgmmaConfig

SMS, TOP_K, H, E, INTER = 132, 8, 7168, 384, 256
TOKENS = tuple(int(t) for t in os.environ.get("TOKENS", "576,640,704").split(","))


def weights():
    w13 = types.SimpleNamespace(n=2 * INTER, k=H, num_experts=E, profile="h200_tp8", small_scales=True)
    w2 = types.SimpleNamespace(n=H, k=INTER, num_experts=E, profile="h200_tp8", small_scales=True)
    return w13, w2


def facts(tokens):
    w13, w2 = weights()
    slots = tokens * TOP_K
    return w13, w2, slots, indexed.layer_block_m(w13, w2, slots), slots / E


def wgmma_variants(bm, tok_e):
    """name -> (config, rows in routing order)."""
    runs2 = wgmma.choose_wgmma_config(H, INTER, bm, tok_e)
    old = wgmma.RUN_FOUR_CONSUMER_TOKENS
    wgmma.RUN_FOUR_CONSUMER_TOKENS = (min(bm, old[0]), old[1])
    wgmma._choose_wgmma_config.cache_clear()
    try:
        runs4 = wgmma.choose_wgmma_config(H, INTER, bm, tok_e)
    finally:
        wgmma.RUN_FOUR_CONSUMER_TOKENS = old
        wgmma._choose_wgmma_config.cache_clear()
    assert runs2.n_run and runs4.consumers == 4 and runs4.stream_out, (runs2, runs4)
    return {"r2": (runs2, True), "r4": (runs4, True), "r4_slot": (runs4, False),
            "r4_ns": (dataclasses.replace(runs4, stream_out=False), True)}


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for tokens in TOKENS:
        w13, w2, slots, bm, tok_e = facts(tokens)
        for cap in range(slots // bm, slots // bm + E + 2):
            for act in ("silu",):
                for order in (False, True):
                    k = api.launch_plan(w13, bm, cap, SMS, "sm_90a", tok_e=tok_e, activation=act).config.kernel()
                    ks[(k.source, k.flags)] = k
            k = api.launch_plan(w2, bm, cap, SMS, "sm_90a", tok_e=tok_e).config.kernel()
            ks[(k.source, k.flags)] = k
            for c, order in wgmma_variants(bm, tok_e).values():
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
g = torch.Generator(device=dev).manual_seed(710)
W13 = chord_kernels.pack("indexed", *random_quantized(E, 2 * INTER, H, generator=g, device=dev), profile="h200_tp8")
W2 = chord_kernels.pack("indexed", *random_quantized(E, H, INTER, generator=g, device=dev), profile="h200_tp8")
res = []
for tokens in (map(int, sys.argv[2].split(",")) if len(sys.argv) > 2 else TOKENS):
    _, _, slots, bm, tok_e = facts(tokens)
    ids = torch.rand(tokens, E, generator=g, device=dev).topk(TOP_K, dim=1).indices.to(torch.int32).contiguous()
    tw = torch.rand(tokens, TOP_K, generator=g, device=dev)
    hidden = (torch.randn(tokens, H, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    r = align_block_size(ids, bm, E, None)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
    plan_order = api.routing_order_rows(W13, W2, route, bm, dev, tok_e) > 0
    plan_cfg = api.launch_plan(W2, bm, cap, SMS, "sm_90a", tok_e=tok_e).config
    vs = {"plan": (None, plan_order), **wgmma_variants(bm, tok_e)}
    acts = {o: api.run_gemm(hidden, W13, route, block_m=bm, top_k=TOP_K, activation="silu", zero_nonlocal=False,
                            out_position=o, tok_e=tok_e) for o in (False, True)}
    slot_rows = torch.empty(slots, H, dtype=torch.bfloat16, device=dev)
    fns, outs = {}, {}
    for t, (c, o) in vs.items():
        act = acts[o]
        d = outs[f"down_{t}"] = torch.full((slots, H), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[f"down_{t}"] = lambda d=d, c=c, o=o, act=act: api.run_gemm(
            act, W2, route, block_m=bm, top_k=1, topk_weights=tw.view(-1), out=d, config=c, block_rows=o,
            zero_nonlocal=False, num_slots=slots if o else None, tok_e=tok_e)
        y = outs[f"layer_{t}"] = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)
        def layer(y=y, c=c, o=o, act=act):
            a = api.run_gemm(hidden, W13, route, block_m=bm, top_k=TOP_K, activation="silu", zero_nonlocal=False,
                             out_position=o, tok_e=tok_e, out=act)
            indexed.gemm_topk_sum(a, W2, *route, tw, ids, block_m=bm, out=y, slot_rows=slot_rows, config=c,
                                  routing_order=o)
        fns[f"layer_{t}"] = layer
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    entries = r.sorted_token_ids.long()[:cap * bm]
    real = torch.zeros(slots, dtype=torch.bool, device=dev)
    real[entries[entries < slots]] = True
    finite = {k: bool(torch.isfinite(v[real] if k.startswith("down") else v).all()) for k, v in outs.items()}
    same = {w: all(torch.equal(outs[f"{w}_r4"][real] if w == "down" else outs[f"{w}_r4"],
                               outs[f"{w}_{t}"][real] if w == "down" else outs[f"{w}_{t}"]) for t in ("r2", "r4_slot", "r4_ns"))
            for w in ("down", "layer")}
    diff = {w: float(((outs[f"{w}_r4"].float() - outs[f"{w}_plan"].float())[real if w == "down" else slice(None)]).abs().max()
                     / outs[f"{w}_plan"].float()[real if w == "down" else slice(None)].abs().max()) for w in ("down", "layer")}
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "5")))
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"tokens": tokens, "block_m": bm, "tok_e": tok_e, "plan_order": plan_order, "plan": str(plan_cfg),
                "variants": {t: [str(c), o] for t, (c, o) in vs.items()}, "finite": finite, "same": same, "rel_diff": diff,
                "us": runs})
    for w in ("down", "layer"):
        print(f"{tokens:5d} bm {bm:2d} {w:5s} plan " + " ".join(f"{x[w + '_plan']:6.1f}" for x in runs) + " | " + " | ".join(
            f"{t} " + " ".join(f"{x[f'{w}_{t}'] / x[w + '_plan'] - 1:+.1%}" for x in runs) for t in vs if t != "plan")
            + f" | same {same[w]} diff {diff[w]:.1e}" + ("" if all(finite.values()) else f" FINITE {finite}"), flush=True)
    json.dump(res, open(f"{OUT}/runs_ab.json", "w"), indent=1)
    del outs, fns, acts, slot_rows, hidden
    torch.cuda.empty_cache()
