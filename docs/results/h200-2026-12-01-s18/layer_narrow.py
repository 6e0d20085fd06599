# ruff: noqa: B023  (the timed closures run within their loop iteration)
"""Session 18: the layer at 9-16 rows per expert with the new 24-token blocks (one block per work
item on 256-K stages, what the planner now picks) against the 32-token blocks planned before:
moe_experts (TP8, EP8) as chord_bench.layer runs it, and the DeepEP low-latency format (gate_up
with SiLU-and-mul, down) through gemm_masked, interleaved CUDA graphs, outputs bit for bit."""
import json
import os

import torch

import chord_kernels
from chord_bench.layer import GLOBAL_EXPERTS, HIDDEN, TOP_K, LayerScenario
from chord_bench.problems import WeightSet
from chord_bench.timing import interleaved
from chord_kernels.indexed import MaskedRows, choose_block_m, gemm_masked, moe_experts
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "9"))
res = []
W_ = {}


def weights(profile, local, inter):
    if profile not in W_:
        W_.clear()
        w13s = WeightSet.random(local, 2 * inter, HIDDEN, seed=1, device=dev)
        w2s = WeightSet.random(local, HIDDEN, inter, seed=2, device=dev)
        W_[profile] = (chord_kernels.pack("indexed", w13s.packed, w13s.scales, profile=profile),
                       chord_kernels.pack("indexed", w2s.packed, w2s.scales, profile=profile))
    return W_[profile]


def report(name, fns, outs, extra):
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = torch.equal(outs["b24"], outs["b32"])
    tm = interleaved(fns, rounds=ROUNDS)
    us = {m: t.median_us() for m, t in tm.items()}
    res.append({"case": name, "us": us, "identical": same, **extra})
    print(f"{name:16} b32 {us['b32']:7.1f}  b24 {us['b24']:7.1f} ({us['b24'] / us['b32'] - 1:+.1%})  identical {same}",
          flush=True)
    json.dump(res, open(f"{OUT}/layer_narrow.json", "w"), indent=1)


CASES = [(f"tp8_{t}", LayerScenario(t, "tp8")) for t in (456, 512, 640, 768)]
CASES += [(f"ep8_tok{r}", LayerScenario(48 * r, "ep8")) for r in (10, 12, 14, 16)]
if os.environ.get("CASES"):  # "ep8_tok15,..." with SEEDS draws each
    CASES = [(c, LayerScenario(48 * int(c[7:]), "ep8") if c.startswith("ep8") else LayerScenario(int(c[4:]), "tp8"))
             for c in os.environ["CASES"].split(",")]
SEEDS = [int(x) for x in os.environ.get("SEEDS", "0").split(",")]
CASES = [(f"{name}_s{seed}" if seed else name, s, seed) for name, s in CASES for seed in SEEDS]
for name, s, seed in CASES:
    w13, w2 = weights(s.profile, s.local_experts, s.intermediate)
    gen = torch.Generator(device=dev).manual_seed(s.tokens + 1000 * seed)
    hidden = (torch.randn(s.tokens, HIDDEN, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    probs = torch.softmax(torch.randn(s.tokens, GLOBAL_EXPERTS, device=dev, generator=gen), dim=-1)
    tw, ids = probs.topk(TOP_K, dim=-1)
    tw, ids = tw.float().contiguous(), ids.to(torch.int32).contiguous()
    emap = s.expert_map(dev)
    bm = min(choose_block_m(w13, s.local_slots), choose_block_m(w2, s.local_slots))
    assert bm == 24, (name, bm)
    fns, outs = {}, {}
    for tag, b in (("b24", 24), ("b32", 32)):
        route = align_block_size(ids, b, GLOBAL_EXPERTS, emap)
        rargs = (route.sorted_token_ids, route.expert_ids, route.num_tokens_post_padded)
        outs[tag] = torch.empty(s.tokens, HIDDEN, dtype=torch.bfloat16, device=dev)
        fns[tag] = (lambda b=b, rargs=rargs, out=outs[tag]:
                    moe_experts(hidden, w13, w2, rargs, tw, ids, block_m=b, expert_map=emap, out=out))
    counts = torch.bincount(emap[ids.long()].flatten() + 1, minlength=s.local_experts + 1)[1:] if emap is not None \
        else torch.bincount(ids.long().flatten(), minlength=s.local_experts)
    report(name, fns, outs, {"tok_e": s.local_slots / s.local_experts, "experts_past_24": int((counts > 24).sum()),
                             "experts_past_32": int((counts > 32).sum())})
    print(f"{'':16} experts past 24 rows {int((counts > 24).sum())} of {s.local_experts}", flush=True)
# The DeepEP low-latency format: [48, max_m, H] buffers, Poisson(expected) rows per expert.
for expected in [int(x) for x in os.environ.get("MASKED", "10,12,16").split(",") if x]:
    w13, w2 = weights("h200_ep8", 48, 2048)
    max_m = 128
    gen = torch.Generator(device=dev).manual_seed(expected)
    counts = torch.poisson(torch.full((48,), float(expected), device=dev), generator=gen).clamp(max=max_m).to(torch.int32)
    rows = MaskedRows(counts, max_m)
    hidden = (torch.randn(48 * max_m, HIDDEN, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    fns, outs = {}, {}
    for tag, b in (("b24", 24), ("b32", 32)):
        act = torch.empty(48 * max_m, 2048, dtype=torch.bfloat16, device=dev)
        outs[tag] = torch.zeros(48 * max_m, HIDDEN, dtype=torch.bfloat16, device=dev)

        def f(b=b, act=act, out=outs[tag]):
            gemm_masked(hidden, w13, rows, block_m=b, out=act, activation="silu", expected_m=expected)
            gemm_masked(act, w2, rows, block_m=b, out=out, expected_m=expected)
        fns[tag] = f
    valid = (torch.arange(max_m, device=dev)[None, :] < counts[:, None]).reshape(-1)
    name = f"masked{expected}"
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = torch.equal(outs["b24"][valid], outs["b32"][valid])  # rows past the counts: unspecified
    tm = interleaved(fns, rounds=ROUNDS)
    us = {m: t.median_us() for m, t in tm.items()}
    res.append({"case": name, "us": us, "identical": same, "expected_m": expected})
    print(f"{name:16} b32 {us['b32']:7.1f}  b24 {us['b24']:7.1f} ({us['b24'] / us['b32'] - 1:+.1%})  identical {same}",
          flush=True)
    json.dump(res, open(f"{OUT}/layer_narrow.json", "w"), indent=1)
