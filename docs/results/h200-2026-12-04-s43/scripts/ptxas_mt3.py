# ruff: noqa
"""ptxas -v of two consumer warpgroups of three tiles (384-channel N tiles) on EP8's down (K = 2048)."""
import dataclasses, re, sys
from pathlib import Path
from chord_kernels.indexed import wgmma as W
from chord_kernels.indexed.wgmma import LIST_RESERVE, SMEM_LIMIT
from chord_kernels.jit import CudaKernel
BMS = [int(x) for x in sys.argv[1].split(",")] if len(sys.argv) > 1 else [40, 48, 56]
REGS = [int(x) for x in sys.argv[2].split(",")] if len(sys.argv) > 2 else [216, 232]
for bm in BMS:
    base = W.choose_wgmma_config(7168, 2048, bm, None)
    print("plan", base, flush=True)
    for regs in REGS:
        for rw in ((), base.row_widths):
            for commit in ("group", "step"):
                for topk in (False,):
                    res = 512 if topk else LIST_RESERVE
                    fits = [s for s in range(2, 9) if dataclasses.replace(base, mt=3, consumer_regs=regs, stages=s, topk_sum=topk, row_widths=rw).smem_bytes(0) + res <= SMEM_LIMIT]
                    if not fits:
                        print(bm, regs, "no stage count fits"); continue
                    f = dataclasses.replace(base, mt=3, consumer_regs=regs, stages=max(fits), topk_sum=topk, row_widths=rw, whole_stages=(commit == "group"), subnormal=True)
                    kk = f.kernel()
                    src = kk.source
                    if commit == "group":
                        src = "#define CHORD_EXP_GROUP_COMMIT\n" + src.replace("Cfg::kCommitPerStep == true", "Cfg::kCommitPerStep == false")
                        assert "kCommitPerStep = false" in src or True
                    v = CudaKernel(name=kk.name + "_v" + commit, source=src, entry=kk.entry, arch=kk.arch, flags=("-Xptxas", "-v"))
                    try:
                        path = v.compile("sm_90a")
                    except Exception as e:
                        print(bm, regs, rw, commit, "FAILED", str(e)[-400:]); continue
                    txt = Path(str(path).replace(".cubin", ".json")).read_text()
                    spill = re.findall(r"(\d+) bytes spill stores", txt)
                    used = re.findall(r"Used (\d+) registers", txt)
                    print(f"bm {bm} regs {regs} rw {rw} commit {commit} stages {f.stages} used {used} spill {spill} serialized {'C751' in txt}", flush=True)
