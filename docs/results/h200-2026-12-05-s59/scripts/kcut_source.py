"""Session 59 call b: session 58 kcut_profile.py with the configuration named on the command line (plan, tail4),
so that ncu source counters (instructions executed per SASS line) are taken on one kernel per run."""
import dataclasses
import sys

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
configs = {k: v for k, v in configs.items() if k in sys.argv[1:]}
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
