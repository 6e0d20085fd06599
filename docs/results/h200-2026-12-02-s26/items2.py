# ruff: noqa
"""Session 26: 24-token blocks at 14-18 rows per expert without blocks.py's step. There an expert past
24 rows is a second gate_up item per N tile, and two such experts start a fourth wave. Here gate_up
(K >= 4096) takes items of up to two 24-token blocks of one expert ("x2g": four warpgroups, two
stages, the K loop at 24 and 48 tokens; ptxas: clean) while the down keeps one-block items (its
eleventh wave has room for three more blocks; two-block down items on two warpgroups serialize their
wgmmas, C7512); against the planned 32- and 24-token blocks. The whole layer, interleaved CUDA graphs
(each captured under its mode), three timings; each output against the reference and the 24-token
modes bit for bit against each other. argv[1] == precompile: compile only."""
import json, os, sys

from chord_bench.layer import LayerScenario, GLOBAL_EXPERTS, HIDDEN, TOP_K

ROWS = [int(x) for x in os.environ.get("ROWS_PER_EXPERT", "14,15,16,17,18").split(",")]
SCEN = {f"ep8_tok{t}": LayerScenario(tokens=48 * t, parallel="ep8") for t in ROWS}
SCEN |= {f"ep8_masked{t}": LayerScenario(tokens=48 * t, parallel="ep8_ll", capacity=256) for t in ROWS if t % 2 == 0}
SCEN |= {f"tp8_tok{t}": LayerScenario(tokens=48 * t, parallel="tp8") for t in ROWS if t >= 10}  # tok_e = tokens / 48
MODES = ("32", "24", "x2g")
BLOCK = {"32": 32, "24": 24, "x2g": 24}

import dataclasses
from chord_kernels.indexed import wgmma as W, planner as P
_orig = W._choose_wgmma_config
MODE = {"m": "32"}


def _moded(n, k, block_m, rows):
    m = MODE["m"]
    if block_m == 24 and rows == -1 and m == "x2g" and k >= 4096:
        return W.WgmmaConfig(block_m=24, items=2, mt=2, consumers=4, consumer_regs=104, stages=2, dynamic=True)
    return _orig(n, k, block_m, rows)


W._choose_wgmma_config = _moded


def set_mode(m):
    MODE["m"] = m
    for f in (P.cached_plan, P.configs_for, P.shape_workspace_bytes):
        f.cache_clear()


