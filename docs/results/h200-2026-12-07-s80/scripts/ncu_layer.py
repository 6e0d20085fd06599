# ruff: noqa
"""Session 69: one layer (indexed.moe_experts, the planned block, rows in routing order) for ncu: warm, then one
call between cudaProfilerStart / Stop. argv: tp8_8192 | ep8_128 | ep8_43 ..."""
import sys

import torch
import chord_kernels
from chord_kernels import indexed
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
name = sys.argv[1]
kind, size = name.split("_")
EP = kind == "ep8"
E, G, TOP_K, H, I = (48, 384, 8, 7168, 2048) if EP else (384, 384, 8, 7168, 256)
tokens = int(size) * G // TOP_K if EP else int(size)  # EP8: rows per expert
g = torch.Generator(device=dev).manual_seed(69)
prof = "h200_ep8" if EP else "h200_tp8"
w13 = chord_kernels.pack("indexed", *random_quantized(E, 2 * I, H, generator=g, device=dev), profile=prof)
w2 = chord_kernels.pack("indexed", *random_quantized(E, H, I, generator=g, device=dev), profile=prof)
ids = torch.rand(tokens, G, generator=g, device=dev).topk(TOP_K, dim=1).indices.to(torch.int32).contiguous()
tw = torch.rand(tokens, TOP_K, generator=g, device=dev)
hidden = (torch.randn(tokens, H, generator=g, device=dev) * 0.5).to(torch.bfloat16)
emap = None
if EP:
    emap = torch.full((G,), -1, dtype=torch.int32, device=dev)
    emap[:E] = torch.arange(E, dtype=torch.int32, device=dev)
bm = indexed.layer_block_m(w13, w2, tokens * TOP_K * E // G)
r = align_block_size(ids, bm, G, emap)
route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
out = torch.empty(tokens, H, dtype=torch.bfloat16, device=dev)
run = lambda: indexed.moe_experts(hidden, w13, w2, route, tw, ids, block_m=bm, expert_map=emap, out=out)
for _ in range(3):
    run()
torch.cuda.synchronize()
print(name, "tokens", tokens, "block", bm, flush=True)
torch.cuda.cudart().cudaProfilerStart()
run()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
