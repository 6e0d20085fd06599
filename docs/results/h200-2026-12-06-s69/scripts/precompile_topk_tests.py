# ruff: noqa
"""Session 69: compile (all at once, several nvcc) the kernels test_indexed_topk_sum_gpu.py launches: each case's
planned configuration, its single-slot and epilogue-sum twins, by slot and in routing order, the planner's choice
under the case's expert map; run from packages/chord-kernels (CUDA for the routing; no kernel runs)."""
import sys, zlib
sys.path.insert(0, "tests")
import torch
from test_indexed_topk_sum_gpu import TCASES, _problem
from chord_kernels import hardware
from chord_kernels.indexed import plan, routing_capacity
from chord_kernels.indexed.api import launch_plan
from chord_kernels.indexed.wgmma import WgmmaConfig, choose_wgmma_config
from chord_kernels.jit import compile_all
from chord_kernels.ops import local_topk_sum

ks = {}
for tcase in TCASES:
    case = tcase.case
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(case.name.encode()))
    raw, pw, ids, expert_map, args, act, tw = _problem(case, gen)
    cap = routing_capacity(args[0], args[1], case.block_m)
    base = plan(pw, block_m=case.block_m, capacity=cap, config=tcase.config).config
    tok_e = case.rows * case.top_k / (expert_map.numel() if expert_map is not None else case.experts)
    cands = [(tcase.config, expert_map is not None and hasattr(WgmmaConfig, "topk_singles_twin")), (base, False)]
    if isinstance(base, WgmmaConfig):
        singles = getattr(base, "topk_singles_twin", lambda n: None)(case.n)  # (session 69's patch only)
        cands += [(singles, False), (base.topk_sum_twin(case.n), False)]
    for cfg, singles in cands:
        if cfg is None and not singles and cfg is not tcase.config:
            continue
        for ro in (False, True) if tcase.routing_order else (False,):
            extra = {"topk_singles": singles and cfg is None and case.n % 8 == 0} if singles else {}
            try:
                launch = launch_plan(pw, case.block_m, cap, 132, "sm_90a", config=cfg, tok_e=tok_e, block_rows=ro, **extra)
            except Exception as e:
                print("skip", case.name, cfg, e)
                continue
            k = launch.config.kernel()
            ks[(k.source, k.flags)] = k
for bm in (48,):
    graph = [WgmmaConfig(bm, 2, 256, 3, topk_sum=True)]
    if hasattr(WgmmaConfig, "topk_singles_twin"):
        graph.append(WgmmaConfig(bm, 2, 256, 3, topk_singles=True))
    for c in graph:
        k = c.kernel()  # graph test (one-fma twin too)
        ks[(k.source, k.flags)] = k
        import dataclasses
        k = dataclasses.replace(c, subnormal=True).kernel(); ks[(k.source, k.flags)] = k
print(len(ks), "kernels", flush=True)
compile_all(list(ks.values()), "sm_90a")
print("done")
