"""Session 19: compute-sanitizer target: the decode kernel's short_k_config tiles (16, 24, 32-token
blocks; N = 7168 with a partial last tile at N = 7184, K = 256) through gemm_topk_sum, small."""
import torch

import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import gemm_topk_sum
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(3)
for n in (7168, 7184):
    e, k, m, top_k = 8, 256, 40, 2
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_tp8")
    ids = torch.rand(m, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    tw = torch.rand(m, top_k, generator=g, device=dev)
    a = (torch.randn(m * top_k, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    for bm in (16, 24, 32):
        r = align_block_size(ids, bm, e)
        out = gemm_topk_sum(a, w, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, tw, ids, block_m=bm)
        torch.cuda.synchronize()
        print(n, bm, float(out.float().abs().sum()))
