# ruff: noqa
"""chord_bench with EP8's down (N = 7168, K = 2048) one-block items of 24 and 32 tokens on three consumer
warpgroups of two tiles (128 consumer registers). argv: chord_bench's."""
import dataclasses, runpy, sys
import chord_kernels.indexed.planner as P
import chord_kernels.indexed.wgmma as W
_choose = P.choose_wgmma_config
def _c3(n, k, block_m, tok_e=None):
    c = _choose(n, k, block_m, tok_e)
    if n == 7168 and k == 2048 and block_m <= 32 and c.consumers == 2 and c.mt == 2 and c.items == 1 and not c.n_run:
        st = W.max_stages(block_m, 2, c.bk, consumers=3, items=1, consumer_regs=128)
        return dataclasses.replace(c, consumers=3, consumer_regs=128, stages=min(st, 8), whole_stages=k % c.bk == 0)
    return c
P.choose_wgmma_config = _c3
sys.argv = ["chord_bench", *sys.argv[1:]]
runpy.run_module("chord_bench", run_name="__main__")
