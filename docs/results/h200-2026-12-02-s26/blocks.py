# ruff: noqa
"""Session 26: the routing block at 14-18 rows per expert now that gate_up's 24-48-token items run four
consumer warpgroups (session 25): the whole layer (fused_moe's steps: routing alignment excluded,
gate_up with SiLU fused, down with the top-k sum) at 24- against 32-token blocks, EP8 (vLLM's
all-gather dispatch, 48 of 384 experts), DeepEP low latency (48 experts, 256-row buffers) and TP8
(384 experts), interleaved CUDA graphs, three timings; each output against the reference.
argv[1] == precompile: compile only."""
import json, os, sys

from chord_bench.layer import LayerScenario, GLOBAL_EXPERTS, HIDDEN, TOP_K

SCEN = {f"ep8_tok{t}": LayerScenario(tokens=48 * t, parallel="ep8") for t in (14, 15, 16, 17, 18)}
SCEN |= {f"ep8_masked{t}": LayerScenario(tokens=48 * t, parallel="ep8_ll", capacity=256) for t in (14, 16, 18)}
SCEN |= {f"tp8_tok{t}": LayerScenario(tokens=48 * t, parallel="tp8") for t in (16, 17, 18)}  # tok_e = tokens / 48
BLOCKS = (24, 32)

if sys.argv[1:2] == ["precompile"]:
    import dataclasses
    from concurrent.futures import ThreadPoolExecutor
    from chord_kernels.indexed import planner as P
    ks = {}
    for s in SCEN.values():
        tok_e = (s.tokens if s.batched else s.local_slots) / s.local_experts
        for bm in BLOCKS:
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
        planned = min(choose_block_m(w13, s.tokens), choose_block_m(w2, s.tokens))
        groups = MaskedRows(counts, cap)
        for bm in BLOCKS:
            act = torch.empty(experts * cap, s.intermediate, dtype=torch.bfloat16, device=dev)
            out = torch.full((experts * cap, HIDDEN), float("nan"), dtype=torch.bfloat16, device=dev)
            def layer(act=act, out=out, bm=bm):
                gemm_masked(hidden, w13, groups, block_m=bm, out=act, activation="silu", expected_m=s.tokens / experts)
                gemm_masked(act, w2, groups, block_m=bm, out=out, expected_m=s.tokens / experts)
            fns[bm], outs[bm] = layer, out
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
        planned = min(choose_block_m(w13, s.local_slots), choose_block_m(w2, s.local_slots))
        routes = {}
        for bm in BLOCKS:
            r = align_block_size(ids, bm, GLOBAL_EXPERTS, emap)
            route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
            out = torch.full((s.tokens, HIDDEN), float("nan"), dtype=torch.bfloat16, device=dev)
            def layer(out=out, bm=bm, route=route):
                moe_experts(hidden, w13, w2, route, tw, ids, block_m=bm, expert_map=emap, out=out)
            fns[bm], outs[bm] = layer, out
        rows = None
        want = reference.moe_layer(hidden, (w13s.packed, w13s.scales), (w2s.packed, w2s.scales), tw, ids,
                                   global_num_experts=GLOBAL_EXPERTS, expert_map=emap).float()
        local = ids if emap is None else emap[ids.long()]
        hist = torch.bincount(local[local >= 0].reshape(-1).long(), minlength=w13.num_experts)
    for bm in BLOCKS:
        fns[bm]()
    torch.cuda.synchronize()
    errs = {}
    for bm in BLOCKS:
        got = outs[bm] if rows is None else outs[bm][rows]
        errs[bm] = ((got.float() - want).norm() / want.norm()).item()
        assert errs[bm] < 2e-2, (name, bm, errs[bm])
    runs = []
    for rep in range(3):
        order = list(BLOCKS) if rep % 2 == 0 else list(BLOCKS)[::-1]
        t = {bm: GraphTimer(fns[bm], launches=10) for bm in order}
        for _ in range(ROUNDS):
            for bm in order:
                t[bm].run(3)
        runs.append({bm: t[bm].median_us() for bm in order})
    over = {bm: int((hist > bm).sum()) for bm in BLOCKS}
    res.append({"scenario": name, "tokens": s.tokens, "parallel": s.parallel, "planned_block": planned,
                "us": [{str(b): v for b, v in r.items()} for r in runs], "rel_err": {str(b): e for b, e in errs.items()},
                "experts_over_block": {str(b): v for b, v in over.items()}, "max_rows": int(hist.max())})
    print(f"{name:14s} planned {planned} | 32: " + " ".join(f"{r[32]:7.1f}" for r in runs) + " | 24 vs 32: "
          + " ".join(f"{r[24] / r[32] - 1:+.1%}" for r in runs)
          + f" | experts >24 rows {over[24]}, >32 {over[32]}, max {int(hist.max())} | err {errs[24]:.1e} {errs[32]:.1e}", flush=True)
    json.dump(res, open(f"{OUT}/blocks.json", "w"), indent=1)
