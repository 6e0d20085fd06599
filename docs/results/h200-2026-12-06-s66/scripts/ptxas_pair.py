# ruff: noqa
"""Session 66: ptxas on the gate_up configurations (fused SiLU, and plain) of the planned shapes with and without
pair (clusters of two CTAs sharing the gathered rows): registers, spills, wgmma serialization."""
import dataclasses, json, re, sys
from chord_kernels.indexed.planner import cached_plan, config_for_rows
from chord_kernels.indexed.planner import silu_mul_twin, _subnormal_twin
from chord_kernels.jit import CudaKernel, compile_all
SHAPES = {"ep43": (4096, 56, 43.0), "ep64": (4096, 80, 64.0), "ep128": (4096, 16, 128.0), "ep341": (4096, 64, 341.0),
          "tp8192": (512, 96, 170.7), "ep24": (4096, 24, 14.0), "ep32": (4096, 32, 20.0), "ep104": (4096, 104, 80.0)}
cfgs = {}
for name, (n, bm, tok_e) in SHAPES.items():
    base = _subnormal_twin(cached_plan(n, 7168, bm, 1000, 132, "sm_90a", config_for_rows(n, 7168, bm, "sm_90a", tok_e)).config)
    if base.tail_parts:
        base = dataclasses.replace(base, tail_parts=0, tail_blocks=False)
    for silu in (True, False):
        c = silu_mul_twin(base, n) if silu else base
        for pair in (False, True):
            cfgs[(name, silu, pair)] = dataclasses.replace(c, cta_pair=pair)
kernels = [CudaKernel(name="pair_check", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v")) for c in cfgs.values()]
for (name, silu, pair), cubin in zip(cfgs, compile_all(kernels, "sm_90a"), strict=True):
    log = json.loads(cubin.with_suffix(".json").read_text())["log"]
    sp = max(int(x) for x in re.findall(r"(\d+) bytes spill", log))
    regs = re.findall(r"Used (\d+) registers", log)
    print(f"{name:7s} silu {int(silu)} pair {int(pair)} spill {sp} serial {'C751' in log} regs {regs} smem {cfgs[(name, silu, pair)].smem_bytes(0)}", flush=True)
