# ruff: noqa
"""ptxas -v: gate_up (K = 7168, dynamic) configurations of the one-block items and 64 x 2 on 128-K stages."""
import dataclasses, json, re
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed.planner import configs_for
from chord_kernels.indexed.wgmma import max_stages
from chord_kernels.jit import CudaKernel
cs = []
for bm in (96, 104, 64):
    c = configs_for(4096, 7168, bm, "sm_90a")[0]
    v = dataclasses.replace(c, bk=128, stages=max_stages(bm, 2, 128, items=c.items))
    cs += [v, dataclasses.replace(v, silu_mul=True)]
def one(c):
    cub = CudaKernel(name="ptxas_check", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v")).compile("sm_90a")
    log = json.loads(cub.with_suffix(".json").read_text())["log"]
    return c, max(int(x) for x in re.findall(r"(\d+) bytes spill", log)), "C751" in log
with ThreadPoolExecutor(2) as ex:
    for c, sp, ser in ex.map(one, cs):
        print(("ok  " if not sp and not ser else "BAD ") + f"spills {sp}{' SERIALIZED' if ser else ''} {c}", flush=True)