if sys.argv[1:2] == ["precompile"]:
    import dataclasses
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for s, mode in ((s, m) for s in SCEN.values() for m in MODES):
        set_mode(mode)
        bm = BLOCK[mode]
        tok_e = (s.tokens if s.batched else s.local_slots) / s.local_experts
        if True:
            for n, k in ((2 * s.intermediate, HIDDEN), (HIDDEN, s.intermediate)):
                for cfg in {P._rows_config(n, k, bm, tok_e), *P.configs_for(n, k, bm, "sm_90a")}:
                    if not hasattr(cfg, "topk_sum_twin"):
                        continue
                    twins = [cfg]
                    if k == HIDDEN and cfg.fits_silu_mul(n):
                        twins.append(dataclasses.replace(cfg, silu_mul=True))
                    if s.batched:
                        twins += [dataclasses.replace(t, tma_rows=True) for t in twins]
                    elif k != HIDDEN and cfg.topk_sum_twin(n) is not None:
                        twins.append(cfg.topk_sum_twin(n))
                    for t in twins:
                        ks[t.kernel().source] = t.kernel()
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels compiled", flush=True)
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels import reference
from chord_kernels.indexed import MaskedRows, choose_block_m, gemm_masked, moe_experts
from chord_kernels.routing import align_block_size
from chord_bench.problems import WeightSet
from chord_bench.timing import GraphTimer

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "9"))
res = []
weights = {}
for name, s in SCEN.items():
    if s.profile not in weights:
        experts, inter = s.local_experts, s.intermediate
        w13s = WeightSet.random(experts, 2 * inter, HIDDEN, seed=1, device=dev)
        w2s = WeightSet.random(experts, HIDDEN, inter, seed=2, device=dev)
        weights[s.profile] = (w13s, w2s, chord_kernels.pack("indexed", w13s.packed, w13s.scales, profile=s.profile),
                              chord_kernels.pack("indexed", w2s.packed, w2s.scales, profile=s.profile))
    w13s, w2s, w13, w2 = weights[s.profile]
    gen = torch.Generator(device=dev).manual_seed(s.tokens + len(name))
    fns, outs = {}, {}
    if s.batched:
        experts, cap = s.local_experts, s.capacity
        hidden = (torch.randn(experts * cap, HIDDEN, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
        pick = torch.randint(0, experts, (s.tokens,), device=dev, generator=gen)
        counts = torch.bincount(pick, minlength=experts).clamp_max(cap).to(torch.int32)
        groups = MaskedRows(counts, cap)
        for m in MODES:
            act = torch.empty(experts * cap, s.intermediate, dtype=torch.bfloat16, device=dev)
            out = torch.full((experts * cap, HIDDEN), float("nan"), dtype=torch.bfloat16, device=dev)
            def layer(act=act, out=out, bm=BLOCK[m]):
                gemm_masked(hidden, w13, groups, block_m=bm, out=act, activation="silu", expected_m=s.tokens / experts)
                gemm_masked(act, w2, groups, block_m=bm, out=out, expected_m=s.tokens / experts)
            fns[m], outs[m] = layer, out
        rows = (torch.arange(cap, device=dev)[None, :] < counts[:, None].long()).reshape(-1).nonzero().reshape(-1)
        want = reference.moe_layer(hidden[rows], (w13s.packed, w13s.scales), (w2s.packed, w2s.scales),
                                   torch.ones(rows.numel(), 1, device=dev), (rows // cap).to(torch.int32).reshape(-1, 1)).float()
        hist = counts
    else:
        hidden = (torch.randn(s.tokens, HIDDEN, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
        probs = torch.softmax(torch.randn(s.tokens, GLOBAL_EXPERTS, device=dev, generator=gen), dim=-1)
        tw, ids = probs.topk(TOP_K, dim=-1)
        tw, ids = tw.float().contiguous(), ids.to(torch.int32).contiguous()
        emap = s.expert_map(dev)
        routes = {}
        for bm in (24, 32):
            r = align_block_size(ids, bm, GLOBAL_EXPERTS, emap)
            routes[bm] = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        for m in MODES:
            out = torch.full((s.tokens, HIDDEN), float("nan"), dtype=torch.bfloat16, device=dev)
            def layer(out=out, bm=BLOCK[m]):
                moe_experts(hidden, w13, w2, routes[bm], tw, ids, block_m=bm, expert_map=emap, out=out)
            fns[m], outs[m] = layer, out
        rows = None
        want = reference.moe_layer(hidden, (w13s.packed, w13s.scales), (w2s.packed, w2s.scales), tw, ids,
                                   global_num_experts=GLOBAL_EXPERTS, expert_map=emap).float()
        local = ids if emap is None else emap[ids.long()]
        hist = torch.bincount(local[local >= 0].reshape(-1).long(), minlength=w13.num_experts)
    ran = {}
    for m in MODES:
        set_mode(m)
        fns[m]()
        tok_e = (s.tokens if s.batched else s.local_slots) / w13.num_experts
        ran[m] = str(P.config_for_rows(w13.n, w13.k, BLOCK[m], "sm_90a", tok_e))
    torch.cuda.synchronize()
    errs = {}
    for m in MODES:
        got = outs[m] if rows is None else outs[m][rows]
        errs[m] = ((got.float() - want).norm() / want.norm()).item()
        assert errs[m] < 2e-2, (name, m, errs[m])
    same = {m: torch.equal(outs["24"] if rows is None else outs["24"][rows], outs[m] if rows is None else outs[m][rows])
            for m in MODES}  # masked: the valid rows (the rest are unspecified)
    runs = []
    for rep in range(3):
        order = list(MODES) if rep % 2 == 0 else list(MODES)[::-1]
        t = {}
        for m in order:
            set_mode(m)
            t[m] = GraphTimer(fns[m], launches=10)
        set_mode("32")
        for _ in range(ROUNDS):
            for m in order:
                t[m].run(3)
        runs.append({m: t[m].median_us() for m in order})
    over = {bm: int((hist > bm).sum()) for bm in (24, 32)}
    res.append({"scenario": name, "tokens": s.tokens, "parallel": s.parallel, "us": runs, "rel_err": errs,
                "bit_identical_to_24": same, "experts_over_block": {str(b): v for b, v in over.items()},
                "max_rows": int(hist.max()), "gate_up_config": ran})
    print(f"{name:14s} 32: " + " ".join(f"{r['32']:7.1f}" for r in runs) + "".join(
        f" | {m} " + " ".join(f"{r[m] / r['32'] - 1:+.1%}" for r in runs) + ("" if same[m] else " DIFF") for m in MODES[1:])
          + f" | >24 rows {over[24]}, >32 {over[32]}, max {int(hist.max())} | err {max(errs.values()):.1e}", flush=True)
    json.dump({"layer": res}, open(f"{OUT}/items2.json", "w"), indent=1)

# gate_up alone (SiLU fused), uniform top-k routing over the local experts (no expert map): the
# one-block 24-token items against x2g's items of up to two blocks, and 32-token blocks.
from chord_kernels.indexed.api import run_gemm
from chord_kernels.formats import random_quantized
from chord_bench.timing import interleaved
gemm_res = []
for name, e, n, slots, top_k in (("ep8_tok12", 48, 4096, 576, 1), ("ep8_tok16", 48, 4096, 768, 1),
                                 ("tp8_tok10", 384, 512, 3840, 8), ("tp8_tok16", 384, 512, 6144, 8)):
    g = torch.Generator(device=dev).manual_seed(slots + n)
    w = chord_kernels.pack("indexed", *random_quantized(e, n, HIDDEN, generator=g, device=dev),
                           profile="h200_tp8" if e == 384 else "h200_ep8")
    tokens = slots // top_k
    a = (torch.randn(tokens, HIDDEN, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32).contiguous()
    counts = torch.bincount(ids.reshape(-1).long(), minlength=e)
    cfgs = {}
    for m in MODES:
        set_mode(m)
        cfgs[m] = P._rows_config(n, HIDDEN, BLOCK[m], slots / e)
    set_mode("32")
    fns, outs = {}, {}
    for m, cfg in cfgs.items():
        r = align_block_size(ids, cfg.block_m, e)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        outs[m] = torch.full((slots, n // 2), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[m] = (lambda out=outs[m], cfg=cfg, route=route: run_gemm(a, w, route, block_m=cfg.block_m, top_k=top_k, out=out,
                                                                     config=cfg, activation="silu", zero_nonlocal=False))
        fns[m]()
    torch.cuda.synchronize()
    same = {m: torch.equal(outs["24"], o) for m, o in outs.items()}
    runs = []
    for rep in range(3):
        order = list(MODES) if rep % 2 == 0 else list(MODES)[::-1]
        t = interleaved({m: fns[m] for m in order}, rounds=ROUNDS)
        runs.append({m: t[m].median_us() for m in MODES})
    over = int((counts > 24).sum())
    gemm_res.append({"name": name, "configs": {m: str(c) for m, c in cfgs.items()}, "us": runs, "bit_identical_to_24": same,
                     "experts_over_24": over})
    print(f"gate_up {name:10s} 24: " + " ".join(f"{r['24']:6.1f}" for r in runs) + "".join(
        f" | {m} " + " ".join(f"{r[m] / r['24'] - 1:+.1%}" for r in runs) + ("" if same[m] else " DIFF") for m in MODES if m != "24")
          + f" | >24 rows {over}", flush=True)
    json.dump({"layer": res, "gemm": gemm_res}, open(f"{OUT}/items2.json", "w"), indent=1)
