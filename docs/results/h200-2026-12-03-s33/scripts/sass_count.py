# ruff: noqa
"""SASS instruction counts and ptxas report of a few planned configurations, one-fma form, tiles holding s vs s * 2^133."""
import dataclasses, math, re, subprocess, sys, tempfile, collections
from pathlib import Path
from chord_kernels.indexed import planner as P
from chord_kernels.indexed.heuristics import choose_block_m
from chord_kernels.jit import cache, nvcc
inc = Path(__import__("chord_kernels").__file__).parent / "include"
CUOBJ = "/c/.nox/tests/lib/python3.11/site-packages/triton/backends/nvidia/bin/cuobjdump"
class _W:
    def __init__(s, e): s.num_experts, s.profile = e, ("h200_tp8" if e == 384 else "h200_ep8")
cases = [("ep8_tok43_gu", 48, 4096, 7168, 48*43), ("ep8_tok16_gu", 48, 4096, 7168, 48*16), ("ep8_tok16_dn", 48, 7168, 2048, 48*16),
         ("ep8_tok2_gu", 48, 4096, 7168, 96), ("tp8_1024_gu", 384, 512, 7168, 8192), ("ep8_tok341_gu", 48, 4096, 7168, 48*341)]
for name, e, n, k, slots in cases:
    bm = choose_block_m(_W(e), slots)
    cfg = P.config_for_rows(n, k, bm, "sm_90a", slots / e) or P._choose(n, k, bm, math.ceil(slots / bm) + e, 132, "sm_90a")
    for nib in (False, True):  # biased_scales
        c = dataclasses.replace(cfg, subnormal=True, biased_scales=nib)
        d = tempfile.mkdtemp(); f = Path(d) / "k.cu"; f.write_text(c.source())
        r = subprocess.run([str(nvcc.find_nvcc()), *cache.BASE_FLAGS, *nvcc.arch_flags("sm_90a"), "-Xptxas", "-v", "-I", str(inc), "-o", d + "/k.cubin", str(f)], capture_output=True, text=True)
        spill = sum(int(x) for x in re.findall(r"(\d+) bytes spill stores", r.stderr))
        regs = re.findall(r"Used (\d+) registers", r.stderr)
        warn = sorted(set(re.findall(r"C75\d\d", r.stderr)))
        sass = subprocess.run([CUOBJ, "-sass", d + "/k.cubin"], capture_output=True, text=True).stdout
        ops = collections.Counter(m.split(".")[0] for m in re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", sass, re.M))
        print(f"{name:14s} bm={bm} {type(c).__name__[:6]} biased={nib:d} regs={regs} spill={spill} warn={warn} "
              + " ".join(f"{o}={ops[o]}" for o in ("SHF", "LOP3", "HFMA2", "HMUL2", "HGMMA", "HMMA", "PRMT")), flush=True)
