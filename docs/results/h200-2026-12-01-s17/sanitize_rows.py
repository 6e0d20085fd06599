"""Small launches with row widths for compute-sanitizer: 80-token blocks (64, 72) and 64 x 2 items
(96, 112) gathering rows, SiLU fused in routing order, the down with the fused top-k sum (80-token
blocks) and plain; masked rows by tensor copies (80-token blocks). K = 2336: a short last stage."""
import dataclasses
import functools
import os
import sys

import torch

import chord_kernels
from chord_kernels import indexed
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import wgmma as W
from chord_kernels.indexed.api import MaskedRows, routing_order_rows, run_gemm
from chord_kernels.indexed.wgmma import choose_wgmma_config
from chord_kernels.jit import CudaKernel
from chord_kernels.routing import align_block_size

BASE = len(sys.argv) > 1 and sys.argv[1] == "base"
if BASE:  # the committed kernel (its header inlined), configurations without row widths
    HDR = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "wgmma_base.cuh")).read()

    @functools.cache
    def _base(cfg):
        src = cfg.source().replace('#include "chord/indexed/wgmma.cuh"', HDR)
        return CudaKernel(name="indexed_wgmma_base", source=src, entry=W.ENTRY, arch=W.ARCH)
    W.wgmma_kernel = _base
    _choose = W.choose_wgmma_config
    choose_wgmma_config = lambda *a, **k: dataclasses.replace(_choose(*a, **k), row_widths=())  # noqa: E731
dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(0)
e, h, m, inter = 4, 2336, 300, 512
w13 = chord_kernels.pack("indexed", *random_quantized(e, 2 * inter, h, generator=g, device=dev), profile="h200_ep8")
w2 = chord_kernels.pack("indexed", *random_quantized(e, h, inter, generator=g, device=dev), profile="h200_ep8")
for bm in (80, 64):
    gu = choose_wgmma_config(2 * inter, h, bm)
    dn = choose_wgmma_config(h, inter, bm)
    assert gu.row_widths or BASE, gu
    print(gu, dn, sep="\n")
    for routing in ("uniform", "hot"):
        ids = torch.rand(m, e, generator=g, device=dev).argsort(dim=1)[:, :2].to(torch.int32)  # distinct
        if routing == "hot":
            ids[:, 0] = torch.where(ids[:, 1] == 1, ids[:, 0], 1)
        tw = torch.rand(m, 2, generator=g, device=dev)
        hidden = torch.randn(m, h, generator=g, device=dev).to(torch.bfloat16)
        r = align_block_size(ids, bm, e)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        rows = indexed.gemm(hidden, w13, *route, block_m=bm, top_k=2, topk_weights=tw, config=gu)
        n = routing_order_rows(w13, w2, route, bm, dev)
        act = torch.empty(n, inter, dtype=torch.bfloat16, device=dev)
        run_gemm(hidden, w13, route, block_m=bm, top_k=2, activation="silu", zero_nonlocal=False, out=act,
                 out_position=True, config=dataclasses.replace(gu, silu_mul=True))
        out = indexed.gemm_topk_sum(act, w2, *route, tw, ids, block_m=bm, routing_order=True, config=dn)
        summed = indexed.gemm_topk_sum(act, w2, *route, tw, ids, block_m=bm, routing_order=True,
                                       config=dn.topk_sum_twin(h)) if dn.topk_sum_twin(h) else out
        print(bm, routing, rows.float().abs().sum().item(), out.float().abs().sum().item(), summed.float().abs().sum().item())
# masked rows (tensor copies), 80-token blocks
gm = chord_kernels.pack("masked", *random_quantized(e, 2 * inter, h, generator=g, device=dev), profile="h200_ep8")
max_m = 96
masked_m = torch.tensor([0, 57, 96, 70], dtype=torch.int32, device=dev)
a = torch.randn(e * max_m, h, generator=g, device=dev).to(torch.bfloat16)
cfg = dataclasses.replace(choose_wgmma_config(2 * inter, h, 80), tma_rows=True)
out = torch.empty(e * max_m, 2 * inter, dtype=torch.bfloat16, device=dev)
run_gemm(a, gm, MaskedRows(masked_m, max_m), block_m=80, top_k=1, out=out, config=cfg, zero_nonlocal=False)
torch.cuda.synchronize()
print("sanitize_rows done")
