# ruff: noqa
"""Session 30: small launches of the one-fma dequantization for compute-sanitizer -- the decode kernel (8- and
16-token blocks), WGMMA items of 56 tokens (gathered rows under an expert map with a hot expert, top-k weights;
SiLU fused), 16 and 24 tokens, and TP8-style runs of N tiles at 48-token blocks (K = 256) -- each bit for bit
against the two-instruction form. argv: [precompile]."""
import dataclasses, sys

import torch

import chord_kernels
from chord_kernels import indexed
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import planner
from chord_kernels.routing import align_block_size

CASES = ((264, 2048, 8, False, 2.0), (264, 2048, 16, False, 6.0), (264, 2048, 56, False, 43.0),
         (512, 2048, 56, True, 43.0), (264, 2048, 24, False, 12.0), (520, 256, 48, False, 32.0))
e, m, top_k = 6, 90, 2
if sys.argv[1:] == ["precompile"]:
    for n, k, bm, silu, tok_e in CASES:
        meta = chord_kernels.PackedWeight("indexed", "indexed", "indexed", "h200_ep8", 2, e, n, k, 32, {})
        for cap in range(1, 200):
            cfg = indexed.plan(meta, block_m=bm, capacity=cap, num_sms=132, arch="sm_90a", tok_e=tok_e).config
            for c in {cfg, dataclasses.replace(cfg, subnormal=True)}:
                c = dataclasses.replace(c, silu_mul=True) if silu and isinstance(c, indexed.WgmmaConfig) else c
                c.kernel().compile("sm_90a")
    from chord_kernels.ops.activation import silu_and_mul_kernel
    silu_and_mul_kernel().compile("sm_90a")
    print("compiled")
    sys.exit(0)

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(0)
for n, k, bm, silu, tok_e in CASES:
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
    assert w.small_scales
    ids = torch.rand(m, 4 * e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    ids[: m // 2, 0] = torch.where(ids[: m // 2, 1] == 0, ids[: m // 2, 0], 0)  # global expert 0: a hot expert
    emap = torch.full((4 * e,), -1, dtype=torch.int32, device=dev)
    emap[torch.randperm(4 * e - 1, generator=g, device=dev)[:e - 1] + 1] = torch.arange(e - 1, dtype=torch.int32, device=dev)
    emap[0] = e - 1
    tw = None if silu else torch.rand(m, top_k, generator=g, device=dev)
    act = torch.randn(m, k, generator=g, device=dev).to(torch.bfloat16)
    r = align_block_size(ids, bm, 4 * e, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    outs, cfgs = [], []
    for wt in (w, dataclasses.replace(w, small_scales=False)):
        out = torch.full((m * top_k, n // 2 if silu else n), float("nan"), dtype=torch.bfloat16, device=dev)
        indexed.gemm(act, wt, *route, block_m=bm, top_k=top_k, topk_weights=tw, out=out, tok_e=tok_e,
                     activation="silu" if silu else None)
        outs.append(out)
        cfgs.append(indexed.plan(wt, block_m=bm, capacity=planner.routing_capacity(route[0], route[1], bm), tok_e=tok_e).config)
    torch.cuda.synchronize()
    print(n, k, bm, type(cfgs[0]).__name__, "silu" if silu else "plain", "subnormal:", cfgs[0].subnormal, cfgs[1].subnormal,
          "equal:", torch.equal(outs[0], outs[1]), "nan:", bool(outs[0][(emap[ids] >= 0).reshape(-1)].isnan().any()), flush=True)
print("sanitize_subnormal done", flush=True)
