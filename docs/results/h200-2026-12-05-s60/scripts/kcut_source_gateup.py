"""Session 60 call f: ncu source counters of EP8's planned gate_up (fused SiLU, four warpgroups, 24 x 2 items) at 12
rows per expert, uniform routing (about 384 items: the split tail cuts nothing), on the planned kernel (K-cut twin,
tail_parts 8) or the same without the cut, named on the command line (plan, uncut): where the 0.2-0.9 % the twin
costs per layer goes."""
import dataclasses
import sys

import torch

import chord_kernels
from chord_bench.layer import draw_topk
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import gemm
from chord_kernels.indexed.wgmma import choose_wgmma_config
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(12)
e, ge, tokens, n, k, bm = 48, 384, 576, 4096, 7168, 24
w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
a = (torch.randn(tokens, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
_, ids = draw_topk(tokens, e, "uniform", g)
emap = torch.full((ge,), -1, dtype=torch.int32, device=dev)
emap[:e] = torch.arange(e, dtype=torch.int32, device=dev)
r = align_block_size(ids, bm, ge, emap)
plan = choose_wgmma_config(n, k, bm, 12.0)
assert plan.tail_parts, plan
configs = {"plan": plan, "uncut": dataclasses.replace(plan, tail_parts=0)}
configs = {name: c for name, c in configs.items() if name in sys.argv[1:]}
out = torch.empty(tokens * 8, n // 2, dtype=torch.bfloat16, device=dev)


def run(c):
    gemm(a, w, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=bm, top_k=8, out=out,
         activation="silu", zero_nonlocal=False, config=c)


for c in configs.values():  # load and warm before the profiled launches
    run(c)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for c in configs.values():
    run(c)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("profiled", list(configs))
