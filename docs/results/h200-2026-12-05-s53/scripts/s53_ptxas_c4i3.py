# ruff: noqa
"""Session 53: ptxas of EP8 gate_up's 24-token items on four consumer warpgroups at up to 3 / 4 blocks."""
import dataclasses, json, os, re, sys
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed import wgmma as W
from chord_kernels.jit import CudaKernel
r = dataclasses.replace
base = W._choose_wgmma_config(4096, 7168, 24, -1)
print("base", base)
todo = {"base": r(base, subnormal=True)}
for items in (3, 4):
    for regs in (104, 112):
        c = r(base, items=items, consumer_regs=regs, subnormal=True)
        st = W.max_stages(24, 2, 256, consumers=4, items=items, consumer_regs=regs)
        c = r(c, stages=min(st, 2))
        todo[f"i{items}/r{regs}/st{c.stages}"] = c
        todo[f"i{items}/r{regs}/w13/st{c.stages}"] = r(c, widths=(1, 3) if items == 3 else (1, 2, 4))
kernels = {t: CudaKernel(name="s53_ptxas", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v")) for t, c in todo.items()}
with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
    cubins = dict(zip(kernels, pool.map(lambda k: k.compile("sm_90a"), kernels.values())))
for t, cb in cubins.items():
    log = json.loads(cb.with_suffix(".json").read_text())["log"]
    spills = max(int(x) for x in re.findall(r"(\d+) bytes spill", log))
    ser = "C7512" in log or "C7511" in log
    regs = re.findall(r"Used (\d+) registers", log)
    print(f"{t:24s} spills {spills:4d} serialized {ser} regs {regs}", flush=True)
