# ruff: noqa
"""Session 23: the dynamic (K >= 2048) GEMMs of the one-block (96, 104) and 64 x 2 items on 128-K
stages (as many as fit) against their default 256-K stages (two). Each GEMM as moe_experts runs
it (gate_up with SiLU fused, routing-order output; EP8's down with the top-k sum), both configs
on one routing, interleaved CUDA graphs, outputs NaN-poisoned and compared bit for bit.
argv[1] == precompile: compile only."""
import dataclasses, json, os, sys
import torch
import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import choose_block_m, gemm_topk_sum
from chord_kernels.indexed.api import _silu_mul_twin, routing_order_rows, run_gemm
from chord_kernels.indexed.planner import config_for_rows, configs_for
from chord_kernels.indexed.wgmma import max_stages
from chord_kernels.routing import align_block_size

H, E, TOPK = 7168, 384, 8
SHAPES = {"tp8": (E, 256), "ep8": (48, 2048)}
CASES = [(m, int(t)) for m, t in (x.split(":") for x in os.environ.get(
    "CASES", "tp8:4096,tp8:8192,tp8:9216,tp8:12288,tp8:16384,ep8:4096,ep8:8208,ep8:16368").split(","))]


def variants(n, k, bm, tok_e):
    base = config_for_rows(n, k, bm, "sm_90a", tok_e) or configs_for(n, k, bm, "sm_90a")[0]
    alt = dataclasses.replace(base, bk=128, stages=max_stages(bm, base.mt, 128, items=base.items))
    return {"bk256": base, "bk128": alt}


def bm_of(mode, tokens):
    e, i = SHAPES[mode]
    w0 = chord_kernels.pack("indexed", *random_quantized(e, 2 * i, 64), profile=f"h200_{mode}")
    return choose_block_m(w0, tokens * TOPK * e // E)


if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for mode, tokens in CASES:
        e, i = SHAPES[mode]
        bm, tok_e = bm_of(mode, tokens), tokens * TOPK / E
        for n, k in ((2 * i, H), (H, i)):
            if k < 2048:
                continue
            for c in variants(n, k, bm, tok_e).values():
                for x in (c, _silu_mul_twin(c, n)):
                    if x is not None:
                        ks[x.kernel().source] = x.kernel()
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels compiled", flush=True)
    sys.exit(0)

from chord_bench.timing import interleaved
dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
g = torch.Generator(device=dev).manual_seed(23)
W = {}
for mode, (e, i) in SHAPES.items():
    W[mode] = tuple(chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile=f"h200_{mode}")
                    for n, k in ((2 * i, H), (H, i)))
res = []
for mode, tokens in CASES:
    w13, w2 = W[mode]
    e, i = SHAPES[mode]
    gen = torch.Generator(device=dev).manual_seed(tokens)
    hidden = (torch.randn(tokens, H, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    probs = torch.softmax(torch.randn(tokens, E, device=dev, generator=gen), dim=-1)
    tw, ids = probs.topk(TOPK, dim=-1)
    tw, ids = tw.float().contiguous(), ids.to(torch.int32).contiguous()
    emap = None
    if mode == "ep8":
        emap = torch.full((E,), -1, dtype=torch.int32, device=dev)
        emap[:48] = torch.arange(48, dtype=torch.int32, device=dev)
    tok_e = tokens * TOPK / E
    bm = bm_of(mode, tokens)
    r = align_block_size(ids, bm, E, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    in_order = routing_order_rows(w13, w2, route, bm, dev, tok_e) > 0
    fns, outs = {}, {}
    act = None
    for name, cfg in variants(w13.n, H, bm, tok_e).items():
        o = run_gemm(hidden, w13, route, block_m=bm, top_k=TOPK, activation="silu", zero_nonlocal=False,
                     out_position=in_order, config=cfg)
        o.fill_(float("nan"))
        outs[f"gate_up_{name}"] = o
        fns[f"gate_up_{name}"] = lambda cfg=cfg, o=o: run_gemm(hidden, w13, route, block_m=bm, top_k=TOPK,
                                                            activation="silu", zero_nonlocal=False,
                                                            out_position=in_order, config=cfg, out=o)
        fns[f"gate_up_{name}"]()
        act = o
    if w2.k >= 2048:
        for name, cfg in variants(w2.n, w2.k, bm, tok_e).items():
            o = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)
            outs[f"down_{name}"] = o
            fns[f"down_{name}"] = lambda cfg=cfg, o=o: gemm_topk_sum(act, w2, *route, tw, ids, block_m=bm,
                                                                    expert_map=emap, out=o, routing_order=in_order,
                                                                    config=cfg)
            fns[f"down_{name}"]()
    torch.cuda.synchronize()
    same = {g_: torch.equal(outs[f"{g_}_bk256"], outs[f"{g_}_bk128"]) for g_ in ("gate_up", "down") if f"{g_}_bk256" in outs}
    us = {t: x.median_us() for t, x in interleaved(fns, rounds=7).items()}
    rec = {"mode": mode, "tokens": tokens, "rows_per_expert": tok_e, "block_m": bm, "us": us, "bit_identical": same,
           "configs": {g_: {n_: str(c) for n_, c in variants(w.n, w.k, bm, tok_e).items()} for g_, w in (("gate_up", w13), ("down", w2)) if w.k >= 2048}}
    res.append(rec)
    line = f"{mode} {tokens:6d} rows/e {tok_e:6.1f} bm {bm:3d}"
    for g_ in ("gate_up", "down"):
        if f"{g_}_bk256" in us:
            line += f" | {g_} {us[f'{g_}_bk256']:7.1f} -> {us[f'{g_}_bk128']:7.1f} ({us[f'{g_}_bk128'] / us[f'{g_}_bk256'] - 1:+.1%})"
    print(line + f" | bits {same}", flush=True)
    json.dump(res, open(f"{OUT}/bk_ab.json", "w"), indent=1)
