# ruff: noqa
"""ptxas of every kernel the grouped family precompiles for sm_90a (grouped.api.kernels' configs)."""
import dataclasses, json, os, re
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.grouped import api as g
from chord_kernels.indexed import WgmmaConfig
from chord_kernels.jit import CudaKernel
seen = []
orig = WgmmaConfig.kernel
def rec(self):
    seen.append(self); return orig(self)
WgmmaConfig.kernel = rec
g.kernels("sm_90a")
configs = list(dict.fromkeys(seen))
print(len(configs), "wgmma configs", flush=True)
kernels = [CudaKernel(name="spill_check2", source=c.source(), entry=orig(c).entry, flags=("-Xptxas", "-v")) for c in configs]
with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
    cubins = list(pool.map(lambda k: k.compile("sm_90a"), kernels))
bad = 0
for c, cb in zip(configs, cubins):
    log = json.loads(cb.with_suffix(".json").read_text())["log"]
    spills = max(int(x) for x in re.findall(r"(\d+) bytes spill", log))
    ser = "C7512" in log or "C7511" in log
    if spills or ser or c.reads_contiguous_rows and c.consumer_regs > 216:
        print(c, "spills", spills, "serialized", ser, flush=True)
    bad += bool(spills or ser)
print("bad", bad)
