# ruff: noqa
import dataclasses, json, os, re, sys
sys.path.insert(0, os.path.dirname(__file__))
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.jit import CudaKernel
from variants import BASES, variants, r
todo = {}
for name, base in BASES.items():
    for t, c in variants(base).items():
        twins = {"": c}
        if "dn" in name:
            twins = {"tma": r(c, tma_rows=True, subnormal=True)}
        else:
            twins = {"sub": r(c, subnormal=True)}
        for tw, cc in twins.items():
            todo[f"{name}/{t}/{tw}"] = cc
kernels = {t: CudaKernel(name="s47_ptxas", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v")) for t, c in todo.items()}
with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
    cubins = dict(zip(kernels, pool.map(lambda k: k.compile("sm_90a"), kernels.values())))
for t, cb in cubins.items():
    log = json.loads(cb.with_suffix(".json").read_text())["log"]
    spills = max(int(x) for x in re.findall(r"(\d+) bytes spill", log))
    ser = "C7512" in log or "C7511" in log
    c = todo[t]
    print(f"{t:28s} spills {spills:4d} serialized {ser} stages {c.stages} smem {c.smem_bytes(0)}", flush=True)
