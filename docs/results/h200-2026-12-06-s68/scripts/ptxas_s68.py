# ruff: noqa
"""Session 68: ptxas (registers, spills, serialized wgmmas) on the experiment kernels: prefetch72_ab.py's and
pflead_ab.py's variants (argv: prefetch72 | pflead; pflead with pf_exp.patch applied)."""
import json, re, sys, types
sys.argv = [sys.argv[0], "none", *sys.argv[1:]]
which = sys.argv[2]
exec(open(f"{which}_ab.py").read().split('if sys.argv[1] == "precompile":')[0])
from chord_kernels.jit import CudaKernel, compile_all
ks = {}
for name in SHAPES:
    e, eg, n, tokens, profile, w, bm, tok_e = shape_facts(name)
    slots = tokens * TOP_K * e // eg
    cap = slots // bm + 3
    for t, c in variants(n, bm, cap, tok_e).items():
        kk = launch_plan(w, bm, cap, SMS, ARCH, config=c, activation="silu").config.kernel()
        ks.setdefault((kk.source, kk.flags), (name, t, kk))
kernels = [CudaKernel(name="s68_check", source=kk.source, entry=kk.entry, flags=(*kk.flags, "-Xptxas", "-v")) for _, _, kk in ks.values()]
for (name, t, _), cubin in zip(ks.values(), compile_all(kernels, "sm_90a"), strict=True):
    log = json.loads(cubin.with_suffix(".json").read_text())["log"]
    sp = max(int(x) for x in re.findall(r"(\d+) bytes spill", log))
    regs = re.findall(r"Used (\d+) registers", log)
    print(f"{name:8s} {t:12s} spill {sp} regs {regs} serial {'C751' in log}", flush=True)
