# ruff: noqa
"""Session 59: the planned split tail (``TAIL_CUT_PARTS`` on the gate_up items of at most 56 tokens) against
the same plan without it, on the whole layer, both routing draws (uniform, and one local expert with 8x the
average rows: chord_bench's draws), interleaved in one process, three timings (listed order, reversed,
listed), outputs NaN-poisoned. TP8: moe_experts over 384 experts, top-k 8; EP8: 48 of 384 under an expert
map; ll: DeepEP low latency (gemm_masked twice over 48 experts' 256-row buffers, SiLU fused).
The two modes sum the cut items' K in another order, so their outputs are compared by relative norm.
argv: precompile [threads] | time"""
import dataclasses
import json
import os
import sys

import chord_kernels.indexed.planner as P
import chord_kernels.indexed.wgmma as W
from chord_kernels.indexed.api import _tma_rows_twin
from chord_kernels.indexed.heuristics import choose_block_m
from chord_kernels.indexed.planner import silu_mul_twin

MODES = ("plan", "uncut")
_MODE = ["plan"]
_choose = P.choose_wgmma_config


def _choose_mode(n, k, block_m, tok_e=None):
    c = _choose(n, k, block_m, tok_e)
    return dataclasses.replace(c, tail_parts=0) if _MODE[0] == "uncut" and c.tail_parts else c


P.choose_wgmma_config = _choose_mode
H13, I = 7168, 2048
CASES = [(kind, t, draw) for draw in ("uniform", "skewed")
         for kind, ts in (("ep8", (12, 16, 24, 32, 43)), ("ll", (16, 32, 64)), ("tp8", (512, 1024, 2304))) for t in ts]


def set_mode(m):
    _MODE[0] = m
    P.cached_plan.cache_clear()
    P.configs_for.cache_clear()


def geometry(kind, t):
    """(local experts, N13, K2, tokens, top_k, global experts)"""
    if kind == "tp8":
        return 384, 2 * I // 8, I // 8, t, 8, 384
    return 48, 2 * I, I, round(48 * t), (8 if kind == "ep8" else 1), (384 if kind == "ep8" else 48)


def block_of(kind, t):
    e, n13, i, tokens, top_k, ge = geometry(kind, t)

    class _W:
        num_experts, profile = e, ("h200_tp8" if kind == "tp8" else "h200_ep8")
    return choose_block_m(_W(), tokens * top_k * e // ge)


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for kind, t, _ in CASES:
        e, n13, i, tokens, top_k, ge = geometry(kind, t)
        for m in MODES:
            set_mode(m)
            for n, k in ((n13, H13), (H13, i)):
                for c in P.configs_for(n, k, block_of(kind, t), "sm_90a"):
                    twins = {c, c.topk_sum_twin(n) or c} if isinstance(c, W.WgmmaConfig) else {c}
                    for x in {y for tw in twins for y in (tw, _tma_rows_twin(tw))}:
                        for u in {x, (not getattr(x, "topk_sum", False) and silu_mul_twin(x, n)) or x}:
                            u = dataclasses.replace(u, subnormal=True)
                            ks[u.kernel().source] = u.kernel()
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import torch  # noqa: E402

import chord_kernels  # noqa: E402
from chord_bench.layer import draw_counts, draw_topk  # noqa: E402
from chord_bench.timing import interleaved  # noqa: E402
from chord_kernels.formats import random_quantized  # noqa: E402
from chord_kernels.indexed import MaskedRows  # noqa: E402
from chord_kernels.indexed.api import gemm_masked, moe_experts  # noqa: E402
from chord_kernels.routing import align_block_size  # noqa: E402

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "15"))
res = []
for kind, t, draw in CASES:
    e, n13, i, tokens, top_k, ge = geometry(kind, t)
    bm = block_of(kind, t)
    g = torch.Generator(device=dev).manual_seed(tokens + 7 * e)
    prof = "h200_tp8" if kind == "tp8" else "h200_ep8"
    w13 = chord_kernels.pack("indexed", *random_quantized(e, n13, H13, generator=g, device=dev), profile=prof)
    w2 = chord_kernels.pack("indexed", *random_quantized(e, H13, i, generator=g, device=dev), profile=prof)
    fns, outs = {}, {}
    if kind == "ll":
        cap = 256
        hidden = (torch.randn(e * cap, H13, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        counts = draw_counts(tokens, e, cap, draw, g)
        groups = MaskedRows(counts, cap)
        for m in MODES:
            act = torch.full((e * cap, i), float("nan"), dtype=torch.bfloat16, device=dev)
            outs[m] = torch.full((e * cap, H13), float("nan"), dtype=torch.bfloat16, device=dev)

            def fn(m=m, act=act, out=outs[m]):
                set_mode(m)
                gemm_masked(hidden, w13, groups, block_m=bm, out=act, activation="silu", expected_m=t)
                gemm_masked(act, w2, groups, block_m=bm, out=out, expected_m=t)
            fns[m] = fn
        valid = (torch.arange(cap, device=dev)[None, :] < counts[:, None].long()).reshape(-1)

        def sel(o, valid=valid):
            return o[valid]
        max_rows = int(counts.max())
    else:
        a = (torch.randn(tokens, H13, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        tw, ids = draw_topk(tokens, e, draw, g)
        emap = None
        if ge != e:
            emap = torch.full((ge,), -1, dtype=torch.int32, device=dev)
            emap[:e] = torch.arange(e, dtype=torch.int32, device=dev)
        r = align_block_size(ids, bm, ge, emap)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        for m in MODES:
            outs[m] = torch.full((tokens, H13), float("nan"), dtype=torch.bfloat16, device=dev)

            def fn(m=m, out=outs[m]):
                set_mode(m)
                moe_experts(a, w13, w2, route, tw, ids, block_m=bm, expert_map=emap, out=out)
            fns[m] = fn

        def sel(o):
            return o
        max_rows = int(torch.bincount(ids.reshape(-1).long(), minlength=ge)[:e].max())
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    first = sel(outs[MODES[0]]).float()
    nan = any(bool(sel(o).isnan().any()) for o in outs.values())
    err = max(float((sel(o).float() - first).norm() / first.norm()) for o in outs.values())
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({k: fns[k] for k in order}, rounds=ROUNDS)
        runs.append({k: tm[k].median_us() for k in fns})
    res.append({"kind": kind, "t": t, "draw": draw, "block_m": bm, "max_rows": max_rows, "us": runs, "nan": nan,
                "rel_diff": err})
    print(f"{kind}_{t:<5} {draw:8s} bm={bm:3d} max rows {max_rows:4d} plan " + " ".join(f"{x['plan']:7.1f}" for x in runs)
          + " | uncut " + " ".join(f"{x['uncut'] / x['plan'] - 1:+.1%}" for x in runs)
          + f" rel diff {err:.1e}" + (" NAN" if nan else ""), flush=True)
    json.dump(res, open(f"{OUT}/layer_cut_ab.json", "w"), indent=1)
