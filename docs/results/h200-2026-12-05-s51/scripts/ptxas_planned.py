# ruff: noqa
"""ptxas of every planned four-consumer runs configuration and its twins (subnormal, tensor copies)."""
import dataclasses, json, os, re
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed import wgmma as W, planner as P
from chord_kernels.jit import CudaKernel
r = dataclasses.replace
todo = {}
for bm in P.BLOCK_MS + tuple(getattr(P, "WGMMA_BLOCK_MS", ())):
    for n, k in ((7168, 256), (4096, 256), (1024, 256), (7168, 128)):
        for cfg in P.configs_for(n, k, bm, "sm_90a"):
            if isinstance(cfg, W.WgmmaConfig) and cfg.n_run:
                for sub in (False, True):
                    for tma in (False, True):
                        todo[r(cfg, subnormal=sub, tma_rows=tma)] = f"{n}x{k}/{bm}"
print(len(todo), "configs")
kernels = {c: CudaKernel(name="s47_ptxas", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v")) for c in todo}
with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
    cubins = dict(zip(kernels, pool.map(lambda k: k.compile("sm_90a"), kernels.values())))
bad = 0
for c, cb in cubins.items():
    log = json.loads(cb.with_suffix(".json").read_text())["log"]
    spills = max(int(x) for x in re.findall(r"(\d+) bytes spill", log))
    ser = "C7512" in log or "C7511" in log
    bad += bool(spills or ser)
    print(f"{todo[c]:14s} bm={c.block_m:3d}x{c.items} c{c.consumers} mt{c.mt} st{c.stages} rw{c.row_widths} ws{int(c.whole_stages)} sub{int(c.subnormal)} tma{int(c.tma_rows)} spills {spills} ser {ser}", flush=True)
print("bad", bad)
