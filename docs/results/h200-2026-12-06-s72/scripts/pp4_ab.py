# ruff: noqa
"""Session 72: TP8's down in runs of N tiles on four consumer warpgroups (the plan from 32-token blocks) against the
same configuration with the four warpgroups in turns on the tensor cores (pingpong=True: warpgroup c's K loop after
c - 1's has issued its wgmmas, so that each one's epilogue overlaps the others' wgmmas; session 47's turns were for
two warpgroups). Rows in routing order, top-k weights, streamed output, as the plan runs it. NaN-poisoned outputs,
compared bit for bit. Interleaved CUDA graphs, three timings. argv: precompile [threads] | time [tokens,...]"""
import dataclasses, json, os, sys, types

import torch
from chord_kernels import indexed
from chord_kernels.indexed import api

SMS, TOP_K, H, E, INTER = 132, 8, 7168, 384, 256
TOKENS = tuple(int(t) for t in os.environ.get("TOKENS", "1024,2048,4096,8192,12288").split(","))


def facts(tokens):
    w13 = types.SimpleNamespace(n=2 * INTER, k=H, num_experts=E, profile="h200_tp8", small_scales=True)
    w2 = types.SimpleNamespace(n=H, k=INTER, num_experts=E, profile="h200_tp8", small_scales=True)
    slots = tokens * TOP_K
    return w13, w2, slots, indexed.layer_block_m(w13, w2, slots), slots / E


def variants(bm, tok_e):
    plan = api.launch_plan(facts(1)[1], bm, 1, SMS, "sm_90a", tok_e=tok_e).config
    assert plan.n_run and plan.consumers == 4 and not plan.pingpong, plan
    return {"plan": plan, "pp4": dataclasses.replace(plan, pingpong=True)}


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for tokens in TOKENS:
        w13, w2, slots, bm, tok_e = facts(tokens)
        for cap in range(slots // bm, slots // bm + E + 2):
            k = api.launch_plan(w13, bm, cap, SMS, "sm_90a", tok_e=tok_e, activation="silu").config.kernel()
            ks[(k.source, k.flags)] = k
            for c in variants(bm, tok_e).values():
                k = api.launch_plan(w2, bm, cap, SMS, "sm_90a", config=c, block_rows=True).config.kernel()
                ks[(k.source, k.flags)] = k
    print(len(ks), "kernels", flush=True)
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
    sys.exit(0)

import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
g = torch.Generator(device=dev).manual_seed(720)
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
    assert api.routing_order_rows(W13, W2, route, bm, dev, tok_e) > 0
    act = api.run_gemm(hidden, W13, route, block_m=bm, top_k=TOP_K, activation="silu", zero_nonlocal=False,
                       out_position=True, tok_e=tok_e)
    vs = variants(bm, tok_e)
    fns, outs = {}, {}
    for t, c in vs.items():
        d = outs[t] = torch.full((slots, H), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[t] = lambda d=d, c=c: api.run_gemm(act, W2, route, block_m=bm, top_k=1, topk_weights=tw.view(-1), out=d,
                                               config=c, block_rows=True, zero_nonlocal=False, num_slots=slots,
                                               tok_e=tok_e)
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    entries = r.sorted_token_ids.long()[:cap * bm]
    real = torch.zeros(slots, dtype=torch.bool, device=dev)
    real[entries[entries < slots]] = True
    finite = all(bool(torch.isfinite(v[real]).all()) for v in outs.values())
    same = torch.equal(outs["plan"][real], outs["pp4"][real])
    for f in fns.values():  # repeated runs: the same bits
        f()
    torch.cuda.synchronize()
    again = torch.equal(outs["plan"][real], outs["pp4"][real])
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "5")))
        runs.append({t: tm[t].median_us() for t in fns})
    launched = {t: str(api.launch_plan(W2, bm, cap, SMS, "sm_90a", config=c, block_rows=True).config) for t, c in vs.items()}
    res.append({"tokens": tokens, "block_m": bm, "tok_e": tok_e, "configs": launched, "finite": finite, "same": same,
                "same_again": again, "us": runs})
    print(f"{tokens:5d} bm {bm:2d} down plan " + " ".join(f"{x['plan']:7.1f}" for x in runs) + " | pp4 " +
          " ".join(f"{x['pp4'] / x['plan'] - 1:+.1%}" for x in runs) + f" | same {same} {again} finite {finite}", flush=True)
    json.dump(res, open(f"{OUT}/pp4_ab.json", "w"), indent=1)
    del outs, fns, act, hidden
    torch.cuda.empty_cache()
