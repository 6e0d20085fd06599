# ruff: noqa
"""ptxas -v: the down GEMMs (N = 7168, K = 2048) with three 64-channel tiles per warpgroup (384-channel N tiles)."""
import dataclasses, json, re
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed.planner import configs_for
from chord_kernels.indexed.wgmma import max_stages
from chord_kernels.jit import CudaKernel
cs = []
for bm in (24, 32, 48, 56, 80):
    for c in configs_for(7168, 2048, bm, "sm_90a"):
        if c.mt != 2 or c.items != 1 or c.weight_ring:
            continue
        cs.append(dataclasses.replace(c, mt=3, row_widths=(), stages=max_stages(bm, 3, c.bk, items=c.items, weight_ring=c.weight_ring)))
cs = list(dict.fromkeys(cs))
def one(c):
    cub = CudaKernel(name="ptxas_check", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v")).compile("sm_90a")
    log = json.loads(cub.with_suffix(".json").read_text())["log"]
    return c, max(int(x) for x in re.findall(r"(\d+) bytes spill", log)), "C751" in log
with ThreadPoolExecutor(2) as ex:
    for c, sp, ser in ex.map(one, cs):
        print(("ok  " if not sp and not ser else "BAD ") + f"spills {sp}{' SERIALIZED' if ser else ''} {c}", flush=True)
