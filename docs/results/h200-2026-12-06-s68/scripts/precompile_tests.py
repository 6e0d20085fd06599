"""Compile on the CPU the kernels session 68's GPU test launches beyond the planned ones (`chord-kernels
precompile`): test_prefetched_rows_bit_identical's configurations with and without the prefetch, both scale forms,
fused SiLU-and-mul and plain. argv: [threads]"""
import dataclasses
import sys
import types
from concurrent.futures import ThreadPoolExecutor

from chord_kernels.indexed.api import launch_plan
from chord_kernels.indexed.wgmma import choose_wgmma_config

ARCH, SMS = "sm_90a", 132
ks = {}
for n, k, block_m, tok_e in ((512, 7168, 96, 170.7), (512, 7168, 64, 256.0), (4096, 7168, 80, 64.0), (4096, 7168, 72, 56.0), (512, 7168, 72, 53.3), (512, 4160, 104, 85.3)):
    base = choose_wgmma_config(n, k, block_m, tok_e)
    for cfg in (base, dataclasses.replace(base, prefetch_rows=False)):
        for small in (True, False):
            for act in (None, "silu"):
                w = types.SimpleNamespace(n=n, k=k, num_experts=48, profile="h200_ep8", small_scales=small)
                kern = launch_plan(w, cfg.block_m, 64, SMS, ARCH, config=cfg, activation=act).config.kernel()
                ks[kern.source] = kern
with ThreadPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else 2) as ex:
    list(ex.map(lambda kk: kk.compile(ARCH), ks.values()))
print(len(ks), "kernels")
