# ruff: noqa
"""Compile (into $CHORD_CACHE_DIR) the 16-row wide items in every form their source takes (one tile or two per
warpgroup, static or dynamic schedule, SiLU fused or not, one-fma twins), the grouped family's precompile list,
and what the tests and sanitize_contig.py launch at 32-row blocks."""
import dataclasses, itertools, os, sys
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, os.path.dirname(__file__))
from sanitize_contig import SHAPES
from chord_kernels.grouped import api as g
from chord_kernels.indexed.wgmma import block_rows_wide_configs

found = {k.source: k for k in g.kernels("sm_90a")}
shapes = [(4096, 7168), (7168, 2048), (72, 1056), (256, 512), *[(n, k) for _, n, k, _ in SHAPES]]
for (n, k), silu, sub in itertools.product(shapes, (False, True), (False, True)):
    for c in block_rows_wide_configs(n, k):
        c = dataclasses.replace(c, silu_mul=silu and c.fits_silu_mul(n), subnormal=sub)
        found.setdefault(c.kernel().source, c.kernel())
print(len(found), "kernels", flush=True)
with ThreadPoolExecutor(2) as pool:
    list(pool.map(lambda kern: kern.compile("sm_90a"), found.values()))
print("done")
