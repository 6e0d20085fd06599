# ruff: noqa
"""Session 61 (CPU): compile what s61_b.sh launches besides group_commits_ab.py's kernels -- the planned and
per-K-group configurations of test_wide_items_commit_per_k_group_bit_identical, both scale forms, so
that the device compiles nothing. argv: [threads]"""
import dataclasses, sys, types
from concurrent.futures import ThreadPoolExecutor

from chord_kernels.indexed.api import launch_plan
from chord_kernels.indexed.wgmma import PREFILL_ROW_WIDTHS, choose_wgmma_config

CASES = [(4096, 7168, 80, 64.0, True), (7168, 2048, 80, 64.0, False), (512, 7168, 96, 85.0, True),
         (512, 7168, 104, 90.0, True), (7168, 2048, 96, 85.0, False), (4096, 7168, 64, 150.0, True),
         (7168, 2048, 64, 150.0, False)]
ks = {}
for n, k, bm, tok_e, silu in CASES:
    planned = choose_wgmma_config(n, k, bm, tok_e)
    per_step = dataclasses.replace(planned, whole_stages=False, shift_pairs=planned.items == 1,
                                   row_widths=planned.row_widths or PREFILL_ROW_WIDTHS)
    group = dataclasses.replace(planned, whole_stages=True, shift_pairs=False,
                                row_widths=planned.row_widths if planned.items == 1 else ())
    for cfg in (per_step, group):
        for small in (True, False):
            w = types.SimpleNamespace(n=n, k=k, num_experts=48, profile="h200_ep8", small_scales=small)
            for cap in range(1, 400):  # the plan's grid follows the capacity; the kernel source does not
                c = launch_plan(w, bm, cap, 132, "sm_90a", config=cfg, activation="silu" if silu else None).config
                ks[c.kernel().source] = c.kernel()
with ThreadPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else 2) as ex:
    list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
print(len(ks), "kernels")
