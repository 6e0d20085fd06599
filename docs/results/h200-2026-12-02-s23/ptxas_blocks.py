# ruff: noqa
"""ptxas -v on the default configurations of the given blocks (argv) for the four Kimi GEMMs, with
the top-k-sum and tensor-copy twins."""
import dataclasses, json, re, sys
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed import WgmmaConfig
from chord_kernels.indexed.planner import configs_for
from chord_kernels.jit import CudaKernel
cs = []
for bm in map(int, sys.argv[1:]):
    for n, k in ((512, 7168), (7168, 256), (4096, 7168), (7168, 2048)):
        for c in configs_for(n, k, bm, "sm_90a"):
            if isinstance(c, WgmmaConfig):
                cs.append(c)
                if c.topk_sum_twin(n):
                    cs.append(c.topk_sum_twin(n))
                cs.append(dataclasses.replace(c, tma_rows=True))
cs = list(dict.fromkeys(cs))
print(len(cs), "configs", flush=True)
def one(c):
    cub = CudaKernel(name="ptxas_check", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v")).compile("sm_90a")
    log = json.loads(cub.with_suffix(".json").read_text())["log"]
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill", log)]
    regs = [int(x) for x in re.findall(r"Used (\d+) registers", log)]
    return c, max(spills), "C751" in log, max(regs)
with ThreadPoolExecutor(2) as ex:
    for c, sp, ser, r in ex.map(one, cs):
        print(("ok  " if not sp and not ser else "BAD ") + f"regs {r} spills {sp}{' SERIALIZED' if ser else ''} {c}", flush=True)
