# ruff: noqa
"""Session 36: compute-sanitizer target: the decode kernel's 32-token short-K tiles in the dynamic order
(the plan's ``short_k_config(n, 32)``: 512 channels, items from a global counter), N = 7168 and 7184 (a
partial last tile), K = 256, with and without an expert map, each launched twice (the counter resets
itself) and against the reference."""
import torch

import chord_kernels
from chord_kernels import reference
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import gemm
from chord_kernels.indexed.heuristics import short_k_config
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(36)
worst = 0.0
for n, mapped in ((7168, False), (7184, True)):
    e, m, top_k, k, bm = 6, 90, 2, 256, 32
    cfg = short_k_config(n, bm)
    assert cfg.schedule == "dynamic", cfg
    packed, scales = random_quantized(e, n, k, generator=g, device=dev)
    w = chord_kernels.pack("indexed", packed, scales, profile="h200_tp8")
    ge = 2 * e if mapped else e
    ids = torch.rand(m, ge, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    emap = None
    if mapped:
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
    print(n, mapped, f"rel err {err:.2e}", "NaN" if outs[0].isnan().any() else "",
          "same" if torch.equal(outs[0], outs[1]) else "DIFFER")
    assert torch.equal(outs[0], outs[1])
assert worst < 5e-3, worst
print("ok")
