# ruff: noqa
"""ptxas -v of three consumer warpgroups of two tiles (384-channel N tiles) on EP8's down (K = 2048)."""
import dataclasses, json, re, sys, os
from pathlib import Path
from chord_kernels.indexed import wgmma as W
from chord_kernels.indexed.wgmma import LIST_RESERVE, SMEM_LIMIT, TOPK_LIST_RESERVE
from chord_kernels.jit import CudaKernel
REGS = [int(x) for x in sys.argv[1].split(",")] if len(sys.argv) > 1 else [128, 144, 152]
BMS = [int(x) for x in sys.argv[2].split(",")] if len(sys.argv) > 2 else [24, 32, 48, 56]
for bm in BMS:
    base = W.choose_wgmma_config(7168, 2048, bm, 0.0 if bm == 24 else None)
    for regs in REGS:
        for topk in (False, True):
            for whole in (False, True):
                res = 512 if topk else LIST_RESERVE
                fits = [s for s in range(2, 9) if dataclasses.replace(base, consumers=3, consumer_regs=regs, stages=s, topk_sum=topk).smem_bytes(0) + res <= SMEM_LIMIT]
                if not fits:
                    print(bm, regs, topk, "no stage count fits"); continue
                f = dataclasses.replace(base, consumers=3, consumer_regs=regs, stages=max(fits), topk_sum=topk, whole_stages=whole, subnormal=True)
                kk = f.kernel()
                src = kk.source
                if whole:  # per-group commits with three warpgroups (the rule says per step)
                    src = src.replace("kCommitPerStep == true", "kCommitPerStep == false")
                else:
                    continue
                v = CudaKernel(name=kk.name + "_v", source=src, entry=kk.entry, arch=kk.arch, flags=("-Xptxas", "-v"))
                try:
                    path = v.compile("sm_90a")
                except Exception as e:
                    print(bm, regs, topk, whole, "FAILED", str(e)[-300:]); continue
                txt = Path(str(path).replace(".cubin", ".json")).read_text()
                spill = re.findall(r"(\d+) bytes spill stores", txt)
                used = re.findall(r"Used (\d+) registers", txt)
                print(f"bm {bm} regs {regs} topk {topk} group-commit {whole} stages {f.stages} used {used} spill {spill} serialized {'C751' in txt}", flush=True)
