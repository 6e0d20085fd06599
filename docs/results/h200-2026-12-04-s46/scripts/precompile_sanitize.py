# ruff: noqa
"""Compile (into $CHORD_CACHE_DIR) the kernels sanitize_contig.py launches: for its shapes, every configuration the
contiguous mode may plan at its 64-row block and the wide items, plain and SiLU-fused, one-fma twins (its scales)."""
import dataclasses, os, sys
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, os.path.dirname(__file__))
from sanitize_contig import SHAPES
from chord_kernels.indexed import WgmmaConfig
from chord_kernels.indexed.planner import configs_for
from chord_kernels.indexed.wgmma import block_rows_wide_config

found = {}
for _, n, k, _ in SHAPES:
    for cfg in (*[dataclasses.replace(c, tma_rows=True) for c in configs_for(n, k, 64, "sm_90a") if isinstance(c, WgmmaConfig)],
                block_rows_wide_config(n, k)):
        for c in (cfg, dataclasses.replace(cfg, silu_mul=True) if cfg.fits_silu_mul(n) else cfg):
            found[dataclasses.replace(c, subnormal=True)] = None
print(len(found), "kernels", flush=True)
with ThreadPoolExecutor(2) as pool:
    list(pool.map(lambda c: c.kernel().compile("sm_90a"), found))
print("done")
