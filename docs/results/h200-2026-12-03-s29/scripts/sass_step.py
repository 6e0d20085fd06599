# ruff: noqa
"""Compile a configuration with and without step_branch, dump SASS, count the ALU split."""
import dataclasses, subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, "docs/results/h200-2026-12-02-s27/tools")
import sass_sched
from chord_kernels.indexed.wgmma import choose_wgmma_config
from chord_kernels.jit import cache, nvcc
inc = Path(__import__("chord_kernels").__file__).parent / "include"
CUOBJ = "/tmp/nvd/x/nvidia/cu13/bin/cuobjdump"
for name, cfg in [("ep8_gu32_four", choose_wgmma_config(4096, 7168, 32)), ("ep8_gu24_pairs", choose_wgmma_config(4096, 7168, 24, 16.0)),
                  ("gu80", choose_wgmma_config(4096, 7168, 80)), ("gu64x2", choose_wgmma_config(4096, 7168, 64))]:
    for sb in (False, True):
        c = dataclasses.replace(cfg, step_branch=sb)
        d = tempfile.mkdtemp(); f = Path(d) / "k.cu"; f.write_text(c.source())
        r = subprocess.run([str(nvcc.find_nvcc()), *cache.BASE_FLAGS, *nvcc.arch_flags("sm_90a"), "-Xptxas", "-v", "-I", str(inc), "-o", d + "/k.cubin", str(f)], capture_output=True, text=True)
        warn = "C7512" in r.stderr or "spill stores" in r.stderr and " 0 bytes spill" not in r.stderr
        sass = subprocess.run([CUOBJ, "-sass", d + "/k.cubin"], capture_output=True, text=True).stdout
        Path(d, "k.sass").write_text(sass)
        from collections import Counter
        print(name, "step_branch" if sb else "plain", "warn" if warn else "", sorted(Counter(sass_sched.steps(d + "/k.sass")).items())[:8], flush=True)
