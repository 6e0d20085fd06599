# ruff: noqa: B023  (the timed closures run within their loop iteration)
"""Session 19: the TP8 layer with the down's decode-kernel tiles of ``short_k_config`` (16- and
24-token blocks: 256 channels, two CTAs per SM; 32: 512 channels, one CTA; strided) against
``choose_config``'s 128-channel tiles, interleaved CUDA graphs, outputs bit for bit; then TP8's down
alone at a smaller block with other wide tiles. PART=24_32 (layer_short_k.json: 512-1024 tokens,
then the down at 16-token blocks) and PART=16 (layer_b16.json: 192-432 tokens, then the down at
8-token blocks) are the two runs; the first ran while ``short_k_config`` still took K and its
"old" mode returned ``choose_config``'s tiles, which ``None`` gives now."""
import dataclasses
import json
import os
import sys

import torch

import chord_kernels
from chord_bench.layer import GLOBAL_EXPERTS, HIDDEN, TOP_K, LayerScenario
from chord_bench.problems import WeightSet
from chord_bench.timing import interleaved
from chord_kernels.indexed import api, choose_block_m, moe_experts, planner
from chord_kernels.indexed.api import run_gemm
from chord_kernels.indexed.decode import DecodeConfig
from chord_kernels.routing import align_block_size

PRE = sys.argv[1:2] == ["precompile"]
PART = os.environ.get("PART", "24_32")
LAYER_TOKENS, DOWN_BM, DOWN_TOKENS, NAME = {
    "24_32": ((512, 640, 768, 896, 1024), 16, (256, 384), "layer_short_k"),
    "16": ((192, 256, 320, 384, 432), 8, (96, 160), "layer_b16")}[PART]
SHAPES = {16: {"w4m4c2": (4, 4, 2), "w8m2c2": (8, 2, 2), "w8m4c1": (8, 4, 1)},
          8: {"w4m4c2": (4, 4, 2), "w8m4c1": (8, 4, 1), "w8m2c2": (8, 2, 2), "w4m8c1": (4, 8, 1)}}[DOWN_BM]


def down_variants():
    out = {"plan": planner.cached_plan(7168, 256, DOWN_BM, 10_000, 132, "sm_90a", None).config}
    for tag, (warps, mt, ctas) in SHAPES.items():
        cfg = DecodeConfig(block_m=DOWN_BM, warps=warps, mt=mt, bk=256, stages=2, ctas_per_sm=ctas, schedule="strided")
        out[tag + "S"] = cfg
        out[tag + ("B" if DOWN_BM == 8 else "")] = dataclasses.replace(cfg, schedule="balanced")
    return out


if PRE:
    for c in down_variants().values():
        c.kernel().compile("sm_90a")
    sys.exit()

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
_new = planner.short_k_config
MODE = ["new"]


def set_mode(mode):
    if MODE[0] != mode:
        MODE[0] = mode
        old = (lambda n, bm: None) if PART == "24_32" else (lambda n, bm: None if bm == 16 else _new(n, bm))
        planner.short_k_config = _new if mode == "new" else old
        for f in (planner.cached_plan, planner.configs_for, api._silu_mul_twin, api._tma_rows_twin):
            f.cache_clear()


s0 = LayerScenario(1024, "tp8")
w13s = WeightSet.random(s0.local_experts, 2 * s0.intermediate, HIDDEN, seed=1, device=dev)
w2s = WeightSet.random(s0.local_experts, HIDDEN, s0.intermediate, seed=2, device=dev)
w13 = chord_kernels.pack("indexed", w13s.packed, w13s.scales, profile="h200_tp8")
w2 = chord_kernels.pack("indexed", w2s.packed, w2s.scales, profile="h200_tp8")
res = {"layer": [], f"down_b{DOWN_BM}": []}
for tokens in LAYER_TOKENS:
    gen = torch.Generator(device=dev).manual_seed(tokens)
    hidden = (torch.randn(tokens, HIDDEN, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    probs = torch.softmax(torch.randn(tokens, GLOBAL_EXPERTS, device=dev, generator=gen), dim=-1)
    tw, ids = probs.topk(TOP_K, dim=-1)
    tw, ids = tw.float().contiguous(), ids.to(torch.int32).contiguous()
    bm = min(choose_block_m(w13, tokens * TOP_K), choose_block_m(w2, tokens * TOP_K))
    r = align_block_size(ids, bm, GLOBAL_EXPERTS)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    outs = {m: torch.empty(tokens, HIDDEN, dtype=torch.bfloat16, device=dev) for m in ("new", "old")}

    def layer(mode):
        def f():
            set_mode(mode)
            moe_experts(hidden, w13, w2, route, tw, ids, block_m=bm, out=outs[mode])
        return f

    fns = {m: layer(m) for m in ("new", "old")}
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = torch.equal(outs["new"], outs["old"])
    us = {m: t.median_us() for m, t in interleaved(fns, rounds=9).items()}
    set_mode("new")
    res["layer"].append({"tokens": tokens, "block_m": bm, "us": us, "identical": same})
    print(f"layer tp8_{tokens:<5} bm {bm}: choose_config {us['old']:7.1f}  short_k_config {us['new']:7.1f} "
          f"({us['new'] / us['old'] - 1:+.1%})  identical {same}", flush=True)
    json.dump(res, open(f"{OUT}/{NAME}.json", "w"), indent=1)

for tokens in DOWN_TOKENS:  # TP8's down alone at DOWN_BM-token blocks
    gen = torch.Generator(device=dev).manual_seed(tokens)
    ids = torch.rand(tokens, GLOBAL_EXPERTS, generator=gen, device=dev).argsort(dim=1)[:, :TOP_K].to(torch.int32)
    twf = torch.rand(tokens * TOP_K, generator=gen, device=dev)
    a = (torch.randn(tokens * TOP_K, 256, generator=gen, device=dev) * 0.5).to(torch.bfloat16)
    r = align_block_size(ids, DOWN_BM, GLOBAL_EXPERTS)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    vs = down_variants()
    outs = {t: torch.empty(tokens * TOP_K, HIDDEN, dtype=torch.bfloat16, device=dev) for t in vs}
    fns = {t: (lambda cfg=cfg, out=outs[t]: run_gemm(a, w2, route, block_m=DOWN_BM, top_k=1, topk_weights=twf, out=out,
                                                     config=None if t == "plan" else cfg, zero_nonlocal=False))
           for t, cfg in vs.items()}
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = all(torch.equal(outs["plan"], o) for o in outs.values())
    us = {t: x.median_us() for t, x in interleaved(fns, rounds=9).items()}
    res[f"down_b{DOWN_BM}"].append({"tokens": tokens, "us": us, "identical": same, "configs": {t: str(c) for t, c in vs.items()}})
    print(f"down  tp8_{tokens:<5} bm {DOWN_BM}: " + "  ".join(f"{t} {v:6.1f}" for t, v in us.items()) + f"  identical {same}",
          flush=True)
    json.dump(res, open(f"{OUT}/{NAME}.json", "w"), indent=1)
