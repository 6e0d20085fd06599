# ruff: noqa
"""ptxas -v: the EP8 down (N = 7168, K = 2048) at 24/32/48/56-token blocks with one 64-channel tile per warpgroup."""
import dataclasses, json, re
from chord_kernels.indexed.planner import configs_for
from chord_kernels.indexed.wgmma import max_stages
from chord_kernels.jit import CudaKernel
for bm in (24, 32, 48, 56):
    c = [c for c in configs_for(7168, 2048, bm, "sm_90a") if c.items == 1][0]
    v = dataclasses.replace(c, mt=1, row_widths=(), stages=min(8, max_stages(bm, 1, 256)))
    cub = CudaKernel(name="ptxas_check", source=v.source(), entry=v.kernel().entry, flags=("-Xptxas", "-v")).compile("sm_90a")
    log = json.loads(cub.with_suffix(".json").read_text())["log"]
    sp = max(int(x) for x in re.findall(r"(\d+) bytes spill", log))
    print(("ok  " if not sp and "C751" not in log else "BAD ") + f"spills {sp} {'SERIALIZED' if 'C751' in log else ''} {v}", flush=True)
