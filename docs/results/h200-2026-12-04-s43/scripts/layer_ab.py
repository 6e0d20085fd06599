# ruff: noqa
"""Session 43's layer A/B harness (session 42's layer_ab.py with this session's study): the whole layer
(TP8: moe_experts over 384 experts, top-k 8; EP8: 48 of 384 global experts under an expert map, top-k 8;
ll: DeepEP low latency, gemm_masked twice over 48 experts' 256-row buffers), its modes interleaved in one
process, three timings, every output compared against the first mode's. A mode swaps the planner's
choice and clears its caches before each call (a call is captured once in a CUDA graph). Studies:
  mt3    the down's one-block items of 40-56 tokens (N = 7168, K = 2048) on two consumer warpgroups of three
         tiles (384-channel N tiles, two stages): m3s per-step commits with the plan's row widths, m3g
         per-K-group commits without (ab.py's variants), against the plan's two tiles
argv: STUDY precompile [threads] | STUDY time"""
import dataclasses, json, math, os, sys

import chord_kernels.indexed.wgmma as W
import chord_kernels.indexed.planner as P
from chord_kernels.indexed.api import _tma_rows_twin
from chord_kernels.indexed.planner import silu_mul_twin as _silu_mul_twin
from chord_kernels.indexed.heuristics import choose_block_m

STUDY = sys.argv[1]
_MODE = ["plan"]
_choose_wgmma = P.choose_wgmma_config
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from variants import GroupCommit


def _mt3(n, k, block_m, tok_e=None):
    """Modes m3s / m3g: the down's one-block items of 40-56 tokens on two warpgroups of three tiles."""
    c = _choose_wgmma(n, k, block_m, tok_e)
    if (_MODE[0] in ("m3s", "m3g") and n == 7168 and k == 2048 and 40 <= block_m <= 56 and c.consumers == 2
            and c.mt == 2 and c.items == 1 and not c.n_run):
        st = W.max_stages(block_m, 3, c.bk, consumers=2, items=1)
        base = dataclasses.replace(c, mt=3, stages=min(st, 8), whole_stages=False, shift_pairs=False)
        if _MODE[0] == "m3s":
            return base
        g = dataclasses.replace(base, row_widths=(), whole_stages=k % c.bk == 0)
        return GroupCommit(**{f.name: getattr(g, f.name) for f in dataclasses.fields(g)})
    return c


P.choose_wgmma_config = _mt3


def _cases(kind, ts, seeds, modes):
    return [(f"{kind}_{t}_s{s}", kind, t, s, modes) for t in ts for s in seeds]


STUDIES = {
    "mt3": _cases("ep8", (43, 48, 32, 24), (0, 1), ("plan", "m3s", "m3g")) + _cases("ll", (43, 32), (0, 1), ("plan", "m3s", "m3g")),
}
CASES = STUDIES[STUDY]


def set_mode(m):
    _MODE[0] = m
    P.cached_plan.cache_clear()
    P.configs_for.cache_clear()


H13, I = 7168, 2048

def geometry(kind, t):
    """(local experts, N13, K2 = I, tokens, top_k, global experts)"""
    if kind == "tp8":
        return 384, 2 * I // 8, I // 8, t, 8, 384
    return 48, 2 * I, I, round(48 * t), (8 if kind == "ep8" else 1), (384 if kind == "ep8" else 48)


def modes_of(kind, t, modes):
    return modes


def block_of(kind, t, mode="plan"):
    if mode.startswith("b"):
        return int(mode[1:].split(":")[0])
    e, n13, i, tokens, top_k, ge = geometry(kind, t)
    class _W:
        num_experts, profile = e, ("h200_tp8" if kind == "tp8" else "h200_ep8")
    return choose_block_m(_W(), tokens * top_k * e // ge)


if sys.argv[2] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for name, kind, t, s, modes in CASES:
        modes = modes_of(kind, t, modes)
        e, n13, i, tokens, top_k, ge = geometry(kind, t)
        for m in modes:
            set_mode(m)
            bm = block_of(kind, t, m)
            for n, k in ((n13, H13), (H13, i)):
                for c in P.configs_for(n, k, bm, "sm_90a"):
                    twins = {c, c.topk_sum_twin(n) or c} if isinstance(c, W.WgmmaConfig) else {c}
                    for x in {y for t in twins for y in (t, _tma_rows_twin(t))}:
                        for u in {x, (not getattr(x, "topk_sum", False) and _silu_mul_twin(x, n)) or x}:
                            u = dataclasses.replace(u, subnormal=True)
                            ks[u.kernel().source] = u.kernel()
    with ThreadPoolExecutor(int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3].isdigit() else 2) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels.indexed.api import moe_experts, gemm_masked
