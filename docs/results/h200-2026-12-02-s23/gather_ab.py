# ruff: noqa
"""Session 23: the activation gather's cp.async variants in gate_up (the header's text with its
cp_async_16 rewritten): `hint` (the header: L2::cache_hint with an evict_last policy), `plain` (no
hint), `pf256` (no hint, L2::256B prefetch). gate_up as moe_experts runs it (SiLU fused,
routing-order output), the same plan and routing, interleaved CUDA graphs, outputs compared bit for
bit on the real rows. argv[1] == precompile: compile only."""
import functools, json, os, sys
from pathlib import Path
import torch
from chord_kernels.indexed import wgmma as W
from chord_kernels.jit import CudaKernel

HDR = Path(W.__file__).parent.parent / "include/chord/indexed/wgmma.cuh"
TEXT = HDR.read_text()
OLD = '"cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "l"(policy)'
assert OLD in TEXT
VARIANTS = {
    "plain": TEXT.replace(OLD, '"cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src)'),
    "pf256": TEXT.replace(OLD, '"cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(dst), "l"(src)'),
}
USE = [None]
_kernel = W.WgmmaConfig.kernel


@functools.cache
def _variant_kernel(cfg, name):
    src = cfg.source().replace('#include "chord/indexed/wgmma.cuh"', VARIANTS[name])
    return CudaKernel(name=f"indexed_wgmma_{name}", source=src, entry=W.ENTRY, arch=W.ARCH)


W.WgmmaConfig.kernel = lambda self: _variant_kernel(self, USE[0]) if USE[0] else _kernel(self)

import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import choose_block_m
from chord_kernels.indexed.api import _silu_mul_twin, routing_order_rows, run_gemm
from chord_kernels.indexed.planner import configs_for
from chord_kernels.routing import align_block_size

H, E, TOPK = 7168, 384, 8
SHAPES = {"tp8": (E, 256), "ep8": (48, 2048)}
CASES = [(m, int(t)) for m, t in (x.split(":") for x in os.environ.get(
    "CASES", "ep8:768,ep8:2064,ep8:6144,ep8:16368,tp8:1024,tp8:4096,tp8:8192").split(","))]


def bm_of(mode, tokens):
    e, i = SHAPES[mode]
    w0 = chord_kernels.pack("indexed", *random_quantized(e, 2 * i, 64), profile=f"h200_{mode}")
    return choose_block_m(w0, tokens * TOPK * e // E)


if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for mode, tokens in CASES:
        e, i = SHAPES[mode]
        for c in configs_for(2 * i, H, bm_of(mode, tokens), "sm_90a"):
            s = _silu_mul_twin(c, 2 * i)
            if isinstance(s, W.WgmmaConfig):
                for k in (_kernel(s), *(_variant_kernel(s, v) for v in VARIANTS)):
                    ks[k.source] = k
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels compiled", flush=True)
    sys.exit(0)

from chord_bench.timing import interleaved
dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
g = torch.Generator(device=dev).manual_seed(23)
W13 = {mode: chord_kernels.pack("indexed", *random_quantized(e, 2 * i, H, generator=g, device=dev), profile=f"h200_{mode}")
       for mode, (e, i) in SHAPES.items()}
W2 = {mode: chord_kernels.pack("indexed", *random_quantized(e, H, i, generator=g, device=dev), profile=f"h200_{mode}")
      for mode, (e, i) in SHAPES.items()}


def variant(fn, name):
    def f():
        USE[0] = name
        try:
            fn()
        finally:
            USE[0] = None
    return f


res = []
for mode, tokens in CASES:
    w13, w2 = W13[mode], W2[mode]
    gen = torch.Generator(device=dev).manual_seed(tokens)
    hidden = (torch.randn(tokens, H, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    probs = torch.softmax(torch.randn(tokens, E, device=dev, generator=gen), dim=-1)
    ids = probs.topk(TOPK, dim=-1)[1].to(torch.int32).contiguous()
    emap = None
    if mode == "ep8":
        emap = torch.full((E,), -1, dtype=torch.int32, device=dev)
        emap[:48] = torch.arange(48, dtype=torch.int32, device=dev)
    tok_e = tokens * TOPK / E
    bm = bm_of(mode, tokens)
    r = align_block_size(ids, bm, E, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    in_order = routing_order_rows(w13, w2, route, bm, dev, tok_e) > 0
    fns, outs = {}, {}
    for name in ("hint", *VARIANTS):
        o = run_gemm(hidden, w13, route, block_m=bm, top_k=TOPK, activation="silu", zero_nonlocal=False,
                     out_position=in_order, tok_e=tok_e)
        o.fill_(float("nan"))
        outs[name] = o
        fns[name] = variant(lambda o=o: run_gemm(hidden, w13, route, block_m=bm, top_k=TOPK, activation="silu",
                                                 zero_nonlocal=False, out_position=in_order, tok_e=tok_e, out=o),
                            None if name == "hint" else name)
        fns[name]()
    torch.cuda.synchronize()
    real = ~torch.isnan(outs["hint"].float()).any(dim=1)
    same = all(torch.equal(outs["hint"][real], o[real]) for o in outs.values())
    us = {t: x.median_us() for t, x in interleaved(fns, rounds=7).items()}
    res.append({"mode": mode, "tokens": tokens, "rows_per_expert": tok_e, "block_m": bm, "us": us, "bit_identical_real_rows": same})
    print(f"{mode} {tokens:6d} rows/e {tok_e:6.1f} bm {bm:3d} | gate_up hint {us['hint']:7.1f}"
          + "".join(f" {v} {us[v] / us['hint'] - 1:+.1%}" for v in VARIANTS) + f" | bits {same}", flush=True)
    json.dump(res, open(f"{OUT}/gather_ab.json", "w"), indent=1)
