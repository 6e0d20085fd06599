# ruff: noqa
"""Session 35: compute-sanitizer target: the decode kernel's fused SiLU-and-mul (pairs of gate and up
warps sharing their staging rows through named barriers): 16-token blocks with row widths (strided),
8-token blocks (strided), 32-token blocks of eight warps (dynamic), an expert map, small, each bit for
bit against the GEMM + ops.silu_and_mul."""
import torch

import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import gemm
from chord_kernels.indexed.decode import DecodeConfig
from chord_kernels.ops import silu_and_mul
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(36)
for n, k, cfg in ((512, 2048, DecodeConfig(block_m=16, mt=4, stages=2, ctas_per_sm=2, row_widths=True, silu_mul=True)),
                  (512, 1056, DecodeConfig(block_m=8, mt=4, stages=2, ctas_per_sm=2, silu_mul=True)),
                  (1024, 256, DecodeConfig(block_m=32, warps=8, mt=4, stages=2, ctas_per_sm=1, schedule="dynamic",
                                           silu_mul=True))):
    e, m, top_k = 6, 45, 2
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
    ids = torch.rand(m, 2 * e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    emap = torch.full((2 * e,), -1, dtype=torch.int32, device=dev)
    emap[::2] = torch.arange(e, dtype=torch.int32, device=dev)
    a = (torch.randn(m, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    r = align_block_size(ids, cfg.block_m, 2 * e, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    fused = gemm(a, w, *route, block_m=cfg.block_m, top_k=top_k, config=cfg, activation="silu")
    plain = gemm(a, w, *route, block_m=cfg.block_m, top_k=top_k,
                 config=DecodeConfig(**{**cfg.__dict__, "silu_mul": False}))
    two = silu_and_mul(plain)
    torch.cuda.synchronize()
    same = torch.equal(fused, two)
    print(n, k, cfg.block_m, cfg.schedule, "bit for bit" if same else "DIFFER")
    assert same
print("ok")
