"""Session 58 call g: the 64 x 2 down of EP8 with 512 rows per expert (5376 items: 40.73 rounds on 132 SMs,
so the split tail cuts nothing) on the plan's kernel and on its split-tail twin (tail_parts=4), one launch
each after a warm-up, for ncu to compare (the twin measured 2-4 % slower there in call f)."""
import dataclasses

import torch

import chord_kernels
from chord_kernels import grouped
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.planner import configs_for

torch.manual_seed(0)
experts, rows, n, k = 48, 512, 7168, 2048
packed, scales = random_quantized(experts, n, k, device="cuda")
w = chord_kernels.pack("contiguous", packed, scales, profile="h200_ep8")
m_indices = torch.arange(experts, device="cuda", dtype=torch.int32).repeat_interleave(rows)
a = torch.randn(experts * rows, k, device="cuda").to(torch.bfloat16)
base = configs_for(n, k, 64, "sm_90a")[0]
configs = {"plan": base, "tail4": dataclasses.replace(base, tail_parts=4)}
out = torch.empty(experts * rows, n, dtype=torch.bfloat16, device="cuda")
for config in configs.values():  # load (and warm) both before the profiled launches
    grouped.contiguous(a, w, m_indices, out=out, config=config)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for config in configs.values():
    grouped.contiguous(a, w, m_indices, out=out, config=config)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("profiled", list(configs))
