# ruff: noqa
"""ptxas of the kernels whose producers the contiguous branch strains: masked-mode block 40 runs and block 56
SiLU, the wide items 24 x 7 and 32 x 5 (sm_90a)."""
import json, re, os
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed import WgmmaConfig
from chord_kernels.indexed.wgmma import block_rows_wide_config
from chord_kernels.jit import CudaKernel
import dataclasses
w = block_rows_wide_config(4096, 7168)
cfgs = [WgmmaConfig(block_m=40, mt=2, bk=256, stages=5, consumers=2, items=1, dynamic=False, tma_rows=True, row_widths=(32,), n_run=7, pingpong=True, whole_stages=True),
        WgmmaConfig(block_m=56, mt=2, bk=256, stages=3, consumers=2, items=1, silu_mul=True, dynamic=True, tma_rows=True, row_widths=(40, 48), whole_stages=True),
        w, dataclasses.replace(w, silu_mul=True),
        WgmmaConfig(block_m=24, mt=2, bk=128, stages=3, consumers=2, items=7, weight_ring=True, dynamic=True, tma_rows=True, widths=(6, 7), consumer_regs=224)]
def go(c):
    k = CudaKernel(name="spill_check4", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v"))
    log = json.loads(k.compile("sm_90a").with_suffix(".json").read_text())["log"]
    sp = re.findall(r'(\d+) bytes spill', log)
    return f"{c.block_m}x{c.items} silu={c.silu_mul} run={c.n_run} spills {sp}"
with ThreadPoolExecutor(2) as p:
    for line in p.map(go, cfgs): print(line)
