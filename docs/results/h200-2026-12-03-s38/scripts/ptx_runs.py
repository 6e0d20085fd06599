# ruff: noqa
import dataclasses, re, subprocess, sys, tempfile, concurrent.futures as cf
from pathlib import Path
from chord_kernels.jit import cache, nvcc
import chord_kernels.indexed.wgmma as W
inc = Path(__import__("chord_kernels").__file__).parent / "include"
def report(cfg):
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "k.cu"; f.write_text(cfg.source())
        cmd = [str(nvcc.find_nvcc()), *cache.BASE_FLAGS, *nvcc.arch_flags("sm_90a"), "-Xptxas", "-v", "-I", str(inc), "-o", str(Path(d)/"k.cubin"), str(f)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        o = out.stdout + out.stderr
        if out.returncode: return "FAILED " + o[-800:]
        regs = re.findall(r"Used (\d+) registers", o)
        return (sum(int(x) for x in re.findall(r"(\d+) bytes spill stores", o)), sorted(set(re.findall(r"C75\d\d", o))), regs)
cfgs = []
for bm in (32, 40, 48, 56):
    c = W._choose_wgmma_config(7168, 256, bm, 0)
    c = dataclasses.replace(c, subnormal=True)
    ws = (bm - 8,) if bm <= 40 else (bm - 16, bm - 8)
    print("plan", c)
    cfgs += [c, dataclasses.replace(c, row_widths=ws)]
    if bm >= 48: cfgs.append(dataclasses.replace(c, row_widths=(bm - 8,)))
with cf.ThreadPoolExecutor(2) as ex:
    for c, r in zip(cfgs, ex.map(report, cfgs)):
        print(("ok  " if isinstance(r, tuple) and r[:2] == (0, []) else "BAD ") + str(r) + " " + c.template_args(), flush=True)
