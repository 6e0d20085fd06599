# ruff: noqa
"""Session 73: TP8's down in runs of N tiles (K = 256) — the planned strided order against the dynamic one (items
from the global counter), and run lengths, on the current kernel (four consumer warpgroups of one tile, streamed
output, rows in routing order). Why: ncu (session 69) had TP8 8192's down reading its weights from DRAM about twice;
the two routing blocks of an expert read the same weights in the same run, on CTAs c and c + runs-per-block, which
the strided order lets drift apart over ~20 rounds. The down alone and the layer (gate_up planned, then the down with
its top-k sum). NaN-poisoned outputs, every variant compared bit for bit with the plan. Interleaved CUDA graphs,
three timings. argv: precompile [threads] | time [tokens,...] | ncu tokens"""
import dataclasses, json, os, sys, types

import torch
from chord_kernels import indexed
from chord_kernels.indexed import api

SMS, TOP_K, H, E, INTER = 132, 8, 7168, 384, 256
TOKENS = tuple(int(t) for t in os.environ.get("TOKENS", "8192,4096,12288,3072").split(","))
VARIANTS = {"dyn": dict(dynamic=True), "dyn4": dict(dynamic=True, n_run=4), "dyn14": dict(dynamic=True, n_run=14),
            "str4": dict(n_run=4)} if os.environ.get("SET") != "c" else {
            "str7": dict(dynamic=False, n_run=7), "dyn7": dict(dynamic=True, n_run=7), "str4": dict(dynamic=False, n_run=4)}


def facts(tokens):
    w13 = types.SimpleNamespace(n=2 * INTER, k=H, num_experts=E, profile="h200_tp8", small_scales=True)
    w2 = types.SimpleNamespace(n=H, k=INTER, num_experts=E, profile="h200_tp8", small_scales=True)
    slots = tokens * TOP_K
    return w13, w2, slots, indexed.layer_block_m(w13, w2, slots), slots / E


def variants(plan_cfg):
    return {t: dataclasses.replace(plan_cfg, **kw) for t, kw in VARIANTS.items()}


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for tokens in TOKENS:
        w13, w2, slots, bm, tok_e = facts(tokens)
        for cap in range(slots // bm, slots // bm + E + 2):
            k = api.launch_plan(w13, bm, cap, SMS, "sm_90a", tok_e=tok_e, activation="silu").config.kernel()
            ks[(k.source, k.flags)] = k
            in_order = api.both_on_wgmma(w13, w2, bm, cap, SMS, "sm_90a", tok_e)
            plan = api.launch_plan(w2, bm, cap, SMS, "sm_90a", tok_e=tok_e, block_rows=in_order).config
            for c in [plan, *(variants(plan).values() if getattr(plan, "n_run", 0) else ())]:
                k = api.launch_plan(w2, bm, cap, SMS, "sm_90a", config=c, block_rows=in_order).config.kernel()
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
g = torch.Generator(device=dev).manual_seed(730)
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
    order = api.routing_order_rows(W13, W2, route, bm, dev, tok_e) > 0
    plan_cfg = api.launch_plan(W2, bm, cap, SMS, "sm_90a", tok_e=tok_e, block_rows=order).config
    if not (plan_cfg.n_run and order):
        print(tokens, "no runs in routing order:", plan_cfg, order, flush=True)
        continue
    vs = {"plan": plan_cfg, **variants(plan_cfg)}
    act = api.run_gemm(hidden, W13, route, block_m=bm, top_k=TOP_K, activation="silu", zero_nonlocal=False,
                       out_position=order, tok_e=tok_e)
    slot_rows = torch.empty(slots, H, dtype=torch.bfloat16, device=dev)
    fns, outs = {}, {}
    for t, c in vs.items():
        d = outs[f"down_{t}"] = torch.full((slots, H), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[f"down_{t}"] = lambda d=d, c=c: api.run_gemm(
            act, W2, route, block_m=bm, top_k=1, topk_weights=tw.view(-1), out=d, config=c, block_rows=order,
            zero_nonlocal=False, num_slots=slots, tok_e=tok_e)
        y = outs[f"layer_{t}"] = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)
        def layer(y=y, c=c):
            a = api.run_gemm(hidden, W13, route, block_m=bm, top_k=TOP_K, activation="silu", zero_nonlocal=False,
                             out_position=order, tok_e=tok_e, out=act)
            indexed.gemm_topk_sum(a, W2, *route, tw, ids, block_m=bm, out=y, slot_rows=slot_rows, config=c,
                                  routing_order=order)
        fns[f"layer_{t}"] = layer
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    if sys.argv[1] == "ncu":  # one down of each variant for ncu, then stop
        torch.cuda.cudart().cudaProfilerStart()
        for t in vs:
            fns[f"down_{t}"]()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        print("profiled", list(vs), flush=True)
        break
    entries = r.sorted_token_ids.long()[:cap * bm]
    real = torch.zeros(slots, dtype=torch.bool, device=dev)
    real[entries[entries < slots]] = True
    finite = all(bool(torch.isfinite(v[real] if k.startswith("down") else v).all()) for k, v in outs.items())
    same = {w: all(torch.equal(outs[f"{w}_plan"][real] if w == "down" else outs[f"{w}_plan"],
                               outs[f"{w}_{t}"][real] if w == "down" else outs[f"{w}_{t}"]) for t in VARIANTS)
            for w in ("down", "layer")}
    runs = []
    for rep in range(3):
        o = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in o}, rounds=int(os.environ.get("ROUNDS", "5")))
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"tokens": tokens, "block_m": bm, "tok_e": tok_e, "plan": str(plan_cfg),
                "variants": {t: str(c) for t, c in vs.items()}, "finite": finite, "same": same, "us": runs})
    for w in ("down", "layer"):
        print(f"{tokens:5d} bm {bm:2d} items {plan_cfg.items} {w:5s} plan " + " ".join(f"{x[w + '_plan']:6.1f}" for x in runs)
              + " | " + " | ".join(f"{t} " + " ".join(f"{x[f'{w}_{t}'] / x[w + '_plan'] - 1:+.1%}" for x in runs)
                                   for t in VARIANTS) + f" | same {same[w]} finite {finite}", flush=True)
    json.dump(res, open(f"{OUT}/dyn_ab.json", "w"), indent=1)
    del outs, fns, act, slot_rows, hidden
    torch.cuda.empty_cache()
