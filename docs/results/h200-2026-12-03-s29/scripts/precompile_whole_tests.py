# ruff: noqa
"""The whole-stages tests' checked-bound twins."""
import dataclasses
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed.wgmma import WgmmaConfig, choose_wgmma_config
cfgs = set()
for n, k, bm, silu in [(7168, 2048, 56, False), (4096, 7168, 56, True), (7168, 2048, 24, False)]:
    c = choose_wgmma_config(n, k, bm, 43.0)
    for v in (c, dataclasses.replace(c, whole_stages=False)):
        cfgs.add(dataclasses.replace(v, silu_mul=True) if silu else v)
cfgs.add(WgmmaConfig(56, 2, 256, 3, whole_stages=True))
with ThreadPoolExecutor(2) as ex:
    list(ex.map(lambda c: c.kernel().compile("sm_90a"), cfgs))
print(len(cfgs), "whole-stage test kernels")
