# ruff: noqa: B023, E402, E741, RUF005  (an experiment script: closures timed within their loop iteration, imports after the precompile switch)
"""Session 21: runs of N tiles with ping-pong consumers (single resident tile) on TP8's down, three ways:
2 or the most weight stages, and 64-token epilogue passes (e64: the staging tile doubled) instead of 32;
against the planned configuration, bit for bit, interleaved CUDA graphs. argv[1] == precompile."""
import dataclasses
import functools
import os
import sys

import torch

from chord_kernels.indexed import wgmma as W
from chord_kernels.jit import CudaKernel

N, K, E = 7168, 256, 384
TOKENS = [int(t) for t in os.environ.get("TOKENS", "2048,3072,4096,8192,12288").split(",")]
VARIANTS = ["r7pp", "r7pp_s2", "r7pp_e64", "r14pp_e64"]
EPI_LINE = "static constexpr int kEpiTokens = (kTile / 8 < 4 ? kTile / 8 : 4) * 8;"


@dataclasses.dataclass(frozen=True)
class E64(W.WgmmaConfig):
    def smem_bytes(self, list_cap):
        extra = (min(self.tile // 8, 8) - min(self.tile // 8, 4)) * 8 * (self.mt * 128 + 16)
        return super().smem_bytes(list_cap) + self.consumers * extra

    def source(self):
        src = W.WgmmaConfig.source(dataclasses.replace(W.WgmmaConfig(block_m=self.block_m), **{
            f.name: getattr(self, f.name) for f in dataclasses.fields(self)}))
        hdr = open(os.path.join(os.path.dirname(W.__file__), "..", "include", "chord", "indexed", "wgmma.cuh")).read()
        assert EPI_LINE in hdr
        hdr = hdr.replace(EPI_LINE, EPI_LINE.replace("< 4 ? kTile / 8 : 4", "< 8 ? kTile / 8 : 8"))
        src = src.replace('#include "chord/indexed/wgmma.cuh"', hdr)
        lines = [l for l in src.split("\n") if "host and device shared-memory plans differ" not in l
                 and not l.startswith("static_assert(Cfg::smem_bytes(0) ==")]
        return "\n".join(lines)

    def kernel(self):
        return _e64_kernel(self)


@functools.cache
def _e64_kernel(cfg):
    return CudaKernel(name="indexed_wgmma_e64", source=cfg.source(), entry=W.ENTRY, arch=W.ARCH)


def variant(c, tag):
    if tag == "base":
        return c
    n_run = int(tag[1:].split("pp")[0])
    stages = 2 if "_s2" in tag else min(8, W.max_stages(c.block_m, c.mt, 256, items=c.items, n_run=n_run))
    v = dataclasses.replace(c, n_run=n_run, pingpong=True, stages=stages)
    if "e64" in tag:
        v = E64(**{f.name: getattr(v, f.name) for f in dataclasses.fields(v)})
        while v.smem_bytes(0) + W.LIST_RESERVE > W.SMEM_LIMIT:
            v = dataclasses.replace(v, stages=v.stages - 1)
    return v


def block_for(tokens):
    import chord_kernels
    from chord_kernels import indexed
    from chord_kernels.formats import random_quantized
    w0 = chord_kernels.pack("indexed", *random_quantized(E, 64, 64), profile="h200_tp8")
    return indexed.choose_block_m(w0, tokens * 8)


if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for t in TOKENS:
        c = W.choose_wgmma_config(N, K, block_for(t), t * 8 / E)
        for tag in ["base"] + VARIANTS:
            for tma in (False, True):
                k = dataclasses.replace(variant(c, tag), tma_rows=tma).kernel()
                ks[k.source] = k
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels compiled", flush=True)
    sys.exit(0)

import json

import chord_kernels
from chord_bench.timing import interleaved
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import run_gemm
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
g = torch.Generator(device=dev).manual_seed(5)
w = chord_kernels.pack("indexed", *random_quantized(E, N, K, generator=g, device=dev), profile="h200_tp8")
res = []
for m in TOKENS:
    gen = torch.Generator(device=dev).manual_seed(m)
    a = (torch.randn(m * 8, K, generator=gen, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(m, E, generator=gen, device=dev).argsort(dim=1)[:, :8].to(torch.int32)
    tw = torch.rand(m * 8, generator=gen, device=dev)
    bm = block_for(m)
    r = align_block_size(ids, bm, E)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    c = W.choose_wgmma_config(N, K, bm, m * 8 / E)
    cap = r.expert_ids.numel()
    sti = r.sorted_token_ids.long()[: cap * bm]
    a_routed = torch.zeros(cap * bm, K, dtype=torch.bfloat16, device=dev)
    real = sti < m * 8
    a_routed[: sti.numel()][real] = a[sti[real]]
    for mode in ("gather", "routed"):
        outs, fns, cfgs = {}, {}, {}
        for tag in ["base"] + VARIANTS:
            cfg = cfgs[tag] = variant(c, tag)
            outs[tag] = torch.full((m * 8, N), float("nan"), dtype=torch.bfloat16, device=dev)

            def f(out=outs[tag], cfg=cfg):
                if mode == "gather":
                    run_gemm(a, w, route, block_m=bm, top_k=1, topk_weights=tw, out=out, config=cfg, zero_nonlocal=False)
                else:
                    run_gemm(a_routed, w, route, block_m=bm, top_k=1, topk_weights=tw, out=out, config=cfg,
                             zero_nonlocal=False, block_rows=True, num_slots=m * 8)
            fns[tag] = f
            f()
            torch.cuda.synchronize()
        same = {t: bool(torch.equal(o, outs["base"])) for t, o in outs.items()}
        us = {t: x.median_us() for t, x in interleaved(fns, rounds=7).items()}
        res.append({"tokens": m, "mode": mode, "block_m": bm, "us": us, "bit_identical": same,
                    "configs": {t: str(x) for t, x in cfgs.items()}})
        print(f"tp8_{m} {mode:6s} {c.block_m}x{c.items}: " + "  ".join(
            f"{t}(s{cfgs[t].stages}) {v:6.1f} ({v / us['base'] - 1:+.0%}{'' if same[t] else ' DIFF'})" for t, v in us.items()), flush=True)
        json.dump(res, open(f"{OUT}/epi_bench.json", "w"), indent=1)
