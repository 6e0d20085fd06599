"""Compile on the CPU the kernels session 65's GPU tests add (the 16-token wide items: test_indexed_wgmma_gpu.py's
wide16 cases, test_indexed_gpu.py's layer at 130 rows per expert, test_grouped_gpu.py's masked mode at 130 and 145
rows per group), both scale forms, so the device compiles none. argv: [threads]"""
import sys
import types
from concurrent.futures import ThreadPoolExecutor

from chord_kernels.indexed.api import launch_plan
from chord_kernels.indexed.wgmma import wide16_config

ARCH, SMS = "sm_90a", 132
# (N, K, block_m, tok_e or None for wide16_config, activation, block_rows)
LAUNCHES = [(4096, 7168, 16, None, None, False), (7168, 2048, 16, None, None, False),
            (200, 1056, 16, None, None, False), (7168, 256, 16, None, None, False),
            (512, 1024, 16, 130.0, "silu", False), (1024, 256, 16, 130.0, None, False),
            (1024, 256, 16, 130.0, None, True), (512, 2048, 16, 130.0, None, True), (512, 2048, 16, 256.0, None, False),
            (512, 2048, 24, 145.0, None, True), (512, 2048, 24, 256.0, None, False)]
ks = {}
for n, k, bm, tok_e, act, rows in LAUNCHES:
    for small in (True, False):
        w = types.SimpleNamespace(n=n, k=k, num_experts=48, profile="h200_ep8", small_scales=small)
        config = wide16_config(n, k) if tok_e is None else None
        kern = launch_plan(w, bm, 64, SMS, ARCH, config=config, tok_e=tok_e, activation=act,
                           block_rows=rows).config.kernel()
        ks[kern.source] = kern
with ThreadPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else 2) as ex:
    list(ex.map(lambda kk: kk.compile(ARCH), ks.values()))
print(len(ks), "kernels")
