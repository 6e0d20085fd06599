# ruff: noqa
"""Session 38: compute-sanitizer target: the WGMMA kernel's runs of N tiles (K <= 256, one stage per item,
the consumers in turns) with row widths, as planned for TP8's down at 40-56-token blocks: 40-token items at
32 (K = 224: a short stage) and 48-token items at 40 with 208 consumer registers (K = 256: whole stages),
N = 1800 / 1024 (runs not dividing the N tiles, a partial last tile), an expert map and a hot expert, top-k
weights; each launched twice and against the reference."""
import torch

import chord_kernels
from chord_kernels import reference
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import gemm
from chord_kernels.indexed.wgmma import WgmmaConfig
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(38)
worst = 0.0
for bm, widths, n, k, whole, regs in ((40, (32,), 1800, 224, False, 216), (48, (40,), 1024, 256, True, 208)):
    e, m, top_k = 6, 120, 2
    cfg = WgmmaConfig(bm, 2, 256, 3, n_run=3, pingpong=True, row_widths=widths, whole_stages=whole, consumer_regs=regs)
    packed, scales = random_quantized(e, n, k, generator=g, device=dev)
    w = chord_kernels.pack("indexed", packed, scales, profile="h200_tp8")
    ge = 2 * e
    ids = torch.rand(m, ge, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    ids[: m // 3, 0] = 0  # a hot expert: several blocks, the last part-filled
    emap = torch.full((ge,), -1, dtype=torch.int32, device=dev)
    emap[::2] = torch.arange(e, dtype=torch.int32, device=dev)
    tw = torch.rand(m, top_k, generator=g, device=dev)
    a = (torch.randn(m, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    r = align_block_size(ids, bm, ge, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    outs = []
    for _ in range(2):
        out = torch.full((m * top_k, n), float("nan"), dtype=torch.bfloat16, device=dev)
        gemm(a, w, *route, block_m=bm, top_k=top_k, topk_weights=tw, out=out, config=cfg)
        outs.append(out)
    ref = reference.indexed_gemm(a, (packed, scales), *route, block_m=bm, top_k=top_k, topk_weights=tw)
    torch.cuda.synchronize()
    err = float((outs[0].float() - ref.float()).norm() / ref.float().norm())
    worst = max(worst, err)
    print(bm, widths, n, k, f"rel err {err:.2e}", "NaN" if outs[0].isnan().any() else "",
          "same" if torch.equal(outs[0], outs[1]) else "DIFFER")
    assert torch.equal(outs[0], outs[1]) and not outs[0].isnan().any()
assert worst < 5e-3, worst
print("ok")
