"""Session 21: small launches of the runs of N tiles (resident activation tile, consumers in turns)
for compute-sanitizer: slot-order rows, routing-order rows (tensor copies), the epilogue top-k sum,
runs not dividing the N tiles and a short K; each checked bit for bit against items of one N tile."""
import dataclasses

import torch

import chord_kernels
from chord_kernels import indexed
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.wgmma import WgmmaConfig
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(0)
CONFIGS = [WgmmaConfig(40, 2, 256, 3, n_run=3, pingpong=True), WgmmaConfig(64, 2, 256, 3, items=2, n_run=2, pingpong=True),
           WgmmaConfig(24, 2, 256, 3, items=2, n_run=2, pingpong=True, dynamic=True)]
e, n, k, m, top_k = 4, 1288, 224, 60, 2
w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_tp8")
ids = torch.rand(m, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
tw = torch.rand(m, top_k, generator=g, device=dev)
act = torch.randn(m * top_k, k, generator=g, device=dev).to(torch.bfloat16)
for cfg in CONFIGS:
    r = align_block_size(ids, cfg.block_m, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    items = dataclasses.replace(cfg, n_run=0, pingpong=False, stages=2)
    outs = [indexed.gemm(act, w, *route, block_m=cfg.block_m, top_k=1, topk_weights=tw, config=c) for c in (cfg, items)]
    sums = [indexed.gemm_topk_sum(act, w, *route, tw, ids, block_m=cfg.block_m, config=c)
            for c in (cfg.topk_sum_twin(n), items)]
    cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, cfg.block_m) * cfg.block_m
    sti = r.sorted_token_ids[:cap].long()
    ordered = torch.zeros(cap, k, dtype=torch.bfloat16, device=dev)
    real = sti < m * top_k
    ordered[: sti.numel()][real] = act[sti[real]]
    routed = indexed.gemm_topk_sum(ordered, w, *route, tw, ids, block_m=cfg.block_m, config=cfg, routing_order=True)
    torch.cuda.synchronize()
    print(cfg.block_m, cfg.items, cfg.n_run, "rows equal:", torch.equal(outs[0], outs[1]), "sums equal:",
          torch.equal(sums[0], sums[1]), torch.equal(routed, sums[1]), flush=True)
print("sanitize_runs done", flush=True)
