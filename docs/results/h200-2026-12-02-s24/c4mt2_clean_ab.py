# ruff: noqa
"""Session 24 (session 22's four_consumers.patch applied): four consumer warpgroups of two 64-channel tiles each
(mt 2, 512-channel N tiles, per-K-step commits, 104 consumer registers, 640 threads: no spills) against the planned two of two tiles, at the middle shapes' GEMMs
(plain gate_up without SiLU, down with top-k weights), slot-order rows, interleaved CUDA graphs,
bit for bit. argv[1] == precompile: compile only."""
import dataclasses
import json
import os
import sys

import torch

from chord_kernels.indexed import wgmma as W
from chord_kernels.indexed.wgmma import LIST_RESERVE, SMEM_LIMIT, WgmmaConfig

# (name, experts, n, k, slots, top_k, block)
CASES = [("ep8_tok16_gate_up", 48, 4096, 7168, 768, 1, 32), ("ep8_tok16_gate_up_silu", 48, 4096, 7168, 768, 1, 32), ("ep8_tok12_gate_up", 48, 4096, 7168, 576, 1, 24), ("ep8_tok16_down", 48, 7168, 2048, 768, 1, 32),
                  ("tp8_1024_gate_up", 384, 512, 7168, 8192, 8, 32), ("ep8_tok8_gate_up", 48, 4096, 7168, 384, 1, 24)]


def four(c, cons=4):
    regs = 104 if cons == 4 else 160
    st = max(s for s in range(2, 9) if dataclasses.replace(c, consumers=cons, mt=2, consumer_regs=regs, stages=s).smem_bytes(0) + LIST_RESERVE <= SMEM_LIMIT)
    return dataclasses.replace(c, consumers=cons, mt=2, consumer_regs=regs, stages=st)


def configs():
    for name, e, n, k, slots, top_k, bm in CASES:
        c = W.choose_wgmma_config(n, k, bm, slots / e)
        yield name, c, four(c), four(c)


if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    ks = {x.kernel().source: x.kernel() for _, c, f, t in configs() for x in (c, f, t)}
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels compiled", flush=True)
    sys.exit(0)

import chord_kernels
from chord_bench.timing import interleaved
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import run_gemm
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
res = []
for (name, e, n, k, slots, top_k, bm), (_, c, f, t) in zip(CASES, configs()):
    g = torch.Generator(device=dev).manual_seed(n + k + slots)
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
    tokens = slots // top_k
    a = (torch.randn(tokens, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    tw = torch.rand(slots, generator=g, device=dev)
    r = align_block_size(ids, bm, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    outs, fns = {}, {}
    for tag, cfg in (("two", c), ("four", f)):
        outs[tag] = torch.full((slots, n // 2 if "silu" in name else n), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[tag] = (lambda out=outs[tag], cfg=cfg: run_gemm(a, w, route, block_m=bm, top_k=top_k, out=out, config=cfg,
                                                            topk_weights=tw if "down" in name else None, activation="silu" if "silu" in name else None,
                                                            zero_nonlocal=False))
        fns[tag]()
    torch.cuda.synchronize()
    same = torch.equal(outs["two"], outs["four"])
    us = {t: x.median_us() for t, x in interleaved(fns, rounds=7).items()}
    res.append({"name": name, "two": str(c), "four": str(f), "three": str(t), "us": us, "bit_identical": same})
    print(f"{name:20s} two {us['two']:7.1f} four {us['four']:7.1f} ({us['four'] / us['two'] - 1:+.1%}) "
          f"bits {'same' if same else 'DIFF'} stages {c.stages}/{f.stages}/{t.stages}", flush=True)
    json.dump(res, open(f"{OUT}/c4mt2_ab.json", "w"), indent=1)
