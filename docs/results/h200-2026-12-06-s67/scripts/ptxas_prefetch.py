# ruff: noqa
"""Session 67: ptxas on the gate_up configurations that ask L2 for the next stage's rows (prefetch_rows: TP8 3200,
4096, 4800, 8192, 12288 tokens, EP8 64, 160, 185 rows per expert), fused SiLU and plain, both scale forms:
registers, spills, wgmma serialization."""
import json, re, types
from chord_kernels.indexed.heuristics import choose_block_m
from chord_kernels.indexed.planner import cached_plan, config_for_rows, silu_mul_twin, _subnormal_twin
from chord_kernels.jit import CudaKernel, compile_all

SHAPES = {"tp3200": (384, 512, 3200), "tp4096": (384, 512, 4096), "tp4800": (384, 512, 4800), "tp8192": (384, 512, 8192),
          "tp12288": (384, 512, 12288), "ep64": (48, 4096, 64 * 48), "ep160": (48, 4096, 160 * 48), "ep185": (48, 4096, 185 * 48)}
cfgs = {}
for name, (e, n, tokens) in SHAPES.items():
    slots = tokens * 8 * e // 384
    w = types.SimpleNamespace(n=n, k=7168, num_experts=e, profile="h200_tp8" if e == 384 else "h200_ep8", small_scales=True)
    bm = choose_block_m(w, slots)
    plain = cached_plan(n, 7168, bm, slots // bm + e, 132, "sm_90a", config_for_rows(n, 7168, bm, "sm_90a", slots / e)).config
    assert plain.prefetch_rows, (name, plain)
    for sub in (False, True):
        base = _subnormal_twin(plain) if sub else plain
        for silu in (True, False):
            cfgs[(name, sub, silu)] = silu_mul_twin(base, n) if silu else base
kernels = [CudaKernel(name="prefetch_check", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v")) for c in cfgs.values()]
for (name, sub, silu), cubin in zip(cfgs, compile_all(kernels, "sm_90a"), strict=True):
    log = json.loads(cubin.with_suffix(".json").read_text())["log"]
    sp = max(int(x) for x in re.findall(r"(\d+) bytes spill", log))
    print(f"{name:8s} one-fma {int(sub)} silu {int(silu)} prefetch {int(cfgs[(name, sub, silu)].prefetch_rows)} spill {sp} "
          f"serial {'C751' in log}", flush=True)
