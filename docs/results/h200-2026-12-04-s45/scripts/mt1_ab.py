# ruff: noqa
"""Session 45: one 64-channel tile per consumer warpgroup on wider items (mt 1: the wgmma N up to 192-256
tokens, half the dequantization per MMA, 128-channel N tiles) against the plan at the prefill shapes, each
configuration on its own routing (block size), both GEMMs with rows gathered by slot and output by slot,
interleaved, three timings, outputs compared bit for bit by slot. argv: precompile [threads] | time [cases]."""
import dataclasses, json, os, sys, types

import torch
import chord_kernels
from chord_kernels import indexed
from chord_kernels.indexed import wgmma as W
from chord_kernels.indexed.api import run_gemm
from chord_kernels.indexed.planner import weight_config
from chord_kernels.routing import align_block_size
from chord_kernels.formats import random_quantized

CASES = {"tp8_8192": (384, 8192, 8), "ep8_tok341": (48, 16368, 1), "ep8_tok128": (48, 6144, 1)}
SHAPES = {"ep8": ((4096, 7168), (7168, 2048)), "tp8": ((512, 7168), (7168, 256))}


def ring(bm, items, stages, widths=()):
    return W.WgmmaConfig(block_m=bm, mt=1, bk=128, stages=stages, items=items, weight_ring=True, dynamic=True,
                         widths=widths, subnormal=True)


VARIANTS = {
    "tp8_8192": {"gate_up": {"m1_88x2": ring(88, 2, 3), "m1_96x2": ring(96, 2, 3), "m1_24x8": ring(24, 8, 3, (6, 7, 8))}},
    "ep8_tok341": {"gate_up": {"m1_64x4": ring(64, 4, 2), "m1_96x2": ring(96, 2, 3)},
                   "down": {"m1_64x4": ring(64, 4, 2), "m1_96x2": ring(96, 2, 3)}},
    "ep8_tok128": {"gate_up": {"m1_24x7": ring(24, 7, 3, (6, 7)), "m1_88x2": ring(88, 2, 3), "m1_72x2": ring(72, 2, 3)},
                   "down": {"m1_24x6": ring(24, 6, 3, (1, 3, 5, 6)), "m1_88x2": ring(88, 2, 3), "m1_72x2": ring(72, 2, 3)}},
}

if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for case, gemms in VARIANTS.items():
        for g, vs in gemms.items():
            for tag, c in vs.items():
                print(case, g, tag, c.smem_bytes(0), "fits" if c.smem_bytes(0) + W.LIST_RESERVE <= W.SMEM_LIMIT else "TOO BIG")
                c = weight_config(c, types.SimpleNamespace(n=1, k=1, num_experts=1, profile="h200_ep8", small_scales=True))
                ks[c.kernel().source] = c.kernel()
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
names = sys.argv[2].split(",") if len(sys.argv) > 2 else list(CASES)
res = []
for name in names:
    e, tokens, top_k = CASES[name]
    (n1, k1), (n2, k2) = SHAPES[name[:3]]
    prof = "h200_ep8" if e == 48 else "h200_tp8"
    g = torch.Generator(device=dev).manual_seed(tokens * 7 + e)
    w13 = chord_kernels.pack("indexed", *random_quantized(e, n1, k1, generator=g, device=dev), profile=prof)
    w2 = chord_kernels.pack("indexed", *random_quantized(e, n2, k2, generator=g, device=dev), profile=prof)
    ids = torch.rand(tokens, e, generator=g, device=dev).topk(top_k, dim=1).indices.to(torch.int32).contiguous()
    tw = torch.rand(tokens, top_k, generator=g, device=dev).reshape(-1).contiguous()
    slots, tok_e = tokens * top_k, tokens * top_k / e
    a1 = (torch.randn(tokens, k1, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    a2 = (torch.randn(slots, k2, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ws = indexed.new_workspace(max(indexed.max_workspace_bytes(w13, device=dev), indexed.max_workspace_bytes(w2, device=dev)) * 4, dev)
    routes = {}

    def route_for(bm):
        if bm not in routes:
            r = align_block_size(ids, bm, e)
            routes[bm] = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        return routes[bm]

    for gname, w, a, tk, wts in (("gate_up", w13, a1, top_k, None), ("down", w2, a2, 1, tw)):
        vs = VARIANTS[name].get(gname)
        if not vs:
            continue
        cfgs = {"plan": (indexed.choose_block_m(w13, slots), None)}
        cfgs.update({t: (c.block_m, weight_config(c, w)) for t, c in vs.items()})
        outs, fns = {}, {}
        for tag, (bm, c) in cfgs.items():
            outs[tag] = torch.full((slots, w.n), float("nan"), dtype=torch.bfloat16, device=dev)
            fns[tag] = lambda out=outs[tag], c=c, bm=bm: run_gemm(a, w, route_for(bm), block_m=bm, top_k=tk,
                                                                 topk_weights=wts, out=out, config=c, workspace=ws,
                                                                 tok_e=tok_e)
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        same = {t: bool(torch.equal(outs["plan"], o)) for t, o in outs.items()}
        nan = bool(outs["plan"].isnan().any())
        runs = []
        for rep in range(3):
            order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
            tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
            runs.append({t: tm[t].median_us() for t in fns})
        res.append({"name": name, "gemm": gname, "us": runs, "same": same, "nan": nan,
                    "configs": {t: str(c) for t, (bm, c) in cfgs.items()}})
        print(f"{name:11s} {gname:7s} plan " + " ".join(f"{x['plan']:7.1f}" for x in runs)
              + "".join(f" | {t} " + " ".join(f"{x[t] / x['plan'] - 1:+.1%}" for x in runs)
                        + ("" if same[t] else " DIFF") for t in fns if t != "plan")
              + (" NAN" if nan else ""), flush=True)
        json.dump(res, open(f"{OUT}/mt1_ab.json", "w"), indent=1)
