# ruff: noqa
"""chord_bench with the decode kernel's strided downs (N = 7168) on the split tail. argv: chord_bench's."""
import dataclasses, runpy, sys
import chord_kernels.indexed.planner as P
_short = P.short_k_config
def _short_k(n, block_m):
    c = _short(n, block_m)
    return dataclasses.replace(c, schedule="split_tail") if c is not None and n == 7168 and c.schedule == "strided" else c
P.short_k_config = _short_k
sys.argv = ["chord_bench", *sys.argv[1:]]
runpy.run_module("chord_bench", run_name="__main__")
