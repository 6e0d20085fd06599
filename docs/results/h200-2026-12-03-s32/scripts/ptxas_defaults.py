# ruff: noqa
"""ptxas report (spills, serialization warnings C75xx) of every default WGMMA configuration's one-fma twin
and its top-k-sum and tensor-copy-row twins, as planned (pairs in place, or shifted where planned)."""
import dataclasses, re, subprocess, tempfile, concurrent.futures as cf
from pathlib import Path
from chord_kernels.indexed import planner
from chord_kernels.indexed.wgmma import WgmmaConfig
from chord_kernels.jit import cache, nvcc
inc = Path(__import__("chord_kernels").__file__).parent / "include"
def report(cfg):
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "k.cu"; f.write_text(cfg.source())
        cmd = [str(nvcc.find_nvcc()), *cache.BASE_FLAGS, *nvcc.arch_flags("sm_90a"), "-Xptxas", "-v", "-I", str(inc), "-o", str(Path(d)/"k.cubin"), str(f)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        out = out.stdout + out.stderr
        return sum(int(x) for x in re.findall(r"(\d+) bytes spill stores", out)), sorted(set(re.findall(r"C75\d\d", out)))
cfgs = [c for c in planner.default_configs() if isinstance(c, WgmmaConfig) and c.subnormal]
cfgs += [c.topk_sum_twin(7168) for c in cfgs if c.topk_sum_twin(7168)]
cfgs += [dataclasses.replace(c, tma_rows=True) for c in cfgs if not c.topk_sum]
cfgs = list(dict.fromkeys(cfgs))
with cf.ThreadPoolExecutor(2) as ex:
    for c, (sp, w) in zip(cfgs, ex.map(report, cfgs)):
        print(("BAD " if sp or w else "ok  ") + f"spill={sp} warn={w} {c.template_args()}", flush=True)
