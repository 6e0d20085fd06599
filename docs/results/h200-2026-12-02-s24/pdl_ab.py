# ruff: noqa
"""Session 24 (needs pdl.patch): programmatic dependent launch (PDL) on / off, interleaved CUDA graphs, the same code.
The layer (chord_bench.layer's Chord callables: moe_experts / two gemm_masked) with a tiny torch kernel after each
call (so a layer never overlaps the previous call's kernels: as after vLLM's own kernels), and each GEMM of the
GEMM harness's kind (indexed.gemm, graphs of back-to-back calls). Outputs compared bit for bit (on vs off) and
the layer against the reference. argv: scenario ids (default: all layer scenarios)."""
import json, os, sys, time
import torch
import chord_kernels
from chord_kernels import reference
from chord_kernels.jit import driver
from chord_kernels.indexed import MaskedRows, choose_block_m, gemm_masked, moe_experts
from chord_kernels import indexed
from chord_kernels.routing import align_block_size
from chord_bench.layer import LAYER_SCENARIOS, GLOBAL_EXPERTS, HIDDEN, TOP_K
from chord_bench.problems import WeightSet
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "7"))
names = sys.argv[1:] or list(LAYER_SCENARIOS)
weights = {}
marker = torch.zeros(1, device=dev)


def with_pdl(on, fn, mark):
    def run():
        prev = driver.set_dependent_launch(on)
        try:
            fn()
            if mark:
                marker.add_(1)
        finally:
            driver.set_dependent_launch(prev)
    return run


res = []
for name in names:
    s = LAYER_SCENARIOS[name]
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
            fns[f"layer_{'on' if on else 'off'}"] = with_pdl(on, layer, True)
            outs[on] = out
        valid = (torch.arange(cap, device=dev)[None, :] < counts[:, None].long()).reshape(-1)
        rows = valid.nonzero().reshape(-1)
        want = reference.moe_layer(hidden[rows], (w13s.packed, w13s.scales), (w2s.packed, w2s.scales),
                                   torch.ones(rows.numel(), 1, device=dev), (rows // cap).to(torch.int32).reshape(-1, 1)).float()
        pick_rows = rows
    else:
        hidden = (torch.randn(s.tokens, HIDDEN, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
        probs = torch.softmax(torch.randn(s.tokens, GLOBAL_EXPERTS, device=dev, generator=gen), dim=-1)
        tw, ids = probs.topk(TOP_K, dim=-1)
        tw, ids = tw.float().contiguous(), ids.to(torch.int32).contiguous()
        emap = s.expert_map(dev)
        slots = s.local_slots
        bm = min(choose_block_m(w13, slots), choose_block_m(w2, slots))
        r = align_block_size(ids, bm, GLOBAL_EXPERTS, emap)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        for on in (False, True):
            out = torch.full((s.tokens, HIDDEN), float("nan"), dtype=torch.bfloat16, device=dev)
            def layer(out=out):
                moe_experts(hidden, w13, w2, route, tw, ids, block_m=bm, expert_map=emap, out=out)
            fns[f"layer_{'on' if on else 'off'}"] = with_pdl(on, layer, True)
            outs[on] = out
        want = reference.moe_layer(hidden, (w13s.packed, w13s.scales), (w2s.packed, w2s.scales), tw, ids,
                                   global_num_experts=GLOBAL_EXPERTS, expert_map=emap).float()
        pick_rows = None
        # the GEMM harness's kind: plain indexed.gemm, graphs of back-to-back calls
        gbm13 = choose_block_m(w13, slots)
        gbm2 = choose_block_m(w2, slots)
        for tag, w, wbm, a, k in (("gate_up", w13, gbm13, hidden, TOP_K), ("down", w2, gbm2, None, 1)):
            rr = align_block_size(ids, wbm, GLOBAL_EXPERTS, emap)
            if a is None:
                a = (torch.randn(s.tokens * TOP_K, s.intermediate, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
            indexed.prepare(w, wbm, dev)
            cap_ = indexed.routing_capacity(rr.sorted_token_ids, rr.expert_ids, wbm)
            launch = indexed.plan(w, block_m=wbm, capacity=cap_, device=dev, tok_e=slots / w.num_experts)
            ws = indexed.new_workspace(launch.workspace_bytes, dev)
            for on in (False, True):
                o = torch.empty(s.tokens * TOP_K, w.n, dtype=torch.bfloat16, device=dev)
                def g(a=a, w=w, rr=rr, wbm=wbm, k=k, o=o, cfg=launch.config, ws=ws):
                    indexed.gemm(a, w, rr.sorted_token_ids, rr.expert_ids, rr.num_tokens_post_padded, block_m=wbm,
                                 top_k=k, out=o, config=cfg, workspace=ws)
                fns[f"{tag}_{'on' if on else 'off'}"] = with_pdl(on, g, False)
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    a_off, a_on = (outs[False], outs[True]) if pick_rows is None else (outs[False][pick_rows], outs[True][pick_rows])
    same = torch.equal(a_off, a_on)
    err = ((a_on.float() - want).norm() / want.norm()).item()
    t0 = time.time()
    us = {k: t.median_us() for k, t in interleaved(fns, rounds=ROUNDS).items()}
    rec = {"scenario": name, "block_m": bm, "us": us, "bit_identical": same, "rel_err": err}
    res.append(rec)
    line = f"{name:22s} bm {bm:3d} layer off {us['layer_off']:7.1f} on {us['layer_on']:7.1f} ({us['layer_on'] / us['layer_off'] - 1:+.1%})"
    for tag in ("gate_up", "down"):
        if f"{tag}_off" in us:
            line += f" | {tag} {us[f'{tag}_off']:6.1f} -> {us[f'{tag}_on']:6.1f} ({us[f'{tag}_on'] / us[f'{tag}_off'] - 1:+.1%})"
    print(line + f" | bits {'same' if same else 'DIFF'} err {err:.2e} ({time.time() - t0:.0f} s)", flush=True)
    json.dump(res, open(f"{OUT}/pdl_ab.json", "w"), indent=1)
