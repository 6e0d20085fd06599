# ruff: noqa: I001  (an experiment script as it ran)
"""Session 22: small launches of the bulk-store epilogue for compute-sanitizer: slot-order and
routing-order rows, SiLU-and-mul, runs of N tiles, 8- to 128-token items, an N not a multiple of 8
(threads' stores), M = 1; each against the reference (bf16 rounding bound)."""
import dataclasses
import sys

import torch

import chord_kernels
from chord_kernels import indexed
from chord_kernels import reference
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import run_gemm
from chord_kernels.indexed.wgmma import WgmmaConfig
from chord_kernels.routing import align_block_size

CONFIGS = [WgmmaConfig(8, 2, 256, 3), WgmmaConfig(32, 2, 256, 3, dynamic=True), WgmmaConfig(64, 2, 256, 2, items=2),
           WgmmaConfig(40, 2, 256, 3, n_run=3, pingpong=True), WgmmaConfig(24, 2, 128, 3, items=7, weight_ring=True,
                                                                              widths=(6, 7), consumer_regs=224)]
e, k, top_k = 4, 224, 2
if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    ks = [x.kernel() for c in CONFIGS for x in (c, dataclasses.replace(c, silu_mul=True))]
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks))
    print(len(ks), "kernels compiled", flush=True)
    sys.exit(0)
dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(0)
bad = 0
for n in (1288, 1290, 640):
    packed, scales = random_quantized(e, n, k, generator=g, device=dev)
    w = chord_kernels.pack("indexed", packed, scales, profile="h200_tp8")
    for m in (1, 60):
        ids = torch.rand(m, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
        tw = torch.rand(m, top_k, generator=g, device=dev)
        a = torch.randn(m, k, generator=g, device=dev).to(torch.bfloat16)
        for cfg in CONFIGS:
            if cfg.n_run and k > 256:
                continue
            silu = n == 640
            r = align_block_size(ids, cfg.block_m, e)
            route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
            want = reference.indexed_gemm(a, (packed, scales), *route, block_m=cfg.block_m, top_k=top_k,
                                          topk_weights=None if silu else tw).float()
            if silu:
                want = reference.silu_and_mul(want.to(torch.bfloat16)).float()
            out = torch.full((m * top_k, n // 2 if silu else n), float("nan"), dtype=torch.bfloat16, device=dev)
            run_gemm(a, w, route, block_m=cfg.block_m, top_k=top_k, topk_weights=None if silu else tw, out=out,
                     config=cfg, activation="silu" if silu else None)
            cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, cfg.block_m) * cfg.block_m
            ordered = torch.full((cap, out.shape[1]), float("nan"), dtype=torch.bfloat16, device=dev)
            run_gemm(a, w, route, block_m=cfg.block_m, top_k=top_k, topk_weights=None if silu else tw, out=ordered,
                     config=cfg, activation="silu" if silu else None, out_position=True, zero_nonlocal=False)
            sti = r.sorted_token_ids[:cap].long()
            real = sti < m * top_k
            same_order = torch.equal(ordered[: sti.numel()][real], out[sti[real]])
            torch.cuda.synchronize()
            err = ((out.float() - want).abs().max() / want.abs().max().clamp_min(1e-6)).item()
            ok = err < 1e-2 and not out.isnan().any().item() and same_order
            bad += not ok
            print(f"n={n} m={m} {cfg.block_m}x{cfg.items} run={cfg.n_run} silu={silu} err={err:.2e} {'ok' if ok else 'BAD'}",
                  flush=True)
print("sanitize_epi done, bad:", bad, flush=True)
