# ruff: noqa
"""Session 44: compile (CPU) what the new GPU tests launch on an H200: chord-bench's small EP scenario at 45 and
100 rows per expert in routing order (gate_up 256 x 512, down 512 x 128, 8 experts)."""
import sys, types
from concurrent.futures import ThreadPoolExecutor

import torch
from chord_kernels import indexed
from chord_kernels.indexed.api import _tma_rows_twin
from chord_kernels.indexed.planner import cached_plan, config_for_rows, weight_config
from chord_kernels.routing import align_block_size

ks = {}
for rows in (8 * 45, 8 * 100):
    e = 8
    w13 = types.SimpleNamespace(n=256, k=512, num_experts=e, profile="h200_ep8", small_scales=True)
    w2 = types.SimpleNamespace(n=512, k=128, num_experts=e, profile="h200_ep8", small_scales=True)
    bm = min(indexed.choose_block_m(w13, rows), indexed.choose_block_m(w2, rows))
    for seed in range(6):
        ids = torch.randint(0, e, (rows, 1), generator=torch.Generator().manual_seed(seed), dtype=torch.int32)
        r = align_block_size(ids, bm, e)
        cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
        for w, ro in ((w13, False), (w2, True), (w2, False)):
            c = weight_config(cached_plan(w.n, w.k, bm, cap, 132, "sm_90a", config_for_rows(w.n, w.k, bm, "sm_90a", rows / e)).config, w)
            for cc in ([c] + ([weight_config(_tma_rows_twin(c), w)] if ro else [])):
                if cc.kernel().source not in ks:
                    print(rows, bm, cap, w.n, w.k, cc)
                ks[cc.kernel().source] = cc.kernel()
with ThreadPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else 2) as ex:
    list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
print(len(ks), "kernels")
