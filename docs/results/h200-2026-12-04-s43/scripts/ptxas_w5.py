# ruff: noqa
"""ptxas -v of wide items of 32-token blocks (contiguous mode: blocks divide the 128-row alignment)."""
import dataclasses, re, sys
from pathlib import Path
from chord_kernels.indexed import wgmma as W
from chord_kernels.jit import CudaKernel
for n, k in ((4096, 7168), (7168, 2048)):
    for items, widths, regs in ((5, (4, 5), 224), (5, (3, 4, 5), 224), (5, (2, 4, 5), 224), (5, (1, 3, 4, 5), 224)):
        f = W.WgmmaConfig(block_m=32, mt=2, bk=128, stages=3, items=items, weight_ring=True, dynamic=True, widths=widths,
                          consumer_regs=regs, tma_rows=True, subnormal=True)
        kk = f.kernel()
        v = CudaKernel(name=kk.name + "_v", source=kk.source, entry=kk.entry, arch=kk.arch, flags=("-Xptxas", "-v"))
        path = v.compile("sm_90a")
        txt = Path(str(path).replace(".cubin", ".json")).read_text()
        print(n, k, items, widths, regs, "smem", f.smem_bytes(0), "spill", re.findall(r"(\d+) bytes spill stores", txt),
              "serialized", "C751" in txt, flush=True)
