# ruff: noqa
"""ptxas -v: the dynamic (K = 7168 / 2048) configurations of the given blocks with one row width (block - 8)."""
import dataclasses, json, re, sys
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed.planner import configs_for
from chord_kernels.jit import CudaKernel
cs = []
for bm in map(int, sys.argv[1:]):
    for n, k in ((4096, 7168), (7168, 2048)):
        c = dataclasses.replace(configs_for(n, k, bm, "sm_90a")[0], row_widths=(bm - 8,))
        cs += [c, dataclasses.replace(c, tma_rows=True)]
        if c.topk_sum_twin(n):
            cs.append(c.topk_sum_twin(n))
cs = list(dict.fromkeys(cs))
def one(c):
    cub = CudaKernel(name="ptxas_check", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v")).compile("sm_90a")
    log = json.loads(cub.with_suffix(".json").read_text())["log"]
    return c, max(int(x) for x in re.findall(r"(\d+) bytes spill", log)), "C751" in log
with ThreadPoolExecutor(2) as ex:
    for c, sp, ser in ex.map(one, cs):
        print(("ok  " if not sp and not ser else "BAD ") + f"spills {sp}{' SERIALIZED' if ser else ''} {c}", flush=True)
