# ruff: noqa
"""Session 35: compute-sanitizer target: the decode kernel with row widths (16-, 24- and 32-token
blocks of 1 to 32 real rows; N = 7168 and 7184 (a partial last tile), K = 256 and 2048, an expert map,
items split along K), small, each against the reference."""
import dataclasses
import torch

import chord_kernels
from chord_kernels import reference
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import gemm
from chord_kernels.indexed.decode import DecodeConfig
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(35)
worst = 0.0
for n, k, bm, schedule, mapped in ((7168, 2048, 16, "strided", False), (7184, 256, 16, "strided", True),
                                   (7184, 256, 24, "strided", False), (7168, 256, 32, "strided", True),
                                   (264, 2048, 16, "balanced", True)):
    e, m, top_k = 6, 45, 2
    packed, scales = random_quantized(e, n, k, generator=g, device=dev)
    w = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    ge = 2 * e if mapped else e
    ids = torch.rand(m, ge, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    emap = None
    if mapped:
        emap = torch.full((ge,), -1, dtype=torch.int32, device=dev)
        emap[::2] = torch.arange(e, dtype=torch.int32, device=dev)
    tw = torch.rand(m, top_k, generator=g, device=dev)
    a = (torch.randn(m, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    warps, ctas = (8, 1) if bm == 32 else (4, 2)
    cfg = DecodeConfig(block_m=bm, warps=warps, mt=4, bk=256, stages=2, ctas_per_sm=ctas, schedule=schedule,
                       row_widths=True)
    r = align_block_size(ids, bm, ge, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    out = torch.full((m * top_k, n), float("nan"), dtype=torch.bfloat16, device=dev)
    gemm(a, w, *route, block_m=bm, top_k=top_k, topk_weights=tw, out=out, config=cfg)
    ref = reference.indexed_gemm(a, (packed, scales), *route, block_m=bm, top_k=top_k, topk_weights=tw)
    torch.cuda.synchronize()
    err = float((out.float() - ref.float()).norm() / ref.float().norm())
    worst = max(worst, err)
    print(n, k, bm, schedule, mapped, f"rel err {err:.2e}", "NaN" if out.isnan().any() else "")
assert worst < 5e-3, worst
print("ok")
