"""Compile on the CPU the kernels session 66's GPU tests launch beyond the planned ones (`chord-kernels
precompile`): test_indexed_cta_pair_gpu.py's pairs by hand and its ring configurations, both scale forms, fused
SiLU-and-mul and plain, paired and not, so the device compiles none. argv: [threads]"""
import dataclasses
import sys
import types
from concurrent.futures import ThreadPoolExecutor

from chord_kernels.indexed.api import launch_plan
from chord_kernels.indexed.wgmma import WgmmaConfig, choose_wgmma_config

ARCH, SMS = "sm_90a", 132
by_hand = [dataclasses.replace(choose_wgmma_config(4096, 7168, 80, 64.0), cta_pair=True),
           dataclasses.replace(choose_wgmma_config(4096, 7168, 64, 341.0), cta_pair=True)]
rings = [WgmmaConfig(16, 2, 128, 3, items=8, dynamic=d, weight_ring=True, cta_pair=True) for d in (False, True)]
rings.append(WgmmaConfig(48, 2, 128, 3, items=3, dynamic=True, weight_ring=True, cta_pair=True))
ks = {}
for base in by_hand + rings:
    for cfg in (base, dataclasses.replace(base, cta_pair=False)):
        for small in (True, False):
            for act in (None, "silu"):
                n = 4096 if cfg in by_hand or not cfg.weight_ring or cfg.block_m != 16 else 1856
                if act and n % 128:
                    continue
                w = types.SimpleNamespace(n=n, k=7168, num_experts=48, profile="h200_ep8", small_scales=small)
                kern = launch_plan(w, cfg.block_m, 64, SMS, ARCH, config=cfg, activation=act).config.kernel()
                ks[kern.source] = kern
with ThreadPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else 2) as ex:
    list(ex.map(lambda kk: kk.compile(ARCH), ks.values()))
print(len(ks), "kernels")
