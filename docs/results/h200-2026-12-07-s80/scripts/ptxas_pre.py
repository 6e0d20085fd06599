# ruff: noqa
"""ptxas on every default WGMMA configuration with -DCHORD_EXP_PRELOAD: spills, serialized wgmmas, registers."""
import json, re, sys, os
from chord_kernels.indexed import default_configs, WgmmaConfig
from chord_kernels.jit import CudaKernel, compile_all
flag = sys.argv[1:] or ["-DCHORD_EXP_PRELOAD"]
cfgs = [x for x in default_configs("sm_90a") if isinstance(x, WgmmaConfig)]
ks = [CudaKernel(name="pre_check", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v", *flag)) for c in cfgs]
cubins = compile_all(ks, "sm_90a")
bad = 0
for c, cb in zip(cfgs, cubins):
    log = json.loads(cb.with_suffix(".json").read_text())["log"]
    sp = max(int(x) for x in re.findall(r"(\d+) bytes spill", log))
    ser = "C7511" in log or "C7512" in log
    regs = int(re.search(r"Used (\d+) registers", log).group(1))
    if sp or ser:
        bad += 1
    print(f"{'BAD ' if sp or ser else ''}spill={sp} serial={ser} regs={regs} bm={c.block_m} mt={c.mt} cons={c.consumers} items={c.items} ring={c.weight_ring} nrun={c.n_run} whole={c.whole_stages} cps={c.commit_per_step} silu={c.silu_mul} topk={c.topk_sum}", flush=True)
print("bad", bad, "of", len(cfgs))
