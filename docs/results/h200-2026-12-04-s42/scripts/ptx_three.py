# ruff: noqa
"""Session 42: ptxas (spills, C75xx) of the planned three-warpgroup down configurations (24 and 32 tokens,
K = 2048, N = 7168) and their twins (one-fma form, top-k sum, tensor-copy rows)."""
import dataclasses, re, subprocess, tempfile, concurrent.futures as cf
from pathlib import Path
from chord_kernels.jit import cache, nvcc
import chord_kernels.indexed.wgmma as W
from chord_kernels.indexed.api import _tma_rows_twin
inc = Path(__import__("chord_kernels").__file__).parent / "include"


def report(cfg):
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "k.cu"; f.write_text(cfg.source())
        cmd = [str(nvcc.find_nvcc()), *cache.BASE_FLAGS, *nvcc.arch_flags("sm_90a"), "-Xptxas", "-v", "-I", str(inc),
               "-o", str(Path(d) / "k.cubin"), str(f)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        o = out.stdout + out.stderr
        if out.returncode:
            return "FAILED " + o[-800:]
        regs = re.findall(r"Used (\d+) registers", o)
        return (sum(int(x) for x in re.findall(r"(\d+) bytes spill stores", o)), sorted(set(re.findall(r"C75\d\d", o))), regs)


cfgs = []
for bm, tok_e in ((24, 12.0), (32, 20.0)):
    c = W.choose_wgmma_config(7168, 2048, bm, tok_e)
    assert c.consumers == 3, c
    for sub in (False, True):
        b = dataclasses.replace(c, subnormal=sub)
        for x in (b, b.topk_sum_twin(7168), _tma_rows_twin(b)):
            if x is not None and x not in cfgs:
                cfgs.append(x)
with cf.ThreadPoolExecutor(2) as ex:
    for c, r in zip(cfgs, ex.map(report, cfgs)):
        print(("ok  " if isinstance(r, tuple) and r[:2] == (0, []) else "BAD ") + str(r) + " " + c.template_args(), flush=True)
