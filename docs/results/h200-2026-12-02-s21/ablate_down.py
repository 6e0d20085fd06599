# ruff: noqa: B023, E402  (an experiment script: closures timed within their loop iteration, imports after the precompile switch)
"""Session 21: where TP8's down (N = 7168, K = 256, 64 x 2 items) spends its time. Variants of the
planned kernel with a part removed (outputs garbage except base), interleaved CUDA graphs.
argv[1] == precompile: compile only."""
import dataclasses
import functools
import json
import os
import sys

import torch

from chord_kernels.indexed import wgmma as W
from chord_kernels.jit import CudaKernel

SRC = open(os.path.join(os.path.dirname(W.__file__), "..", "include", "chord", "indexed", "wgmma.cuh")).read()
EDITS = {
    "base": [],
    "no_store": [("store_chunk(args, n_out, slot, channel, v, aligned);",
                  "if (v.x == 0x7fc07fc1u) store_chunk(args, n_out, slot, channel, v, aligned);")],
    "no_epi": [("wgmma_epilogue<Cfg, kN>(args, st, epi, ntile, warp, lane);",
                "if (lane >= 32) wgmma_epilogue<Cfg, kN>(args, st, epi, ntile, warp, lane);")],
    "no_act": [("gather(true);\n", "if (args.n < 0) gather(true);\n"),
               ("gather(false);\n", "if (args.n < 0) gather(false);\n")],
    "no_mma": [("      MMA::mma(st.template tile<kN>(i), a[i][0]", "      if (lane >= 32) MMA::mma(st.template tile<kN>(i), a[i][0]"),
               ("      MMA::mma(st.template tile<kN>(i), a[i][4 * ks]", "      if (lane >= 32) MMA::mma(st.template tile<kN>(i), a[i][4 * ks]")],
}
PP_WAIT = ("  for (int kc = 0; kc < num_kc; ++kc) {\n    if (kc > 0) {",
           "  named_barrier(4 + consumer, 256);  // PP\n  for (int kc = 0; kc < num_kc; ++kc) {\n    if (kc > 0) {")
PP_EARLY = ("  wgmma::wait_group<0>();\n  if (lane == 0) {\n    ptx::mbarrier_arrive(empty0 + prev * 8);",
            "  asm volatile(\"bar.arrive %0, 256;\" ::\"r\"(5 - consumer) : \"memory\");  // PP\n"
            "  wgmma::wait_group<0>();\n  if (lane == 0) {\n    ptx::mbarrier_arrive(empty0 + prev * 8);")
PP_LATE = ("  named_barrier(2 + consumer, 128);  // the slots and weights copied by the other warps are visible\n",
           "  asm volatile(\"bar.arrive %0, 256;\" ::\"r\"(5 - consumer) : \"memory\");  // PP\n"
           "  named_barrier(2 + consumer, 128);  // the slots and weights copied by the other warps are visible\n")
PP_START = ("  Ring ring;\n  for (;;) {",
            "  Ring ring;\n  if (consumer == 1) asm volatile(\"bar.arrive 4, 256;\" ::: \"memory\");  // PP\n  for (;;) {")
PP_END = ("    if (h.item < 0) break;", "    if (h.item < 0) {\n      if (consumer == 0) named_barrier(4, 256);\n      break;\n    }")
EDITS["pp"] = [PP_WAIT, PP_EARLY, PP_START, PP_END]
EDITS["pp_late"] = [PP_WAIT, PP_LATE, PP_START, PP_END]
EDITS["pp_no_epi"] = [PP_WAIT, PP_EARLY, PP_START, PP_END] + EDITS["no_epi"]
VARIANTS = os.environ.get("VARIANTS", ",".join(EDITS)).split(",")
EDITS = {t: EDITS[t] for t in ["base"] + [v for v in VARIANTS if v != "base"]}
CUR = ["base"]
_orig = W.wgmma_kernel


@functools.cache
def variant_kernel(cfg, tag):
    hdr = SRC
    for a, b in EDITS[tag]:
        assert a in hdr, (tag, a)
        hdr = hdr.replace(a, b)
    src = cfg.source().replace('#include "chord/indexed/wgmma.cuh"', hdr)
    return CudaKernel(name=f"indexed_wgmma_{tag}", source=src, entry=W.ENTRY, arch=W.ARCH)


W.wgmma_kernel = lambda cfg: _orig(cfg) if CUR[0] == "base" else variant_kernel(cfg, CUR[0])
N, K, E = 7168, 256, 384
TOKENS = [int(t) for t in os.environ.get("TOKENS", "4096,8192").split(",")]
BLOCK = os.environ.get("BLOCK")

if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for t in TOKENS:
        import chord_kernels
        from chord_kernels import indexed
        from chord_kernels.formats import random_quantized
        w0 = chord_kernels.pack("indexed", *random_quantized(E, 64, 64), profile="h200_tp8")
        c = W.choose_wgmma_config(N, K, indexed.choose_block_m(w0, t * 8), t * 8 / E)
        for cc in (c, dataclasses.replace(c, tma_rows=True)):
            for tag in EDITS:
                if tag == "no_act" and cc.tma_rows:
                    continue
                kk = _orig(cc) if tag == "base" else variant_kernel(cc, tag)
                ks[kk.source] = kk
    with ThreadPoolExecutor(int(os.environ.get("JOBS", "8"))) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels compiled", flush=True)
    sys.exit(0)

import chord_kernels
from chord_bench.timing import interleaved
from chord_kernels import indexed
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
    bm = indexed.choose_block_m(w, m * 8)
    r = align_block_size(ids, bm, E)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    c = W.choose_wgmma_config(N, K, bm, m * 8 / E)
    cap = r.expert_ids.numel()
    a_routed = (torch.randn(cap * bm, K, generator=gen, device=dev) * 0.5).to(torch.bfloat16)
    for mode in ("gather", "routed"):
        outs, fns = {}, {}
        for tag in EDITS:
            if tag == "no_act" and mode == "routed":
                continue
            outs[tag] = torch.full((m * 8, N), float("nan"), dtype=torch.bfloat16, device=dev)

            def f(out=outs[tag], tag=tag):
                CUR[0] = tag
                if mode == "gather":
                    run_gemm(a, w, route, block_m=bm, top_k=1, topk_weights=tw, out=out, config=c, zero_nonlocal=False)
                else:
                    run_gemm(a_routed, w, route, block_m=bm, top_k=1, topk_weights=tw, out=out, config=c,
                             zero_nonlocal=False, block_rows=True, num_slots=m * 8)
                CUR[0] = "base"
            fns[tag] = f
            f()
        torch.cuda.synchronize()
        same = {t: bool(torch.equal(o, outs["base"])) for t, o in outs.items()}
        us = {t: x.median_us() for t, x in interleaved(fns, rounds=9).items()}
        res.append({"tokens": m, "mode": mode, "block_m": bm, "config": str(c), "us": us, "bit_identical": same})
        print(f"tp8_{m} {mode} down {c.block_m}x{c.items}: " + "  ".join(
            f"{t} {v:7.1f} ({v / us['base'] - 1:+.0%}{'' if same[t] else ' x'})" for t, v in us.items()), flush=True)
    json.dump(res, open(f"{OUT}/ablate_down.json", "w"), indent=1)
