# ruff: noqa
"""Session 68: the 48- and 56-token gate_up items on three stages (planned) against two stages, with and without
the prefetch of the next stage's rows (WgmmaConfig.prefetch_rows), the same bits. Gate_up with SiLU-and-mul and the output in routing order, as the layer
runs it; outputs NaN-poisoned, the local real rows compared bit for bit. Interleaved, three timings.
argv: precompile [threads] | time [shape,...]"""
import dataclasses, json, os, sys, types

import torch
from chord_kernels import indexed
from chord_kernels.indexed.api import launch_plan
from chord_kernels.indexed.heuristics import choose_block_m
from chord_kernels.indexed.planner import cached_plan, config_for_rows
from chord_kernels.indexed.wgmma import ARCH

SMS, TOP_K, K1 = 132, 8, 7168
# name: (local experts, global experts, N, tokens, profile)
SHAPES = {**{f"tp{t}": (384, 384, 512, t, "h200_tp8") for t in (1536, 2048)},
          **{f"ep{r}": (48, 384, 4096, r * 48, "h200_ep8") for r in (32, 43)}}


def variants(n, bm, cap, tok_e):
    plan = cached_plan(n, K1, bm, cap, SMS, ARCH, config_for_rows(n, K1, bm, ARCH, tok_e)).config
    assert plan.stages == 3 and not plan.prefetch_rows, plan
    return {"no_prefetch": plan, "two": dataclasses.replace(plan, stages=2),
            "two_pf": dataclasses.replace(plan, stages=2, prefetch_rows=True)}


def shape_facts(name):
    e, eg, n, tokens, profile = SHAPES[name]
    w = types.SimpleNamespace(n=n, k=K1, num_experts=e, profile=profile, small_scales=True)
    bm = choose_block_m(w, tokens * TOP_K * e // eg)
    return e, eg, n, tokens, profile, w, bm, tokens * TOP_K * e / eg / e


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for name in SHAPES:
        e, eg, n, tokens, profile, w, bm, tok_e = shape_facts(name)
        slots = tokens * TOP_K * e // eg
        for cap in range(slots // bm, slots // bm + e + 2):
            for c in variants(n, bm, cap, tok_e).values():
                kk = launch_plan(w, bm, cap, SMS, ARCH, config=c, activation="silu").config.kernel()
                ks[kk.source] = kk
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda kk: kk.compile(ARCH), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import run_gemm
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
res = []
for name in (sys.argv[2].split(",") if len(sys.argv) > 2 else SHAPES):
    e, eg, n, tokens, profile, _, bm, tok_e = shape_facts(name)
    g = torch.Generator(device=dev).manual_seed(682)
    w13 = chord_kernels.pack("indexed", *random_quantized(e, n, K1, generator=g, device=dev), profile=profile)
    ids = torch.rand(tokens, eg, generator=g, device=dev).topk(TOP_K, dim=1).indices.to(torch.int32).contiguous()
    emap = None
    if e < eg:
        emap = torch.full((eg,), -1, dtype=torch.int32, device=dev)
        emap[:e] = torch.arange(e, dtype=torch.int32, device=dev)
    a1 = (torch.randn(tokens, K1, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    r = align_block_size(ids, bm, eg, emap)
    cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    real = (r.sorted_token_ids.long()[:cap * bm] < tokens * TOP_K) & (r.expert_ids[:cap].repeat_interleave(bm) >= 0)
    ws = indexed.new_workspace(indexed.max_workspace_bytes(w13, device=dev) * 4, dev)
    fns, outs = {}, {}
    vs = variants(n, bm, cap, tok_e)
    for tag, c in vs.items():
        outs[tag] = torch.full((cap * bm, n // 2), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[tag] = lambda o=outs[tag], c=c: run_gemm(a1, w13, route, block_m=bm, top_k=TOP_K, out=o, config=c,
                                                     workspace=ws, activation="silu", out_position=True,
                                                     zero_nonlocal=False)
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    finite = all(bool(torch.isfinite(o[real]).all()) for o in outs.values())
    same = all(torch.equal(o[real], outs["no_prefetch"][real]) for o in outs.values())
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"shape": name, "block_m": bm, "tok_e": tok_e, "plan_finite": finite, "same": same, "us": runs,
                "config": str(vs["no_prefetch"])})
    print(f"{name:7s} bm {bm:3d} no_prefetch " + " ".join(f"{x['no_prefetch']:7.1f}" for x in runs)
          + "".join(f" | {t} " + " ".join(f"{x[t] / x['no_prefetch'] - 1:+.1%}" for x in runs) for t in fns if t != "no_prefetch")
          + ("" if finite and same else f" FINITE={finite} SAME={same}"), flush=True)
    json.dump(res, open(f"{OUT}/stages_ab.json", "w"), indent=1)
    del w13, a1, ws, outs, fns
    torch.cuda.empty_cache()
