# ruff: noqa
"""Session 27: small launches of every WGMMA configuration kind that commits per K step (the code
the step-1 re-load changed) for compute-sanitizer, each against the reference (fresh random data,
poisoned outputs, an expert map with a hot expert, top-k weights, N = 264 / 512 with a partial last
N tile, K = 4128 with a one-group last K tile or K = 256 with runs of N tiles) and twice bit for
bit: four warpgroups at 24 (one block and pairs), 32 and 48 tokens, the wide 24 x 7 items on the
weight ring, 64 x 2 items with row widths, 80-token items with row widths, 64 x 2 runs at K = 256,
then the grouped masked mode's tensor-copy rows."""
import dataclasses

import torch

import chord_kernels
from chord_kernels import grouped, indexed, reference
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.wgmma import WgmmaConfig
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(0)
e, m, top_k = 6, 70, 2
FOUR = dict(mt=2, bk=256, stages=2, consumers=4, consumer_regs=104)
CASES = [
    ("four24", 512, 4128, WgmmaConfig(24, dynamic=True, **FOUR)),
    ("pairs24", 512, 4128, WgmmaConfig(24, items=2, dynamic=False, **FOUR)),
    ("four32", 264, 4128, WgmmaConfig(32, dynamic=True, **FOUR)),
    ("four48", 512, 4128, WgmmaConfig(48, dynamic=False, **FOUR)),
    ("wide24x7", 264, 4128, WgmmaConfig(24, mt=2, bk=128, stages=3, items=7, weight_ring=True, dynamic=True,
                                        widths=(6, 7), consumer_regs=224)),
    ("x64x2_rows", 512, 4128, WgmmaConfig(64, mt=2, bk=256, stages=2, items=2, dynamic=True, row_widths=(96, 112))),
    ("x80_rows", 264, 4128, WgmmaConfig(80, mt=2, bk=256, stages=2, dynamic=True, row_widths=(64, 72))),
    ("runs64x2", 512, 256, WgmmaConfig(64, mt=2, bk=256, stages=3, items=2, n_run=7, pingpong=True)),
]
worst = 0.0
for name, n, k, cfg in CASES:
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
    ids = torch.rand(m, 4 * e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    hot = ids[: m // 2]  # global expert 0 on half the tokens: an expert of 35+ rows
    hot[:, 1] = torch.where(hot[:, 0] == 0, hot[:, 1], torch.where(hot[:, 1] == 0, hot[:, 0], hot[:, 1]))
    hot[:, 0] = 0
    emap = torch.full((4 * e,), -1, dtype=torch.int32, device=dev)
    emap[torch.randperm(4 * e - 1, generator=g, device=dev)[:e - 1] + 1] = torch.arange(e - 1, dtype=torch.int32, device=dev)
    emap[0] = e - 1
    tw = torch.rand(m, top_k, generator=g, device=dev)
    act = torch.randn(m, k, generator=g, device=dev).to(torch.bfloat16)
    r = align_block_size(ids, cfg.block_m, 4 * e, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    outs = []
    for _ in range(2):
        out = torch.full((m * top_k, n), float("nan"), dtype=torch.bfloat16, device=dev)
        indexed.gemm(act, w, *route, block_m=cfg.block_m, top_k=top_k, topk_weights=tw, out=out, config=cfg)
        outs.append(out)
    want = reference.indexed_gemm(act, w, *route, block_m=cfg.block_m, top_k=top_k, topk_weights=tw).float()
    local = emap[ids.reshape(-1).long()] >= 0  # slots of experts on this rank (the rest: zeros)
    got = outs[0].float()
    err = ((got[local] - want[local]).norm() / want[local].norm()).item()
    worst = max(worst, err)
    ok = torch.equal(outs[0], outs[1]) and err < 1e-2 and bool(torch.isfinite(got).all())
    print(f"{name:11s} n={n} k={k} rel_err {err:.2e} repeat_equal {torch.equal(outs[0], outs[1])} {'ok' if ok else 'FAIL'}",
          flush=True)
    assert ok, name
wm = chord_kernels.pack("masked", *random_quantized(e, 512, 4128, generator=g, device=dev), profile="h200_ep8")
masked_m = torch.tensor([0, 30, 1, 29, 17, 0], dtype=torch.int32, device=dev)
a = torch.randn(e, 30, 4128, generator=g, device=dev).to(torch.bfloat16)
out = grouped.masked(a, wm, masked_m, 12, activation="silu")
want = reference.silu_and_mul(reference.grouped_masked(a, wm, masked_m)).float()
rows = torch.arange(30, device=dev)[None, :] < masked_m[:, None]
err = ((out[rows].float() - want[rows]).norm() / want[rows].norm()).item()
print("masked rel_err", f"{err:.2e}", "ok" if err < 1e-2 else "FAIL", flush=True)
assert err < 1e-2
print("sanitize_reload done, worst", f"{worst:.2e}", flush=True)
