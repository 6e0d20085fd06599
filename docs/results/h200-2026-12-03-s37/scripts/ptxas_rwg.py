# ruff: noqa
"""ptxas report (spills, C75xx serialization warnings, registers) of the rwg study's configurations: the
fused SiLU gate_up, the down with top-k weights and its top-k-sum twin."""
import dataclasses, re, subprocess, sys, tempfile, concurrent.futures as cf
from pathlib import Path
from chord_kernels.jit import cache, nvcc
inc = Path(__import__("chord_kernels").__file__).parent / "include"
sys.argv = ["ab.py", "rwg", "list"]
src = open(Path(__file__).parent / "ab.py").read()
exec(src[:src.index('if sys.argv[2] == "precompile"')])
def report(cfg):
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "k.cu"; f.write_text(cfg.source())
        cmd = [str(nvcc.find_nvcc()), *cache.BASE_FLAGS, *nvcc.arch_flags("sm_90a"), "-Xptxas", "-v", "-I", str(inc), "-o", str(Path(d)/"k.cubin"), str(f)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        o = out.stdout + out.stderr
        if out.returncode: return "FAILED " + o[-500:]
        return (sum(int(x) for x in re.findall(r"(\d+) bytes spill stores", o)), sorted(set(re.findall(r"C75\d\d", o))))
cfgs = {}
for case in CASES:
    bm, c = config(case)
    for t, v in variants(case, bm, c).items():
        v = fused(case, v); cfgs[v] = None
        tw = v.topk_sum_twin(7168) if not v.silu_mul else None
        if tw: cfgs[tw] = None
cfgs = list(cfgs)
with cf.ThreadPoolExecutor(2) as ex:
    for c, r in zip(cfgs, ex.map(report, cfgs)):
        print(("ok  " if r == (0, []) else "BAD ") + str(r) + " " + c.template_args(), flush=True)
