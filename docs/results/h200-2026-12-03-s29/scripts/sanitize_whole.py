# ruff: noqa
"""Session 29: small launches of the whole-stage K loops for compute-sanitizer: 56-token items (gathered
rows under an expert map with a hot expert, top-k weights; SiLU fused), 16-token items, and TP8-style
runs of N tiles at 48-token blocks (K = 256), each bit for bit against the checked loop."""
import dataclasses

import torch

import chord_kernels
from chord_kernels import indexed
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.wgmma import choose_wgmma_config
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(0)
e, m, top_k = 6, 90, 2
for n, k, bm, silu, tok_e in ((264, 2048, 56, False, 43.0), (512, 2048, 56, True, 43.0), (264, 2048, 16, False, 8.0),
                              (520, 256, 48, False, 32.0)):
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
    ids = torch.rand(m, 4 * e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    ids[: m // 2, 0] = torch.where(ids[: m // 2, 1] == 0, ids[: m // 2, 0], 0)  # global expert 0: a hot expert
    emap = torch.full((4 * e,), -1, dtype=torch.int32, device=dev)
    emap[torch.randperm(4 * e - 1, generator=g, device=dev)[:e - 1] + 1] = torch.arange(e - 1, dtype=torch.int32, device=dev)
    emap[0] = e - 1
    tw = None if silu else torch.rand(m, top_k, generator=g, device=dev)
    act = torch.randn(m, k, generator=g, device=dev).to(torch.bfloat16)
    whole = choose_wgmma_config(n, k, bm, tok_e)
    assert whole.whole_stages, whole
    r = align_block_size(ids, bm, 4 * e, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    outs = []
    for cfg in (whole, dataclasses.replace(whole, whole_stages=False)):
        out = torch.full((m * top_k, n // 2 if silu else n), float("nan"), dtype=torch.bfloat16, device=dev)
        indexed.gemm(act, w, *route, block_m=bm, top_k=top_k, topk_weights=tw, out=out, config=cfg,
                     activation="silu" if silu else None)
        outs.append(out)
    torch.cuda.synchronize()
    print(n, k, bm, "silu" if silu else "plain", "runs" if whole.n_run else "items", "equal:", torch.equal(outs[0], outs[1]),
          "nan:", bool(outs[0].isnan().any()), flush=True)
print("sanitize_whole done", flush=True)
