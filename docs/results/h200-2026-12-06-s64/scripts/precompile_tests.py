"""Compile on the CPU the kernels of test_indexed_wgmma_gpu.py's whole-stage and per-K-group bit-identity tests
(their configurations as the tests build them, every capacity their routing can give, both scale forms), so the
device compiles none. argv: [threads]"""
import dataclasses
import sys
import types
from concurrent.futures import ThreadPoolExecutor

from chord_kernels.indexed.api import launch_plan
from chord_kernels.indexed.wgmma import PREFILL_ROW_WIDTHS, choose_wgmma_config

ARCH, SMS, E = "sm_90a", 132, 48
WIDE = [(4096, 7168, 80, 64.0, True), (7168, 2048, 80, 64.0, False), (512, 7168, 96, 85.0, True),
        (512, 7168, 104, 90.0, True), (4096, 7168, 104, 90.0, False), (7168, 2048, 96, 85.0, False),
        (4096, 7168, 64, 150.0, True), (7168, 2048, 64, 150.0, False)]
WHOLE = [(7168, 2048, 56, False), (4096, 7168, 56, True), (7168, 2048, 24, False)]


def wide_configs(n, k, bm, tok_e):
    planned = choose_wgmma_config(n, k, bm, tok_e)
    per_step = dataclasses.replace(planned, whole_stages=False, shift_pairs=planned.items == 1,
                                   row_widths=planned.row_widths or PREFILL_ROW_WIDTHS)
    per_group = dataclasses.replace(planned, whole_stages=True, shift_pairs=False,
                                    row_widths=planned.row_widths if planned.items == 1 else ())
    return [per_step, per_group] + [dataclasses.replace(per_group, shift_pairs=True)] * (planned.items == 1)


cases = [(n, k, bm, tok_e, silu, wide_configs(n, k, bm, tok_e)) for n, k, bm, tok_e, silu in WIDE]
for n, k, bm, silu in WHOLE:
    c = choose_wgmma_config(n, k, bm, 43.0)
    cases.append((n, k, bm, 43.0, silu, [c, dataclasses.replace(c, whole_stages=False)]))
ks = {}
for n, k, bm, tok_e, silu, configs in cases:
    rows = int(4 * 48 * tok_e)
    for small in (True, False):
        w = types.SimpleNamespace(n=n, k=k, num_experts=E, profile="h200_ep8", small_scales=small)
        for cap in range(max(1, rows // bm - 8), (rows + 4 * E * bm) // bm + 2):
            for cfg in configs:
                kern = launch_plan(w, bm, cap, SMS, ARCH, config=cfg, activation="silu" if silu else None).config.kernel()
                ks[kern.source] = kern
with ThreadPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else 2) as ex:
    list(ex.map(lambda kk: kk.compile(ARCH), ks.values()))
print(len(ks), "kernels")
