# ruff: noqa
"""Session 48: TP8's down as the branch plans it against main, rows in routing order as the layer loads them
(tensor copies, one-fma weights), top-k weights; interleaved, three timings, bit for bit.
- 64 x 2 blocks (4608-16384 tokens): "main" = two warpgroups of two tiles in turns, main's header; "new" =
  four warpgroups of one tile at 104 registers (the branch, three stages); "c2_new_src" = main's config on the
  branch header; "new_st2" = the branch's with two stages.
- one-block runs (1536, 2560, 8192 tokens): the planned configuration, main's header against the branch's (the
  grid size read per unit, the only header change).
argv: precompile [threads] | time"""
import dataclasses, json, math, os, sys
from pathlib import Path
from chord_kernels.indexed import planner as P, wgmma as W
from chord_kernels.indexed.heuristics import choose_block_m

r = dataclasses.replace
PAIRS = (4608, 5120, 5632, 9600, 12288, 16384)
ONES = (1536, 2560, 8192)
MAIN_HEADER = "\n".join(l for l in (Path(__file__).parent / "wgmma_main.cuh").read_text().splitlines()
                        if l.strip() != "#pragma once")
INCLUDE = '#include "chord/indexed/wgmma.cuh"'


class MainHeader(W.WgmmaConfig):
    """A configuration compiled against main's wgmma.cuh (inlined in its source)."""

    def source(self) -> str:
        src = super().source()
        assert src.count(INCLUDE) == 1
        return src.replace(INCLUDE, MAIN_HEADER)


def as_main(c):
    return MainHeader(**{f.name: getattr(c, f.name) for f in dataclasses.fields(c)})


class _W:
    def __init__(s, e):
        s.num_experts, s.profile = e, "h200_tp8"


def configs(tokens):
    slots = tokens * 8
    bm = choose_block_m(_W(384), slots)
    new = P._choose(7168, 256, bm, math.ceil(slots / bm) + 384, 132, "sm_90a")
    if tokens in PAIRS:
        assert bm == 64 and new.items == 2 and new.consumers == 4, new
        old = W.WgmmaConfig(block_m=64, mt=2, bk=256, stages=3, items=2, n_run=W.RUN_TILES, pingpong=True)
        return bm, {"main": as_main(old), "new": new, "c2_new_src": old, "new_st2": r(new, stages=2)}
    assert new.consumers == 4 and new.items == 1, new
    return bm, {"main": as_main(new), "new": new}


def launched(c):
    return r(c, tma_rows=True, subnormal=True)


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for t in PAIRS + ONES:
        bm, cs = configs(t)
        for c in cs.values():
            for cc in (launched(c), r(c, subnormal=True), c):
                ks[cc.kernel().source] = cc.kernel()
        print(t, bm, {k: type(v).__name__ for k, v in cs.items()})
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
ROUNDS = int(os.environ.get("ROUNDS", "5"))
res = []
for tokens in PAIRS + ONES:
    e, n, k, top_k = 384, 7168, 256, 8
    slots = tokens * top_k
    bm, vs = configs(tokens)
    g = torch.Generator(device=dev).manual_seed(tokens)
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_tp8")
    assert w.small_scales
    ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32).contiguous()
    rt = align_block_size(ids, bm, e)
    route = (rt.sorted_token_ids, rt.expert_ids, rt.num_tokens_post_padded)
    cap = indexed.routing_capacity(rt.sorted_token_ids, rt.expert_ids, bm)
    ws = indexed.new_workspace(indexed.max_workspace_bytes(w, device=dev), dev)
    a = (torch.randn(cap * bm, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    tw = torch.rand(slots, generator=g, device=dev)
    fns, outs = {}, {}
    for tag, c in vs.items():
        outs[tag] = torch.full((slots, n), float("nan"), dtype=torch.bfloat16, device=dev)

        def fn(out=outs[tag], c=launched(c)):
            indexed.gemm(a, w, *route, block_m=bm, top_k=1, topk_weights=tw, out=out, config=c, workspace=ws,
                         routing_order=True)
        fns[tag] = fn
    planned = indexed.plan(w, block_m=bm, capacity=cap, device=dev, tok_e=slots / e).config
    assert r(planned, subnormal=False) == vs["new"], (planned, vs["new"])
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = all(torch.equal(o, outs["new"]) for o in outs.values())
    nan = bool(outs["new"].isnan().any())
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=ROUNDS)
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"tokens": tokens, "block_m": bm, "us": runs, "configs": {t: repr(c) for t, c in vs.items()},
                "same": same, "nan": nan})
    print(f"tp8_{tokens:5d}_down bm={bm:3d} main " + " ".join(f"{x['main']:7.1f}" for x in runs)
          + "".join(f" | {t} " + " ".join(f"{x[t] / x['main'] - 1:+.1%}" for x in runs) for t in vs if t != "main")
          + ("" if same and not nan else " DIFF/NAN"), flush=True)
    json.dump(res, open(f"{OUT}/pairs_ab.json", "w"), indent=1)
    del w, a, outs, fns
    torch.cuda.empty_cache()
