# ruff: noqa
"""ptxas of the four-consumer runs (one tile each) at every TP8 down block, with / without row widths,
gathered and tensor-copy rows."""
import dataclasses, json, os, re, sys
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed import wgmma as W
from chord_kernels.jit import CudaKernel
r = dataclasses.replace
todo = {}
for bm in (40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128):
    base = W._shape_wgmma_config(7168, 256, bm, 0)
    if not base.n_run:
        print(bm, "no runs", base); continue
    for rw, regs in ((True, 96), (False, 96)):
        c = r(base, consumers=4, mt=1, pingpong=False, consumer_regs=regs, row_widths=base.row_widths if rw else ())
        while c.smem_bytes(0) + W.LIST_RESERVE > W.SMEM_LIMIT and c.stages > 2:
            c = r(c, stages=c.stages - 1)
        for tma in (False, True):
            todo[f"{bm}x{base.items}/rw{base.row_widths if rw else ()}/r{regs}/tma{int(tma)}"] = r(c, tma_rows=tma, subnormal=True)
kernels = {t: CudaKernel(name="s47_ptxas", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v")) for t, c in todo.items()}
with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
    cubins = dict(zip(kernels, pool.map(lambda k: k.compile("sm_90a"), kernels.values())))
for t, cb in cubins.items():
    log = json.loads(cb.with_suffix(".json").read_text())["log"]
    spills = max(int(x) for x in re.findall(r"(\d+) bytes spill", log))
    ser = "C7512" in log or "C7511" in log
    c = todo[t]
    print(f"{t:32s} spills {spills:4d} serialized {ser} stages {c.stages}", flush=True)
