# ruff: noqa
"""Session 37: compute-sanitizer target: the WGMMA kernel's one-block items with row widths and per-K-group
commits (the planned 32-token items' 24, and 48-token items at 32 and 40), plain with top-k weights and with
SiLU-and-mul fused, N = 256 / 264 (a partial last N tile), K = 1056 (a short last stage) and 2048 (whole
stages), with an expert map and a hot expert; each launched twice and against the reference (the fused
output against the two steps, bit for bit)."""
import torch

import chord_kernels
from chord_kernels import reference
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import gemm
from chord_kernels.indexed.wgmma import WgmmaConfig
from chord_kernels.ops import silu_and_mul
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(37)
worst = 0.0
for bm, widths, n, k, whole in ((32, (24,), 264, 1056, False), (48, (32, 40), 256, 2048, True)):
    e, m, top_k = 6, 120, 2
    cfg = WgmmaConfig(bm, 2, 256, 3, dynamic=True, row_widths=widths, whole_stages=whole)
    assert not cfg.commit_per_step
    packed, scales = random_quantized(e, n, k, generator=g, device=dev)
    w = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
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
    plain = gemm(a, w, *route, block_m=bm, top_k=top_k, config=cfg)
    fused = [gemm(a, w, *route, block_m=bm, top_k=top_k, config=cfg, activation="silu") for _ in range(2)]
    torch.cuda.synchronize()
    err = float((outs[0].float() - ref.float()).norm() / ref.float().norm())
    worst = max(worst, err)
    two = silu_and_mul(plain)
    print(bm, widths, n, k, f"rel err {err:.2e}", "NaN" if outs[0].isnan().any() else "",
          "same" if torch.equal(outs[0], outs[1]) else "DIFFER",
          "fused = two steps" if torch.equal(fused[0], two) and torch.equal(fused[1], two) else "FUSED DIFFERS")
    assert torch.equal(outs[0], outs[1]) and torch.equal(fused[0], two) and torch.equal(fused[1], two)
assert worst < 5e-3, worst
print("ok")
