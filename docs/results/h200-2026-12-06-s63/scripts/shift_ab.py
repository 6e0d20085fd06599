# ruff: noqa
"""Session 62: the one-block items of 72-104 tokens with whole K stages (their K loop then commits per K group)
and the nibble pairs shifted to bit 0 (shift_pairs), which session 61's A/B left out: it compared the plan (per
step, pairs shifted) only against whole stages with the pairs read in place, and the in-place read had measured
1-5 % slower on these items (session 32). gate_up (SiLU fused, output in routing order): plan / whole + in place /
whole + shifted; EP8's down from routing-order rows (top-k weights; whole stages in place since session 61): plan /
whole + shifted. Interleaved, three timings, outputs NaN-poisoned, bit for bit on the real rows.
argv: precompile [threads] | time [case,case,...]"""
import dataclasses, json, os, sys, types

import torch
from chord_kernels import indexed
from chord_kernels.indexed.api import launch_plan
from chord_kernels.indexed.planner import cached_plan, config_for_rows

CASES = {"tp8_8192": (384, 8192, 8), "ep8_72": (48, 48 * 72, 1), "ep8_85": (48, 48 * 85, 1),
         "tp8_3584": (384, 3584, 8), "ep8_171": (48, 48 * 171, 1)}
SHAPES = {"ep8": ((4096, 7168), (7168, 2048)), "tp8": ((512, 7168), (7168, 256))}
ARCH, SMS = "sm_90a", 132


def base_config(n, k, bm, tok_e, cap):
    return cached_plan(n, k, bm, cap, SMS, ARCH, config_for_rows(n, k, bm, ARCH, tok_e)).config


def variants(cfg, gname):
    v = {"plan": cfg}
    if gname == "gu":
        v["whole_inplace"] = dataclasses.replace(cfg, whole_stages=True, shift_pairs=False)
    v["whole_shifted"] = dataclasses.replace(cfg, whole_stages=True, shift_pairs=True)
    return v


def setup(name):
    e, tokens, top_k = CASES[name]
    (n1, k1), (n2, k2) = SHAPES[name[:3]]
    prof = "h200_ep8" if e == 48 else "h200_tp8"
    return e, tokens, top_k, (n1, k1), (n2, k2), prof, tokens * top_k, tokens * top_k / e


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for name in CASES:
        e, tokens, top_k, (n1, k1), (n2, k2), prof, slots, tok_e = setup(name)
        for small in (True, False):
            w13 = types.SimpleNamespace(n=n1, k=k1, num_experts=e, profile=prof, small_scales=small)
            w2 = types.SimpleNamespace(n=n2, k=k2, num_experts=e, profile=prof, small_scales=small)
            bm = indexed.choose_block_m(w13, slots)
            gemms = [("gu", w13, "silu", False)] + ([("dn", w2, None, True)] if name.startswith("ep8") else [])
            for gname, w, act, rows in gemms:
                for cap in range(slots // bm, slots // bm + e + 2):
                    for c in variants(base_config(w.n, w.k, bm, tok_e, cap), gname).values():
                        k = launch_plan(w, bm, cap, SMS, ARCH, config=c, activation=act, block_rows=rows).config.kernel()
                        ks[k.source] = k
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
for name in (sys.argv[2].split(",") if len(sys.argv) > 2 else CASES):
    e, tokens, top_k, (n1, k1), (n2, k2), prof, slots, tok_e = setup(name)
    g = torch.Generator(device=dev).manual_seed(tokens * 7 + e)
    w13 = chord_kernels.pack("indexed", *random_quantized(e, n1, k1, generator=g, device=dev), profile=prof)
    w2 = chord_kernels.pack("indexed", *random_quantized(e, n2, k2, generator=g, device=dev), profile=prof)
    ids = torch.rand(tokens, e, generator=g, device=dev).topk(top_k, dim=1).indices.to(torch.int32).contiguous()
    tw = torch.rand(tokens, top_k, generator=g, device=dev).reshape(-1).contiguous()
    a1 = (torch.randn(tokens, k1, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    bm = indexed.choose_block_m(w13, slots)
    r = align_block_size(ids, bm, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
    real = r.sorted_token_ids.long()[:cap * bm] < slots
    a2 = (torch.randn(cap * bm, k2, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ws = indexed.new_workspace(max(indexed.max_workspace_bytes(w13, device=dev),
                                   indexed.max_workspace_bytes(w2, device=dev)) * 4, dev)
    gemms = [("gu", w13)] + ([("dn", w2)] if name.startswith("ep8") else [])
    for gname, w in gemms:
        fns, outs = {}, {}
        for tag, c in variants(base_config(w.n, w.k, bm, tok_e, cap), gname).items():
            if gname == "gu":
                outs[tag] = torch.full((cap * bm, w.n // 2), float("nan"), dtype=torch.bfloat16, device=dev)
                fns[tag] = lambda o=outs[tag], c=c: run_gemm(a1, w13, route, block_m=bm, top_k=top_k, out=o, config=c,
                                                             workspace=ws, activation="silu", out_position=True)
            else:
                outs[tag] = torch.full((slots, w.n), float("nan"), dtype=torch.bfloat16, device=dev)
                fns[tag] = lambda o=outs[tag], c=c: run_gemm(a2, w2, route, block_m=bm, top_k=1, topk_weights=tw, out=o,
                                                             config=c, workspace=ws, block_rows=True, num_slots=slots)
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        sel = (lambda t: t[real]) if gname == "gu" else (lambda t: t)
        same = all(torch.equal(sel(outs["plan"]), sel(o)) for o in outs.values())
        nan = any(bool(sel(o).isnan().any()) for o in outs.values())
        runs = []
        for rep in range(3):
            order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
            tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
            runs.append({t: tm[t].median_us() for t in fns})
        res.append({"name": name, "gemm": gname, "block_m": bm, "capacity": cap, "same": same, "nan": nan, "us": runs,
                    "plan": str(base_config(w.n, w.k, bm, tok_e, cap))})
        print(f"{name:9s} {gname} bm {bm:3d} plan " + " ".join(f"{x['plan']:7.1f}" for x in runs)
              + "".join(f" | {t} " + " ".join(f"{x[t] / x['plan'] - 1:+.1%}" for x in runs) for t in fns if t != "plan")
              + ("" if same and not nan else " DIFF/NAN"), flush=True)
        json.dump(res, open(f"{OUT}/shift_ab.json", "w"), indent=1)
