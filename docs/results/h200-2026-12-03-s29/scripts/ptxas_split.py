# ruff: noqa
"""ptxas report (registers, spills, wgmma serialization) of the split-tail configurations and their twins."""
import dataclasses, re, subprocess, sys, tempfile, concurrent.futures as cf
from pathlib import Path
from chord_kernels.indexed import planner
from chord_kernels.jit import cache, nvcc
inc = Path(__import__("chord_kernels").__file__).parent / "include"
def report(cfg):
    src = cfg.source()
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "k.cu"; f.write_text(src)
        cmd = [str(nvcc.find_nvcc()), *cache.BASE_FLAGS, *nvcc.arch_flags("sm_90a"), "-cubin", "-Xptxas", "-v", "-I", str(inc), "-o", str(Path(d)/"k.cubin"), str(f)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        out = r.stdout + r.stderr
        regs = re.findall(r"Used (\d+) registers", out); spill = re.findall(r"(\d+) bytes spill stores", out)
        warn = sorted(set(re.findall(r"C75\d\d", out)))
        return f"rc={r.returncode} regs={regs} spill={spill} warn={warn}" + ("" if r.returncode == 0 else out[-2000:])
want = [int(x) for x in sys.argv[1].split(",")] if len(sys.argv) > 1 else None
cfgs = [c for c in planner.default_configs() if getattr(c, "split_tail", False) and (want is None or c.block_m in want)]
jobs = [(c, v) for c in cfgs for v in (True, False)]
with cf.ThreadPoolExecutor(2) as ex:
    for (c, v), rep in zip(jobs, ex.map(lambda cv: report(dataclasses.replace(cv[0], split_tail=cv[1])), jobs)):
        print(f"bm={c.block_m} items={c.items} rw={c.row_widths} split={v}: {rep}", flush=True)
