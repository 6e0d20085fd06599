# ruff: noqa
"""Session 26: epilogue passes of 16 tokens (epi_groups=2) free 8.7 KB at 32-token blocks, room for a
fourth 256-K stage. EP8's down (K = 2048) and gate_up (K = 7168, SiLU fused) at 16 and 20 rows per
expert and TP8's gate_up at 1024 tokens: the planned configuration against the deeper ring (and, for
the down, epi_groups=2 at the planned depth, and 24-token blocks; for gate_up two warpgroups); and at
43 rows per expert (56-token blocks) the K loop also compiled for 48 (and 40) tokens;
interleaved, three timings each with fresh graphs; bit for bit where the bits must agree (not across
block sizes). Then the layer with the deeper ring for the down GEMMs on against off.
argv[1] == precompile: compile only."""
import dataclasses, json, os, re, sys, time
from pathlib import Path

from chord_kernels.indexed import wgmma as W, planner as P
from chord_kernels.indexed.wgmma import LIST_RESERVE, SMEM_LIMIT, max_stages

# (name, experts, n, k, slots, top_k, silu)
CASES = [
    ("ep8_tok16_down", 48, 7168, 2048, 768, 1, False),
    ("ep8_tok20_down", 48, 7168, 2048, 960, 1, False),
    ("ep8_tok16_gate_up", 48, 4096, 7168, 768, 1, True),
    ("ep8_tok20_gate_up", 48, 4096, 7168, 960, 1, True),
    ("tp8_1024_gate_up", 384, 512, 7168, 8192, 8, True),
    ("ep8_tok43_down", 48, 7168, 2048, 2064, 1, False),
    ("ep8_tok43_gate_up", 48, 4096, 7168, 2064, 1, True),
]
from chord_bench.layer import LayerScenario
EXTRA = {"ep8_tok16": LayerScenario(tokens=768, parallel="ep8", capacity=0),
         "ep8_tok20": LayerScenario(tokens=960, parallel="ep8", capacity=0)}
LAYERS = ["ep8_tok16", "ep8_tok20", "ep8_masked16", "tp8_1024", "ep8_tok12", "ep8_tok43"]


def block_for(e, n, k, slots):
    """choose_block_m's rule without a packed weight (the profile by expert count)."""
    from chord_kernels.indexed.heuristics import choose_block_m
    fake = type("Fake", (), {"num_experts": e, "profile": "h200_tp8" if e == 384 else "h200_ep8"})()
    return choose_block_m(fake, slots)


def deep(c, consumers=2):
    """The configuration with 16-token epilogue passes and as many stages as then fit, or None
    where that adds no stage."""
    if not isinstance(c, W.WgmmaConfig) or c.items != 1 or c.mt != 2 or c.weight_ring or c.n_run:
        return None
    regs = 216 if consumers == 2 else c.consumer_regs
    s = max_stages(c.block_m, c.mt, c.bk, consumers=consumers, consumer_regs=regs, epi_groups=2)
    base = dataclasses.replace(c, consumers=consumers, consumer_regs=regs, row_widths=() if consumers == 2 else c.row_widths)
    plain = max_stages(c.block_m, c.mt, c.bk, consumers=consumers, consumer_regs=regs)
    return dataclasses.replace(base, stages=s, epi_groups=2) if s > plain else None


