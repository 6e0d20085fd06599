# ruff: noqa
"""Session 47: four consumer warpgroups of one tile (256-channel N tiles) against the planned
configurations on TP8's prefill GEMMs; interleaved, three timings, bit for bit.
argv: precompile [threads] | time"""
import dataclasses, json, math, os, sys
sys.path.insert(0, os.path.dirname(__file__))
from variants import variants, r
from chord_kernels.indexed import planner as P
from chord_kernels.indexed.heuristics import choose_block_m

CASES = [  # name, experts, N, K, tokens, top_k
    ("tp8_4096_dn", 384, 7168, 256, 4096, 8),
    ("tp8_8192_dn", 384, 7168, 256, 8192, 8),
    ("tp8_12288_dn", 384, 7168, 256, 12288, 8),
    ("tp8_8192_gu", 384, 512, 7168, 8192, 8),
    ("tp8_4096_gu", 384, 512, 7168, 4096, 8),
]
if len(sys.argv) > 2 and sys.argv[2:] != ["all"] and sys.argv[1] == "time":
    CASES = [c for c in CASES if c[0] in sys.argv[2:]]


class _W:
    def __init__(s, e):
        s.num_experts, s.profile = e, ("h200_tp8" if e == 384 else "h200_ep8")


def config(case):
    name, e, n, k, tokens, top_k = case
    slots = tokens * top_k
    bm = choose_block_m(_W(e), slots)
    return bm, (P.config_for_rows(n, k, bm, "sm_90a", slots / e)
                or P._choose(n, k, bm, math.ceil(slots / bm) + e, 132, "sm_90a"))


def launched(case, c):
    down = case[0].endswith("dn")
    return r(c, tma_rows=True, subnormal=True) if down else r(c, subnormal=True)


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for case in CASES:
        bm, cfg = config(case)
        for c in variants(cfg).values():
            k = launched(case, c).kernel()
            ks[k.source] = k
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels import indexed
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "7"))
DRAWS = int(os.environ.get("DRAWS", "1"))
res = []
for case in CASES:
    for draw in range(DRAWS):
        name, e, n, k, tokens, top_k = case
        slots = tokens * top_k
        bm, cfg = config(case)
        vs = variants(cfg)
        g = torch.Generator(device=dev).manual_seed(slots + n + 1000 * draw)
        w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_tp8")
        assert w.small_scales
        ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32).contiguous()
        rt = align_block_size(ids, bm, e)
        route = (rt.sorted_token_ids, rt.expert_ids, rt.num_tokens_post_padded)
        cap = indexed.routing_capacity(rt.sorted_token_ids, rt.expert_ids, bm)
        down = name.endswith("dn")
        ws = indexed.new_workspace(indexed.max_workspace_bytes(w, device=dev), dev)
        fns, outs = {}, {}
        if down:
            a = (torch.randn(cap * bm, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
            tw = torch.rand(slots, generator=g, device=dev)
        else:
            a = (torch.randn(tokens, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        for tag, c in vs.items():
            outs[tag] = torch.full((slots, n), float("nan"), dtype=torch.bfloat16, device=dev)
            lc = launched(case, c)
            indexed.prepare(w, bm, dev, block_rows=down, config=c)

            def fn(out=outs[tag], c=lc):
                if down:
                    indexed.gemm(a, w, *route, block_m=bm, top_k=1, topk_weights=tw, out=out, config=c,
                                 workspace=ws, routing_order=True)
                else:
                    indexed.gemm(a, w, *route, block_m=bm, top_k=top_k, out=out, config=c, workspace=ws)
            fns[tag] = fn
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        real = rt.sorted_token_ids[:cap * bm]
        same = all(torch.equal(outs["base"], o) for o in outs.values())
        nan = bool(outs["base"].isnan().any())
        runs = []
        for rep in range(3):
            order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
            tm = interleaved({t: fns[t] for t in order}, rounds=ROUNDS)
            runs.append({t: tm[t].median_us() for t in fns})
        res.append({"name": name, "draw": draw, "block_m": bm, "us": runs, "configs": {t: repr(c) for t, c in vs.items()},
                    "same": same, "nan": nan})
        print(f"{name:13s} d{draw} bm={bm:3d} base " + " ".join(f"{x['base']:7.1f}" for x in runs)
              + "".join(f" | {t} " + " ".join(f"{x[t] / x['base'] - 1:+.1%}" for x in runs) for t in fns if t != "base")
              + ("" if same and not nan else " DIFF/NAN"), flush=True)
        json.dump(res, open(f"{OUT}/c4_ab.json", "w"), indent=1)
        del w, a, outs, fns
        torch.cuda.empty_cache()
