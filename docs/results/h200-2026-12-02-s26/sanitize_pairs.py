# ruff: noqa
"""Session 26: small launches of items of up to two 24-token blocks on four consumer warpgroups for
compute-sanitizer: gathered rows with an expert map and a hot expert (runs of two blocks and a
rest), SiLU fused, top-k weights, a partial last N tile (N = 264) and a one-group last K tile
(K = 4128), the dynamic schedule; each checked bit for bit against one-block items; then the
grouped masked mode's tensor-copy rows (groups of 0-30 rows, rows past masked_m poisoned)."""
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
    hot = ids[: m // 2]  # global expert 0 on half the tokens: 35+ rows, a run of two blocks and a rest
    hot[:, 1] = torch.where(hot[:, 0] == 0, hot[:, 1], torch.where(hot[:, 1] == 0, hot[:, 0], hot[:, 1]))
    hot[:, 0] = 0
    emap = torch.full((4 * e,), -1, dtype=torch.int32, device=dev)
    emap[torch.randperm(4 * e - 1, generator=g, device=dev)[:e - 1] + 1] = torch.arange(e - 1, dtype=torch.int32, device=dev)
    emap[0] = e - 1
    tw = None if silu else torch.rand(m, top_k, generator=g, device=dev)
    act = torch.randn(m, k, generator=g, device=dev).to(torch.bfloat16)
    for dynamic in (False, True):
        pairs = WgmmaConfig(24, 2, 256, 2, consumers=4, items=2, consumer_regs=104, dynamic=dynamic)
        one = dataclasses.replace(pairs, items=1)
        r = align_block_size(ids, 24, 4 * e, emap)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        outs = []
        for cfg in (pairs, one):
            out = torch.full((m * top_k, n // 2 if silu else n), float("nan"), dtype=torch.bfloat16, device=dev)
            indexed.gemm(act, w, *route, block_m=24, top_k=top_k, topk_weights=tw, out=out, config=cfg,
                         activation="silu" if silu else None)
            outs.append(out)
        torch.cuda.synchronize()
        print(n, "dynamic" if dynamic else "strided", "silu" if silu else "plain", "equal:", torch.equal(outs[0], outs[1]), flush=True)
w = chord_kernels.pack("masked", *random_quantized(e, 512, k, generator=g, device=dev), profile="h200_ep8")
masked_m = torch.tensor([0, 30, 1, 29, 17, 0], dtype=torch.int32, device=dev)
a = torch.randn(e, 30, k, generator=g, device=dev).to(torch.bfloat16)
out = grouped.masked(a, w, masked_m, 12, activation="silu")
torch.cuda.synchronize()
print("masked block", grouped.masked_block_m(w, 12), "done", flush=True)
print("sanitize_pairs done", flush=True)
