# ruff: noqa
"""Compile the contiguous wide items of the GPU tests' shapes (with SiLU and one-fma twins). argv: threads."""
import dataclasses, sys
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, "packages/chord-kernels/tests")
from chord_kernels.indexed.wgmma import block_rows_wide_config
import test_grouped_gpu as T
cfgs = set()
for name, e, n, k, mean, kind in T.CONTIGUOUS_WIDE:
    c = block_rows_wide_config(n, k)
    for x in (c, dataclasses.replace(c, silu_mul=True) if c.fits_silu_mul(n) else c):
        cfgs |= {x, dataclasses.replace(x, subnormal=True)}
with ThreadPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else 2) as ex:
    list(ex.map(lambda c: c.kernel().compile("sm_90a"), cfgs))
print(len(cfgs), "kernels")