from chord_kernels.indexed import MaskedRows
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "15"))
res = []
for name, kind, t, seed, modes in CASES:
    modes = modes_of(kind, t, modes)
    e, n13, i, tokens, top_k, ge = geometry(kind, t)
    bm = block_of(kind, t)
    g = torch.Generator(device=dev).manual_seed(tokens + 7 * e + 1000 * seed)
    prof = "h200_tp8" if kind == "tp8" else "h200_ep8"
    w13 = chord_kernels.pack("indexed", *random_quantized(e, n13, H13, generator=g, device=dev), profile=prof)
    w2 = chord_kernels.pack("indexed", *random_quantized(e, H13, i, generator=g, device=dev), profile=prof)
    fns, outs = {}, {}
    if kind == "ll":
        cap = 256
        hidden = (torch.randn(e * cap, H13, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        pick = torch.randint(0, e, (tokens,), device=dev, generator=g)
        counts = torch.bincount(pick, minlength=e).clamp_max(cap).to(torch.int32)
        groups = MaskedRows(counts, cap)
        for m in modes:
            act = torch.full((e * cap, i), float("nan"), dtype=torch.bfloat16, device=dev)
            outs[m] = torch.full((e * cap, H13), float("nan"), dtype=torch.bfloat16, device=dev)

            def fn(m=m, act=act, out=outs[m]):
                set_mode(m)
                gemm_masked(hidden, w13, groups, block_m=bm, out=act, activation="silu", expected_m=t)
                gemm_masked(act, w2, groups, block_m=bm, out=out, expected_m=t)
            fns[m] = fn
        valid = (torch.arange(cap, device=dev)[None, :] < counts[:, None].long()).reshape(-1)
        sel = lambda o: o[valid]
        max_rows = int(counts.max())
    else:
        a = (torch.randn(tokens, H13, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        ids = torch.rand(tokens, ge, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32).contiguous()
        tw = torch.rand(tokens, top_k, generator=g, device=dev)
        emap = None
        if ge != e:
            emap = torch.full((ge,), -1, dtype=torch.int32, device=dev)
            emap[:e] = torch.arange(e, dtype=torch.int32, device=dev)
        for m in modes:
            outs[m] = torch.full((tokens, H13), float("nan"), dtype=torch.bfloat16, device=dev)
            mbm = block_of(kind, t, m)
            r = align_block_size(ids, mbm, ge, emap)
            route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)

            def fn(m=m, out=outs[m], bm=mbm, route=route):
                set_mode(m)
                moe_experts(a, w13, w2, route, tw, ids, block_m=bm, expert_map=emap, out=out)
            fns[m] = fn
        sel = lambda o: o
        max_rows = int(torch.bincount(ids.reshape(-1).long(), minlength=ge)[:e].max())
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    first = sel(outs[modes[0]]).float()
    same = all(torch.equal(sel(outs[modes[0]]), sel(o)) for o in outs.values())
    nan = any(bool(sel(o).isnan().any()) for o in outs.values())
    err = max(float((sel(o).float() - first).norm() / first.norm()) for o in outs.values())
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({k: fns[k] for k in order}, rounds=ROUNDS)
        runs.append({k: tm[k].median_us() for k in fns})
    res.append({"name": name, "block_m": bm, "max_rows": max_rows, "us": runs, "same": same, "nan": nan, "rel_diff": err})
    print(f"{name:14s} bm={bm:3d} max rows {max_rows:4d} {modes[0]} " + " ".join(f"{x[modes[0]]:7.1f}" for x in runs)
          + "".join(f" | {m} " + " ".join(f"{x[m] / x[modes[0]] - 1:+.1%}" for x in runs) for m in modes[1:])
          + ("" if same else f" diff {err:.1e}") + (" NAN" if nan else ""), flush=True)
    json.dump(res, open(f"{OUT}/layer_{STUDY}.json", "w"), indent=1)
