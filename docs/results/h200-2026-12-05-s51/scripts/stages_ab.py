# ruff: noqa
"""Session 47, final A/B: TP8's down as planned now (four consumer warpgroups of one tile at 40-104-token
blocks) against the plan before (two of two tiles in turns), rows in routing order as the layer loads
them, top-k weights; interleaved, three timings, bit for bit. argv: precompile [threads] | time"""
import dataclasses, json, math, os, sys
from chord_kernels.indexed import planner as P, wgmma as W
from chord_kernels.indexed.heuristics import choose_block_m

r = dataclasses.replace
TOKENS = (1280, 1536, 1792, 2048)


class _W:
    def __init__(s, e):
        s.num_experts, s.profile = e, "h200_tp8"


def configs(tokens):
    slots = tokens * 8
    bm = choose_block_m(_W(384), slots)
    new = P._choose(7168, 256, bm, math.ceil(slots / bm) + 384, 132, "sm_90a")
    assert new.consumers == 4, new
    regs = 208 if new.row_widths and 48 <= bm < 72 else 216
    stages = W.max_stages(bm, 2, 256, n_run=W.RUN_TILES, consumer_regs=regs)
    old = W.WgmmaConfig(block_m=bm, mt=2, bk=256, stages=min(stages, 8), consumer_regs=regs,
                        row_widths=new.row_widths, n_run=W.RUN_TILES, pingpong=True)
    old = r(old, whole_stages=not old.commit_per_step)
    out = {"old": old, "new": new}
    for st in (4, 5):
        for ws in (False, True):
            c = r(new, stages=st, whole_stages=ws)
            if c != new and c.smem_bytes(0) + W.LIST_RESERVE <= W.SMEM_LIMIT:
                out[f"s{st}w{int(ws)}"] = c
    return bm, out


def launched(c):
    return r(c, tma_rows=True, subnormal=True)


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for t in TOKENS:
        bm, cs = configs(t)
        for c in cs.values():
            for cc in (launched(c), r(c, subnormal=True), c):
                ks[cc.kernel().source] = cc.kernel()
        print(t, bm, cs)
    # the GPU test's two-warpgroup twins (test_four_consumer_runs_bit_identical_to_two)
    for bm in ():
        four = W.choose_wgmma_config(7168, 256, bm)
        two = r(four, consumers=2, mt=2, pingpong=True, consumer_regs=208, stages=2)
        for cc in (two, r(two, tma_rows=True), four, r(four, tma_rows=True)):
            ks[cc.kernel().source] = cc.kernel()
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
for tokens in TOKENS:
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
        indexed.prepare(w, bm, dev, block_rows=True, config=c)

        def fn(out=outs[tag], c=launched(c)):
            indexed.gemm(a, w, *route, block_m=bm, top_k=1, topk_weights=tw, out=out, config=c, workspace=ws,
                         routing_order=True)
        fns[tag] = fn
    planned = indexed.plan(w, block_m=bm, capacity=cap, device=dev, tok_e=slots / e).config
    assert r(planned, subnormal=False) == vs["new"], (planned, vs["new"])
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = all(torch.equal(outs["old"], o) for o in outs.values())
    nan = bool(outs["new"].isnan().any())
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=ROUNDS)
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"tokens": tokens, "block_m": bm, "us": runs, "configs": {t: repr(c) for t, c in vs.items()},
                "same": same, "nan": nan})
    print(f"tp8_{tokens:5d}_down bm={bm:3d} old " + " ".join(f"{x['old']:7.1f}" for x in runs)
          + "".join(f" | {t} " + " ".join(f"{x[t] / x['old'] - 1:+.1%}" for x in runs) for t in fns if t != "old")
          + ("" if same and not nan else " DIFF/NAN"), flush=True)
    json.dump(res, open(f"{OUT}/stages_ab.json", "w"), indent=1)
    del w, a, outs, fns
    torch.cuda.empty_cache()
