"""Session 18 (from s17/layer_ab.py): the TP8 layer (moe_experts, as chord_bench.layer runs it) with
row widths on the down GEMM at K = 256 (ROW_WIDTHS_MIN_K = 0, "on") against the shipped rule ("off"),
interleaved (CUDA graphs), outputs bit for bit."""
import json, os, sys
import torch
import chord_kernels
from chord_bench.layer import GLOBAL_EXPERTS, HIDDEN, TOP_K, LayerScenario
from chord_bench.problems import WeightSet
from chord_bench.timing import interleaved
from chord_kernels.indexed import api, choose_block_m, moe_experts, planner, wgmma as W
from chord_kernels.routing import align_block_size

MODE = ["off"]
_min_k = W.ROW_WIDTHS_MIN_K


def set_mode(mode):
    if MODE[0] == mode:
        return
    MODE[0] = mode
    W.ROW_WIDTHS_MIN_K = 0 if mode == "on" else _min_k
    for f in (W._choose_wgmma_config, planner.cached_plan, planner.configs_for, api._silu_mul_twin, api._tma_rows_twin):
        f.cache_clear()


dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
CASES = {f"tp8_{t}": LayerScenario(t, "tp8") for t in (3584, 4096, 5120, 8192, 12288)}
res = []
W_ = {}
for name, s in CASES.items():
    if s.profile not in W_:
        W_.clear()
        w13s = WeightSet.random(s.local_experts, 2 * s.intermediate, HIDDEN, seed=1, device=dev)
        w2s = WeightSet.random(s.local_experts, HIDDEN, s.intermediate, seed=2, device=dev)
        W_[s.profile] = (chord_kernels.pack("indexed", w13s.packed, w13s.scales, profile=s.profile),
                         chord_kernels.pack("indexed", w2s.packed, w2s.scales, profile=s.profile))
    w13, w2 = W_[s.profile]
    gen = torch.Generator(device=dev).manual_seed(s.tokens)
    hidden = (torch.randn(s.tokens, HIDDEN, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    probs = torch.softmax(torch.randn(s.tokens, GLOBAL_EXPERTS, device=dev, generator=gen), dim=-1)
    tw, ids = probs.topk(TOP_K, dim=-1)
    tw, ids = tw.float().contiguous(), ids.to(torch.int32).contiguous()
    emap = s.expert_map(dev)
    bm = min(choose_block_m(w13, s.local_slots), choose_block_m(w2, s.local_slots))
    route = align_block_size(ids, bm, GLOBAL_EXPERTS, emap)
    rargs = (route.sorted_token_ids, route.expert_ids, route.num_tokens_post_padded)
    outs = {m: torch.empty(s.tokens, HIDDEN, dtype=torch.bfloat16, device=dev) for m in ("on", "off")}

    def layer(mode):
        def f():
            set_mode(mode)
            moe_experts(hidden, w13, w2, rargs, tw, ids, block_m=bm, expert_map=emap, out=outs[mode])
        return f

    fns = {m: layer(m) for m in ("on", "off")}
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = torch.equal(outs["on"], outs["off"])
    tm = interleaved(fns, rounds=int(os.environ.get("ROUNDS", "9")))
    us = {m: t.median_us() for m, t in tm.items()}
    set_mode("on")
    cfg = planner.configs_for(w2.n, w2.k, bm, "sm_90a")
    set_mode("off")
    res.append({"case": name, "block_m": bm, "us": us, "identical": same, "down_configs_on": [str(c) for c in cfg]})
    print(f"{name:11} bm {bm:3}  off {us['off']:7.1f}  on {us['on']:7.1f} ({us['on'] / us['off'] - 1:+.1%})  identical {same}",
          flush=True)
    json.dump(res, open(f"{OUT}/layer_k256.json", "w"), indent=1)
