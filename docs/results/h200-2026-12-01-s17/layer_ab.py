"""Session 17: the whole layer (moe_experts, as chord_bench.layer runs it) with the planner's row
widths against the same without them, interleaved (CUDA graphs), outputs bit for bit."""
import json
import os

import torch

import chord_kernels
from chord_bench.layer import GLOBAL_EXPERTS, HIDDEN, TOP_K, LayerScenario
from chord_bench.problems import WeightSet
from chord_bench.timing import interleaved
from chord_kernels.indexed import api, choose_block_m, moe_experts, planner
from chord_kernels.indexed import wgmma as W
from chord_kernels.routing import align_block_size

MODE = ["on"]
_rw = W._row_widths


def set_mode(mode):
    if MODE[0] == mode:
        return
    MODE[0] = mode
    W._row_widths = _rw if mode == "on" else (lambda *a: ())
    for f in (W._choose_wgmma_config, planner.cached_plan, planner.configs_for, api._silu_mul_twin, api._tma_rows_twin):
        f.cache_clear()


dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
CASES = {"tp8_4096": LayerScenario(4096, "tp8"), "tp8_8192": LayerScenario(8192, "tp8"),
         "tp8_3072": LayerScenario(3072, "tp8"), "ep8_tok52": LayerScenario(52 * 384 // 8, "ep8"),
         "ep8_tok60": LayerScenario(60 * 384 // 8, "ep8"), "ep8_tok85": LayerScenario(85 * 384 // 8, "ep8"),
         "ep8_tok100": LayerScenario(100 * 384 // 8, "ep8"), "ep8_tok341": LayerScenario(16368, "ep8"),
         "ep8_tok171": LayerScenario(171 * 384 // 8, "ep8")}
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

    def layer(mode, hidden=hidden, w13=w13, w2=w2, rargs=rargs, tw=tw, ids=ids, bm=bm, emap=emap, outs=outs):
        def run():
            set_mode(mode)
            moe_experts(hidden, w13, w2, rargs, tw, ids, block_m=bm, expert_map=emap, out=outs[mode])
        return run

    fns = {m: layer(m) for m in ("on", "off")}
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = torch.equal(outs["on"], outs["off"])
    tm = interleaved(fns, rounds=int(os.environ.get("ROUNDS", "9")))
    us = {m: t.median_us() for m, t in tm.items()}
    set_mode("on")
    cfg = planner.configs_for(w13.n, w13.k, bm, "sm_90a")
    res.append({"case": name, "block_m": bm, "us": us, "identical": same, "gate_up_configs": [str(c) for c in cfg]})
    print(f"{name:11} bm {bm:3}  off {us['off']:7.1f}  on {us['on']:7.1f} ({us['on'] / us['off'] - 1:+.1%})  identical {same}",
          flush=True)
    json.dump(res, open(f"{OUT}/layer_ab.json", "w"), indent=1)
