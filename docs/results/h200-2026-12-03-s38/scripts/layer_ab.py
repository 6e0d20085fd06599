# ruff: noqa
"""Session 38's layer A/B harness: the whole layer (TP8: moe_experts over 384 experts, top-k 8; EP8: 48 of
384 global experts under an expert map, top-k 8), its modes interleaved in one process, three timings,
every output compared against the first mode's. A mode swaps the wgmma module's configuration choice
(or the planner's decode-kernel rule) and clears the planner's caches before each call (a call is
captured once in a CUDA graph); "bNN:" runs NN-token routing blocks. Studies (what ran, in call order):
  runs   call a, on d7889e8: row widths on TP8's down in runs of N tiles at 40-56-token blocks, plan (none:
         the rule then) against rw1 (8 tokens narrower), rw2 (8 and 16, from 48) and r208 (208 consumer
         registers alone; rw1 and rw2 have 208 from 48 tokens, where 216 spill the producer); and at
         23-26 rows per expert 32-token blocks (the plan) against 40, b40:plan and b40:rw1
  final  call b, on bfc9e42: the adopted rule (plan) against old (the runs without row widths, 216
         registers), and 32-token blocks (the plan) against 40 at 24.5-26 rows per expert, fresh draws
  thr    call c, on 1d3fbb3 (MANY_32_MAX_TOK_E = 24): the plan against 32-token blocks at 24-25.5 rows
  dec    call d: TP8's 24- and 32-token downs on the WGMMA kernel's runs, wg (at 32 with row widths at
         24) and wg0 (at 32 without), against the plan (the decode kernel, planner.DECODE_ONE_BLOCK_MS)
  ep8    call e: EP8's routing blocks at 14-43 rows per expert, the plan against one size up and down
argv: STUDY precompile [threads] | STUDY time"""
import dataclasses, json, math, os, sys

import chord_kernels.indexed.wgmma as W
import chord_kernels.indexed.planner as P
from chord_kernels.indexed.api import _tma_rows_twin
from chord_kernels.indexed.planner import silu_mul_twin as _silu_mul_twin
from chord_kernels.indexed.heuristics import choose_block_m

STUDY = sys.argv[1]
_orig = W._choose_wgmma_config
_MODE = ["plan"]


def _runs(m, c, block_m):
    if m == "plan" or not c.n_run or not 40 <= block_m <= 56:
        return c
    if STUDY == "final":  # m == "old": the rule before
        assert m == "old" and c.row_widths == (block_m - 8,), c
        return dataclasses.replace(c, row_widths=(), consumer_regs=216)
    ws = {"r208": (), "rw1": (block_m - 8,), "rw2": (block_m - 16, block_m - 8)}[m]
    return dataclasses.replace(c, row_widths=ws, consumer_regs=216 if block_m <= 40 else 208)


def _dec(m, c, block_m):
    return dataclasses.replace(c, row_widths=()) if m == "wg0" and c.n_run and block_m == 32 else c


def _plan(m, c, block_m):
    return c


def _tp8(tokens, seeds, modes):
    return [(f"tp8_{m}_s{s}", "tp8", m, s, modes(m) if callable(modes) else modes) for m in tokens for s in seeds]


STUDIES = {
    "runs": (_runs, _tp8((1280, 1344, 1536, 1664, 1920, 2048, 2304), (0, 1),
                         lambda m: ("plan", "rw1") if m < 1400 else ("plan", "rw1", "rw2", "r208"))
             + _tp8((1104, 1152, 1200, 1248), (0, 1), ("plan", "b40:plan", "b40:rw1"))),
    "final": (_runs, _tp8((1280, 1536, 1920, 2304), (2, 3), ("old", "plan"))
              + _tp8((1176, 1200, 1224, 1248), (2, 3, 4, 5), ("plan", "b40:plan"))),
    "thr": (_runs, _tp8((1152, 1176, 1224), (6, 7), ("plan", "b32:plan"))),
    "dec": (_dec, _tp8((512, 640, 768), (0, 1), ("plan", "wg")) + _tp8((896, 1024, 1152), (0, 1), ("plan", "wg", "wg0"))),
    "ep8": (_plan, [(f"ep8_tok{t}_s{s}", "ep8", t, s, None) for t in (14, 16, 17, 18, 20, 22, 24, 26, 28, 30, 33, 36, 43)
                    for s in (0, 1)]),
}
PATCH, CASES = STUDIES[STUDY]
_ALT = {24: ("b32:plan",), 32: ("b40:plan", "b24:plan"), 40: ("b48:plan", "b32:plan"), 48: ("b56:plan", "b40:plan"),
        56: ("b48:plan",)}
"""ep8: the blocks one step up and down from the planned one."""


def _choose(n, k, block_m, rows):
    return PATCH(_MODE[0].split(":")[-1], _orig(n, k, block_m, rows), block_m)


W._choose_wgmma_config = _choose
_DECODE_ONE_BLOCK_MS = P.DECODE_ONE_BLOCK_MS


def set_mode(m):
    _MODE[0] = m
    if STUDY == "dec":
        P.DECODE_ONE_BLOCK_MS = _DECODE_ONE_BLOCK_MS if m == "plan" else ()
    P.cached_plan.cache_clear()
    P.configs_for.cache_clear()


H13, I = 7168, 2048

def geometry(kind, t):
    """(local experts, N13, K2 = I, tokens, top_k, global experts)"""
    if kind == "tp8":
        return 384, 2 * I // 8, I // 8, t, 8, 384
    return 48, 2 * I, I, round(48 * t), (8 if kind == "ep8" else 1), (384 if kind == "ep8" else 48)


def modes_of(kind, t, modes):
    return modes or ("plan", *_ALT[block_of(kind, t)])


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
