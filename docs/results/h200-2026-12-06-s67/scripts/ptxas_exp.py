# ruff: noqa
"""ptxas on exp_ab's variants (the planned gate_up kernels of its shapes, SiLU fused): spills, serialization."""
import dataclasses, json, re, sys
sys.argv = ["x", "list"]
src = open(".dev/s67/exp_ab.py").read().split('if sys.argv[1] == "precompile"')[0]
exec(src)
from chord_kernels.jit import CudaKernel, compile_all
from chord_kernels.indexed.api import launch_plan
ks = {}
for name in SHAPES:
    e, eg, n, tokens, profile, w, bm, tok_e = shape_facts(name)
    slots = tokens * TOP_K * e // eg
    for tag, c in variants(n, bm, slots // bm + 10, tok_e).items():
        kk = launch_plan(w, bm, slots // bm + 10, SMS, ARCH, config=c, activation="silu").config.kernel()
        ks[(name, tag)] = CudaKernel(name="exp_check", source=kk.source, entry=kk.entry, flags=(*kk.flags, "-Xptxas", "-v"))
for (name, tag), cubin in zip(ks, compile_all(list(ks.values()), "sm_90a"), strict=True):
    log = json.loads(cubin.with_suffix(".json").read_text())["log"]
    sp = max(int(x) for x in re.findall(r"(\d+) bytes spill", log))
    regs = re.findall(r"Used (\d+) registers", log)
    print(f"{name:7s} {tag:8s} spill {sp} serial {'C751' in log} regs {regs}", flush=True)
