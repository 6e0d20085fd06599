# ruff: noqa
"""ptxas report (registers, spills) of a study's decode configurations (argv: STUDY)."""
import re, subprocess, sys, tempfile, concurrent.futures as cf
from pathlib import Path
from chord_kernels.jit import cache, nvcc
from chord_kernels.indexed.decode import DecodeConfig
inc = Path(__import__("chord_kernels").__file__).parent / "include"
study = sys.argv[1]
sys.argv = ["x", study, "list"]
exec(open(Path(__file__).parent / "ab.py").read().split('if sys.argv[2] == "precompile"')[0])
def report(cfg):
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "k.cu"; f.write_text(cfg.source())
        cmd = [str(nvcc.find_nvcc()), *cache.BASE_FLAGS, *nvcc.arch_flags("sm_90a"), "-Xptxas", "-v", "-I", str(inc), "-o", str(Path(d)/"k.cubin"), str(f)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        out = out.stdout + out.stderr
        if "error" in out: print(out[-2000:])
        return (sum(int(x) for x in re.findall(r"(\d+) bytes spill stores", out)), re.findall(r"Used (\d+) registers", out))
cfgs = list(dict.fromkeys(v for case in CASES for v in variants(case, *config(case)).values() if isinstance(v, DecodeConfig)))
with cf.ThreadPoolExecutor(2) as ex:
    for c, (sp, regs) in zip(cfgs, ex.map(report, cfgs)):
        print(("BAD " if sp else "ok  ") + f"spill={sp} regs={regs} {c.template_args()}", flush=True)