def case_configs():
    for name, e, n, k, slots, top_k, silu in CASES:
        bm = block_for(e, n, k, slots)
        c = P._rows_config(n, k, bm, slots / e) if P._uses_wgmma(bm, k, "sm_90a") else None
        if c is None:
            continue
        c = dataclasses.replace(c, silu_mul=False)
        cfgs = {"plan": c, "deep": deep(c)}
        if c.consumers == 2:
            cfgs["epi2"] = dataclasses.replace(c, epi_groups=2)
        else:
            two = W.WgmmaConfig(block_m=bm, mt=2, stages=max_stages(bm, 2, 256), dynamic=c.dynamic)
            cfgs["two"] = two
        if bm == 56:  # 43 rows per expert: narrower wgmmas for the items of up to 40 or 48 rows
            cfgs = {"plan": c, "rw48": dataclasses.replace(c, row_widths=(48,)),
                    "rw40_48": dataclasses.replace(c, row_widths=(40, 48))}
        if bm == 32 and k <= 2048:
            cfgs["bm24"] = P._rows_config(n, k, 24, 0.0)
        if silu:
            cfgs = {t: (dataclasses.replace(x, silu_mul=True) if x is not None else None) for t, x in cfgs.items()}
        yield (name, e, n, k, slots, top_k, silu, bm), {t: x for t, x in cfgs.items() if x is not None}


# The rule, for the layer: planned gate_up one-block items at K >= 4096 -> four consumers.
_orig = W._choose_wgmma_config
RULE = {"on": False}


def _ruled(n, k, block_m, rows):
    c = _orig(n, k, block_m, rows)
    if RULE["on"] and k < 4096:
        f = deep(c)
        if f is not None:
            return f
    return c


def set_rule(on):
    RULE["on"] = on
    for f in (P.cached_plan, P.configs_for, P.shape_workspace_bytes):
        f.cache_clear()


W._choose_wgmma_config = _ruled


if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    from chord_kernels.jit import CudaKernel
    ks = {}
    for _, cfgs in case_configs():
        for x in cfgs.values():
            ks[x.kernel().source] = x.kernel()
    # the layers, rule on and off: the configs of their blocks with SiLU, tensor-copy-row and
    # top-k-sum twins (the planner's default_configs has none of the twins)
    from chord_bench.layer import LAYER_SCENARIOS
    from chord_kernels.indexed.heuristics import choose_block_m
    for on in (False, True):
        set_rule(on)
        for name in LAYERS:
            s = EXTRA.get(name) or LAYER_SCENARIOS[name]
            e = s.local_experts
            fake = type("Fake", (), {"num_experts": e, "profile": s.profile})()
            slots = s.tokens if s.batched else s.local_slots
            bm = choose_block_m(fake, slots)
            for n, k in ((2 * s.intermediate, 7168), (7168, s.intermediate)):
                for cfg in P.configs_for(n, k, bm, "sm_90a"):
                    if not isinstance(cfg, W.WgmmaConfig):
                        continue
                    twins = [cfg]
                    if k == 7168 and cfg.fits_silu_mul(n):
                        twins.append(dataclasses.replace(cfg, silu_mul=True))
                    if s.batched:
                        twins += [dataclasses.replace(t, tma_rows=True) for t in twins]
                    elif k != 7168 and cfg.topk_sum_twin(n) is not None:
                        twins.append(cfg.topk_sum_twin(n))
                    for t in twins:
                        ks[t.kernel().source] = t.kernel()
    set_rule(False)
    verbose = {}
    for _, cfgs in case_configs():
        for t, x in cfgs.items():
            if t not in ("plan", "bm24"):
                kk = x.kernel()
                verbose[str(x)] = CudaKernel(name=kk.name + "_v", source=kk.source, entry=kk.entry, arch=kk.arch, flags=("-Xptxas", "-v"))
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
        paths = dict(zip(verbose, ex.map(lambda k: k.compile("sm_90a"), verbose.values())))
    for cfg, path in paths.items():
        txt = Path(str(path).replace(".cubin", ".json")).read_text()
        print(cfg, "spill", re.findall(r"(\d+) bytes spill stores", txt), "C751", "C751" in txt)
    print(len(ks), "kernels compiled", flush=True)
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels import reference
from chord_kernels.indexed import MaskedRows, choose_block_m, gemm_masked, moe_experts
from chord_kernels.indexed.api import run_gemm
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.layer import LAYER_SCENARIOS, GLOBAL_EXPERTS, HIDDEN, TOP_K
from chord_bench.problems import WeightSet
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
REPEATS = int(os.environ.get("REPEATS", "3"))
ROUNDS = int(os.environ.get("ROUNDS", "9"))
PARTS = os.environ.get("PARTS", "gemm").split(",")
res = {"gemm": [], "layer": []}


