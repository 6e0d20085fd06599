# ruff: noqa
"""Session 80: the planned WGMMA kernels with each K group's packed weight words read from shared memory before the
previous group's wait (-DCHORD_EXP_PRELOAD) against the plan, as the layer runs them (gate_up with SiLU in routing
order, the down from it). Outputs NaN-poisoned and compared bit for bit; interleaved, three timings.
argv: precompile [threads] | time [shape,...]"""
import dataclasses, functools, json, os, sys, types

import torch
from chord_kernels import indexed
from chord_kernels.indexed import api, wgmma
from chord_kernels.jit.kernel import CudaKernel

SMS, TOP_K, H = 132, 8, 7168
SHAPES = {**{f"ep{r}": (48, 384, 2048, r * 48, "h200_ep8") for r in (16, 43, 128, 341)},
          **{f"tp{t}": (384, 384, 256, t, "h200_tp8") for t in (1024, 8192)}}
MODES = {"plan": (), "pre": ("-DCHORD_EXP_PRELOAD",)}
MODE = {"v": "plan"}
_orig = wgmma.wgmma_kernel


@functools.cache
def _variant(config, mode):
    k = _orig(config)
    return k if not MODES[mode] else CudaKernel(name=k.name, source=k.source, entry=k.entry, arch=k.arch,
                                                flags=k.flags + MODES[mode])


wgmma.wgmma_kernel = lambda config: _variant(config, MODE["v"])


def facts(name):
    e, eg, inter, tokens, profile = SHAPES[name]
    w13 = types.SimpleNamespace(n=2 * inter, k=H, num_experts=e, profile=profile, small_scales=True)
    w2 = types.SimpleNamespace(n=H, k=inter, num_experts=e, profile=profile, small_scales=True)
    slots = tokens * TOP_K * e // eg
    return e, eg, inter, tokens, profile, w13, w2, slots, indexed.layer_block_m(w13, w2, slots), tokens * TOP_K / eg


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for name in SHAPES:
        e, eg, inter, tokens, profile, w13, w2, slots, bm, tok_e = facts(name)
        for cap in range(slots // bm, slots // bm + e + 2):
            in_order = api.both_on_wgmma(w13, w2, bm, cap, SMS, "sm_90a", tok_e)
            for mode in MODES:
                MODE["v"] = mode
                for k in (api.launch_plan(w13, bm, cap, SMS, "sm_90a", tok_e=tok_e, activation="silu").config.kernel(),
                          api.launch_plan(w2, bm, cap, SMS, "sm_90a", tok_e=tok_e, block_rows=in_order).config.kernel()):
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
res = []
for name in (sys.argv[2].split(",") if len(sys.argv) > 2 else SHAPES):
    e, eg, inter, tokens, profile, _, _, slots, bm, tok_e = facts(name)
    g = torch.Generator(device=dev).manual_seed(720)
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
    in_order = api.routing_order_rows(w13, w2, route, bm, dev, tok_e) > 0
    MODE["v"] = "plan"
    act = api.run_gemm(hidden, w13, route, block_m=bm, top_k=TOP_K, activation="silu", zero_nonlocal=False,
                       out_position=in_order, tok_e=tok_e)
    down_out = torch.empty(tokens * TOP_K, H, dtype=torch.bfloat16, device=dev)
    fns = {}
    for mode in MODES:
        def up(mode=mode):
            MODE["v"] = mode
            api.run_gemm(hidden, w13, route, block_m=bm, top_k=TOP_K, activation="silu", zero_nonlocal=False,
                         out_position=in_order, tok_e=tok_e, out=act)
        def down(mode=mode):
            MODE["v"] = mode
            api.run_gemm(act, w2, route, block_m=bm, top_k=1, topk_weights=tw.view(-1), out=down_out, block_rows=in_order,
                         zero_nonlocal=False, num_slots=tokens * TOP_K if in_order else None, tok_e=tok_e)
        fns[f"up_{mode}"], fns[f"down_{mode}"] = up, down
    same = {}
    for w in ("up", "down"):
        outs = []
        for mode in MODES:
            buf = act if w == "up" else down_out
            buf.fill_(float("nan"))
            if w == "down":
                fns["up_plan"]()
            fns[f"{w}_{mode}"]()
            torch.cuda.synchronize()
            outs.append(buf.clone())
        same[w] = bool(torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)))
    fns["up_plan"]()
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "5")))
        runs.append({t: tm[t].median_us() for t in fns})
    MODE["v"] = "plan"
    cfgs = {w: str(api.launch_plan(p, bm, indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm), SMS, "sm_90a",
                                   tok_e=tok_e, activation="silu" if w == "up" else None,
                                   block_rows=in_order and w == "down").config) for w, p in (("up", w13), ("down", w2))}
    res.append({"shape": name, "block_m": bm, "tok_e": tok_e, "routing_order": in_order, "configs": cfgs, "us": runs,
                "same_bits": same})
    for w in ("up", "down"):
        print(f"{name:7s} bm {bm:3d} {w:4s} same={same[w]} plan " + " ".join(f"{x[w + '_plan']:7.1f}" for x in runs) + " | " + " | ".join(
            f"{m} " + " ".join(f"{x[f'{w}_{m}'] / x[w + '_plan'] - 1:+.1%}" for x in runs) for m in MODES if m != "plan"),
            flush=True)
    json.dump(res, open(f"{OUT}/pre_ab.json", "w"), indent=1)
    del w13, w2, hidden, act, down_out, fns
    torch.cuda.empty_cache()
