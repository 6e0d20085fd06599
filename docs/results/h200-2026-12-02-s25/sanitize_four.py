"""Session 25: small launches of four consumer warpgroups of two tiles for compute-sanitizer:
32- and 48-token items (32- and 16-token epilogue passes), gathered and tensor-copy rows, SiLU
fused, top-k weights, an expert map, a partial last N tile (N = 264: two warpgroups without
channels) and a one-group last K tile (K = 4128), the dynamic schedule; each checked bit for bit
against two warpgroups of the same tiles."""
import dataclasses

import torch

import chord_kernels
from chord_kernels import grouped, indexed
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.wgmma import WgmmaConfig
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(0)
e, k, m, top_k = 6, 4128, 70, 2
for n, silu in ((264, False), (512, True)):
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
    ids = torch.rand(m, 4 * e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    emap = torch.full((4 * e,), -1, dtype=torch.int32, device=dev)
    emap[torch.randperm(4 * e, generator=g, device=dev)[:e]] = torch.arange(e, dtype=torch.int32, device=dev)
    tw = None if silu else torch.rand(m, top_k, generator=g, device=dev)
    act = torch.randn(m, k, generator=g, device=dev).to(torch.bfloat16)
    for bm, dynamic in ((32, False), (48, True)):
        four = WgmmaConfig(bm, 2, 256, 2, consumers=4, consumer_regs=104, dynamic=dynamic)
        two = dataclasses.replace(four, consumers=2, consumer_regs=216)
        r = align_block_size(ids, bm, 4 * e, emap)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        outs = []
        for cfg in (four, two):
            out = torch.full((m * top_k, n // 2 if silu else n), float("nan"), dtype=torch.bfloat16, device=dev)
            indexed.gemm(act, w, *route, block_m=bm, top_k=top_k, topk_weights=tw, out=out, config=cfg,
                         activation="silu" if silu else None)
            outs.append(out)
        torch.cuda.synchronize()
        print(n, bm, "silu" if silu else "plain", "equal:", torch.equal(outs[0], outs[1]), flush=True)
# The grouped masked mode: tensor-copy rows, four warpgroups (K = 4128), rows past masked_m poisoned.
w = chord_kernels.pack("masked", *random_quantized(e, 512, k, generator=g, device=dev), profile="h200_ep8")
masked_m = torch.tensor([0, 40, 1, 39, 17, 0], dtype=torch.int32, device=dev)
a = torch.randn(e, 40, k, generator=g, device=dev).to(torch.bfloat16)
out = grouped.masked(a, w, masked_m, 16, activation="silu")
torch.cuda.synchronize()
print("masked block", grouped.masked_block_m(w, 16), "done", flush=True)
print("sanitize_four done", flush=True)