def save():
    json.dump(res, open(f"{OUT}/deep.json", "w"), indent=1)


def timed(fns, repeats):
    """Median µs per fn for each repeat (fresh graphs, the order reversed every other repeat)."""
    out = []
    for r in range(repeats):
        order = list(fns) if r % 2 == 0 else list(fns)[::-1]
        t = interleaved({k: fns[k] for k in order}, rounds=ROUNDS)
        out.append({k: t[k].median_us() for k in fns})
    return out


if "gemm" in PARTS:
    for (name, e, n, k, slots, top_k, silu, bm), cfgs in case_configs():
        g = torch.Generator(device=dev).manual_seed(n + k + slots)
        w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev),
                               profile="h200_tp8" if e == 384 else "h200_ep8")
        assert choose_block_m(w, slots) == bm
        tokens = slots // top_k
        a = (torch.randn(tokens, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
        tw = torch.rand(slots, generator=g, device=dev)
        routes = {}
        for b in {c.block_m for c in cfgs.values()}:
            r = align_block_size(ids, b, e)
            routes[b] = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        outs, fns = {}, {}
        for tag, cfg in cfgs.items():
            plain = dataclasses.replace(cfg, silu_mul=False)
            outs[tag] = torch.full((slots, n // 2 if silu else n), float("nan"), dtype=torch.bfloat16, device=dev)
            fns[tag] = (lambda out=outs[tag], cfg=plain: run_gemm(a, w, routes[cfg.block_m], block_m=cfg.block_m, top_k=top_k, out=out, config=cfg,
                        topk_weights=tw if "down" in name else None, activation="silu" if silu else None, zero_nonlocal=False))
            fns[tag]()
        torch.cuda.synchronize()
        same = {t: torch.equal(outs["plan"], o) for t, o in outs.items()}
        runs = timed(fns, REPEATS)
        rec = {"name": name, "block_m": bm, "configs": {t: str(c) for t, c in cfgs.items()}, "us": runs, "bit_identical": same}
        res["gemm"].append(rec)
        line = f"{name:20s} bm {bm:2d} plan st{cfgs['plan'].stages} c{cfgs['plan'].consumers} " + " ".join(f"{x['plan']:6.1f}" for x in runs)
        for t in cfgs:
            if t != "plan":
                line += f" | {t} " + " ".join(f"{x[t] / x['plan'] - 1:+.1%}" for x in runs) + f" st{cfgs[t].stages}" + ("" if same[t] else " DIFF")
        print(line, flush=True)
        save()

weights = {}
if "layer" in PARTS:
    for name in LAYERS:
        s = EXTRA.get(name) or LAYER_SCENARIOS[name]
        if s.profile not in weights:
            experts, inter = s.local_experts, s.intermediate
            w13s = WeightSet.random(experts, 2 * inter, HIDDEN, seed=1, device=dev)
            w2s = WeightSet.random(experts, HIDDEN, inter, seed=2, device=dev)
            weights[s.profile] = (w13s, w2s, chord_kernels.pack("indexed", w13s.packed, w13s.scales, profile=s.profile),
                                  chord_kernels.pack("indexed", w2s.packed, w2s.scales, profile=s.profile))
        w13s, w2s, w13, w2 = weights[s.profile]
        gen = torch.Generator(device=dev).manual_seed(s.tokens)
        fns, outs = {}, {}
        if s.batched:
            experts, cap = s.local_experts, s.capacity
            hidden = (torch.randn(experts * cap, HIDDEN, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
            pick = torch.randint(0, experts, (s.tokens,), device=dev, generator=gen)
            counts = torch.bincount(pick, minlength=experts).clamp_max(cap).to(torch.int32)
            bm = min(choose_block_m(w13, s.tokens), choose_block_m(w2, s.tokens))
            groups = MaskedRows(counts, cap)
            for on in (False, True):
                act = torch.empty(experts * cap, s.intermediate, dtype=torch.bfloat16, device=dev)
                out = torch.full((experts * cap, HIDDEN), float("nan"), dtype=torch.bfloat16, device=dev)
                def layer(act=act, out=out):
                    gemm_masked(hidden, w13, groups, block_m=bm, out=act, activation="silu", expected_m=s.tokens / experts)
                    gemm_masked(act, w2, groups, block_m=bm, out=out, expected_m=s.tokens / experts)
                fns["on" if on else "off"], outs[on] = layer, out
            rows = (torch.arange(cap, device=dev)[None, :] < counts[:, None].long()).reshape(-1).nonzero().reshape(-1)
            want = reference.moe_layer(hidden[rows], (w13s.packed, w13s.scales), (w2s.packed, w2s.scales),
                                       torch.ones(rows.numel(), 1, device=dev), (rows // cap).to(torch.int32).reshape(-1, 1)).float()
        else:
            hidden = (torch.randn(s.tokens, HIDDEN, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
            probs = torch.softmax(torch.randn(s.tokens, GLOBAL_EXPERTS, device=dev, generator=gen), dim=-1)
            tw, ids = probs.topk(TOP_K, dim=-1)
            tw, ids = tw.float().contiguous(), ids.to(torch.int32).contiguous()
            emap = s.expert_map(dev)
            bm = min(choose_block_m(w13, s.local_slots), choose_block_m(w2, s.local_slots))
            r = align_block_size(ids, bm, GLOBAL_EXPERTS, emap)
            route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
            for on in (False, True):
                out = torch.full((s.tokens, HIDDEN), float("nan"), dtype=torch.bfloat16, device=dev)
                def layer(out=out):
                    moe_experts(hidden, w13, w2, route, tw, ids, block_m=bm, expert_map=emap, out=out)
                fns["on" if on else "off"], outs[on] = layer, out
            rows = None
            want = reference.moe_layer(hidden, (w13s.packed, w13s.scales), (w2s.packed, w2s.scales), tw, ids,
                                       global_num_experts=GLOBAL_EXPERTS, expert_map=emap).float()
        # Each graph is captured with its rule: the planner is asked at capture time.
        graphs = {}
        ran = {}
        for tag in ("off", "on"):
            set_rule(tag == "on")
            fns[tag]()
            torch.cuda.synchronize()
            tok_e = (s.tokens if s.batched else s.local_slots) / w13.num_experts
            ran[tag] = str(P.config_for_rows(w2.n, w2.k, bm, "sm_90a", tok_e) or P._choose(w2.n, w2.k, bm, 1, 132, "sm_90a"))
            graphs[tag] = fns[tag]
        runs = []
        for rep in range(2):
            order = ("off", "on") if rep == 0 else ("on", "off")
            t = {}
            for tag in order:  # capture each graph under its rule, then time them interleaved
                set_rule(tag == "on")
                from chord_bench.timing import GraphTimer
                t[tag] = GraphTimer(fns[tag], launches=10)
            set_rule(False)
            for _ in range(ROUNDS):
                for tag in order:
                    t[tag].run(3)
            runs.append({tag: t[tag].median_us() for tag in order})
        a_off, a_on = (outs[False], outs[True]) if rows is None else (outs[False][rows], outs[True][rows])
        same = torch.equal(a_off, a_on)
        err = ((a_on.float() - want).norm() / want.norm()).item()
        res["layer"].append({"scenario": name, "block_m": bm, "us": runs, "bit_identical": same, "rel_err": err, "gate_up_config": ran})
        print(f"layer {name:22s} bm {bm:3d} off " + " ".join(f"{x['off']:7.1f}" for x in runs) + " | on "
              + " ".join(f"{x['on'] / x['off'] - 1:+.1%}" for x in runs) + f" | bits {'same' if same else 'DIFF'} err {err:.2e}"
              + ("" if ran["on"] != ran["off"] else " (rule inactive)"), flush=True)
        save()
