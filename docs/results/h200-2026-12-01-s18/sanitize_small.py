"""Session 18: small launches for compute-sanitizer (racecheck, memcheck): the 24-token one-block
items (gathered rows and masked rows by tensor copies), the 80-token blocks with row widths, the
64 x 2 items, and the epilogue top-k sum on routing-order rows with N = 288 (three 128-channel units:
the last N tile's second warpgroup has no channels)."""
import torch

import chord_kernels
from chord_kernels import indexed
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import routing_order_rows
from chord_kernels.indexed.wgmma import choose_wgmma_config
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(0)
e, h, inter, m = 4, 288, 256, 40
w13 = chord_kernels.pack("indexed", *random_quantized(e, 2 * inter, h, generator=g, device=dev), profile="h200_ep8")
w2 = chord_kernels.pack("indexed", *random_quantized(e, h, inter, generator=g, device=dev), profile="h200_ep8")
ids = torch.rand(m, e, generator=g, device=dev).argsort(dim=1)[:, :2].to(torch.int32)
tw = torch.rand(m, 2, generator=g, device=dev)
hidden = torch.randn(m, h, generator=g, device=dev).to(torch.bfloat16)
for bm, tok_e in ((24, 20.0), (80, None), (64, None)):
    r = align_block_size(ids, bm, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    act = indexed.gemm(hidden, w13, *route, block_m=bm, top_k=2, activation="silu", zero_nonlocal=False, tok_e=tok_e)
    n = routing_order_rows(w13, w2, route, bm, dev)
    ordered = torch.empty(n, inter, dtype=torch.bfloat16, device=dev)
    indexed.gemm(hidden, w13, *route, block_m=bm, top_k=2, activation="silu", zero_nonlocal=False, out=ordered,
                 out_position=True, tok_e=tok_e)
    two = indexed.gemm_topk_sum(ordered, w2, *route, tw, ids, block_m=bm, routing_order=True)
    cfg = choose_wgmma_config(h, inter, bm, tok_e).topk_sum_twin(h)
    fused = indexed.gemm_topk_sum(ordered, w2, *route, tw, ids, block_m=bm, routing_order=True, config=cfg) \
        if cfg else two
    torch.cuda.synchronize()
    print(bm, choose_wgmma_config(h, inter, bm, tok_e), "fused == two steps:", torch.equal(fused, two), flush=True)
gm = chord_kernels.pack("masked", *random_quantized(e, 2 * inter, h, generator=g, device=dev), profile="h200_ep8")
max_m = 32
counts = torch.tensor([0, 17, 32, 5], dtype=torch.int32, device=dev)
a = torch.randn(e * max_m, h, generator=g, device=dev).to(torch.bfloat16)
out = chord_kernels.grouped.masked(a, gm, counts, 12, activation="silu")
torch.cuda.synchronize()
print("sanitize_small done", flush=True)
