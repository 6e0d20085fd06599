# ruff: noqa
"""ptxas report (registers, spills) of the split-tail decode configurations against their strided twins."""
import dataclasses, re, subprocess, sys, tempfile, concurrent.futures as cf
from pathlib import Path
from chord_kernels.jit import cache, nvcc
from chord_kernels.indexed.decode import DecodeConfig
from chord_kernels.indexed.heuristics import short_k_config, choose_config
inc = Path(__import__("chord_kernels").__file__).parent / "include"
def report(cfg):
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "k.cu"; f.write_text(cfg.source())
        cmd = [str(nvcc.find_nvcc()), *cache.BASE_FLAGS, *nvcc.arch_flags("sm_90a"), "-Xptxas", "-v", "-I", str(inc), "-o", str(Path(d)/"k.cubin"), str(f)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        o = out.stdout + out.stderr
        if out.returncode: return "FAILED " + o[-1500:]
        return (re.findall(r"Used (\d+) registers", o), sum(int(x) for x in re.findall(r"(\d+) bytes spill stores", o)))
base = [dataclasses.replace(short_k_config(7168, 16), subnormal=True), dataclasses.replace(choose_config(7168, 2048, 8), schedule="strided", subnormal=True)]
cfgs = []
for c in base:
    cfgs += [c, dataclasses.replace(c, schedule="split_tail"), dataclasses.replace(c, schedule="balanced")]
with cf.ThreadPoolExecutor(2) as ex:
    for c, r in zip(cfgs, ex.map(report, cfgs)):
        print(r, c.template_args(), flush=True)
