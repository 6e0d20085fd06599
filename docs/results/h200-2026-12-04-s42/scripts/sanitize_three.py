# ruff: noqa
"""Session 42: compute-sanitizer target: the WGMMA kernel on three consumer warpgroups of two tiles (as planned
for the down's 24- and 32-token one-block items): N = 1000 (three N tiles, the last with a partial block and
blocks past N), K = 2048 (whole stages) and 2080 (a short last stage), an expert map and a hot expert, top-k
weights, and the top-k sum twin; each launched twice and against the reference."""
import torch

import chord_kernels
from chord_kernels import reference
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import gemm
from chord_kernels.indexed.api import gemm_topk_sum
from chord_kernels.indexed.wgmma import WgmmaConfig
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(42)
import os
TWO = os.environ.get("CONSUMERS") == "2"  # the two-warpgroup configurations planned before, as a control
worst = 0.0
for bm, stages, n, k, whole, widths in ((24, 3, 1000, 2048, True, ()), (32, 2, 1000, 2080, False, (24,))):
    if TWO:
        stages += 1
    e, m, top_k = 6, 120, 2
    cfg = WgmmaConfig(bm, 2, 256, stages, consumers=2 if TWO else 3, consumer_regs=216 if TWO else 128,
                      whole_stages=whole, row_widths=widths, dynamic=True)
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
    summed = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=dev)
    act = (torch.randn(m * top_k, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    gemm_topk_sum(act, w, *route, tw, ids, block_m=bm, expert_map=emap, out=summed, config=cfg.topk_sum_twin(n))
    rows = gemm(act, w, *route, block_m=bm, top_k=1, topk_weights=tw, config=cfg)
    torch.cuda.synchronize()
    want = rows.float().view(m, top_k, n).sum(1)
    err = float((outs[0].float() - ref.float()).norm() / ref.float().norm())
    err_sum = float((summed.float() - want).norm() / want.norm())
    worst = max(worst, err, err_sum)
    print(bm, n, k, f"rel err {err:.2e}, top-k sum {err_sum:.2e}", "NaN" if outs[0].isnan().any() or summed.isnan().any() else "",
          "same" if torch.equal(outs[0], outs[1]) else "DIFFER")
    assert torch.equal(outs[0], outs[1]) and not outs[0].isnan().any() and not summed.isnan().any()
assert worst < 5e-3, worst
print("ok")
