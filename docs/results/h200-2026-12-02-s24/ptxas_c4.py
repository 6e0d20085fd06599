# ruff: noqa
"""ptxas -v of four consumer warpgroups of two tiles (512-channel N tiles, per-K-step commits) at the middle shapes."""
import dataclasses, json, re, sys
from pathlib import Path
from chord_kernels.indexed import wgmma as W
from chord_kernels.indexed.wgmma import LIST_RESERVE, SMEM_LIMIT, WgmmaConfig
from chord_kernels.jit import CudaKernel
CASES = [("ep8_tok16_gate_up", 48, 4096, 7168, 768, 1, 32), ("ep8_tok16_down", 48, 7168, 2048, 768, 1, 32),
         ("ep8_tok43_gate_up", 48, 4096, 7168, 2064, 1, 56), ("ep8_tok8_gate_up", 48, 4096, 7168, 384, 1, 24)]
REGS = int(sys.argv[1]) if len(sys.argv) > 1 else 112
CONS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
import os
EXTRA = tuple(os.environ.get("EXTRA", "").split())
for name, e, n, k, slots, top_k, bm in CASES:
    c = W.choose_wgmma_config(n, k, bm, slots / e)
    fits = [s for s in range(2, 9) if dataclasses.replace(c, consumers=CONS, mt=2, consumer_regs=REGS, stages=s).smem_bytes(0) + LIST_RESERVE <= SMEM_LIMIT]
    if not fits:
        print(name, "no stage count fits"); continue
    f = dataclasses.replace(c, consumers=CONS, mt=2, consumer_regs=REGS, stages=max(fits))
    kk = f.kernel()
    v = CudaKernel(name=kk.name + "_v", source=kk.source, entry=kk.entry, arch=kk.arch, flags=("-Xptxas", "-v", *EXTRA))
    path = v.compile("sm_90a")
    log = json.loads(Path(str(path).replace(".cubin", ".json")).read_text())
    txt = json.dumps(log)
    spill = re.findall(r"(\d+) bytes spill stores", txt)
    regs = re.findall(r"Used (\d+) registers", txt)
    warn = "C751" in txt
    print(f"{name:18s} stages {f.stages} regs {regs} spill {spill} serialized {warn}", flush=True)
