# ruff: noqa
"""Session 27: why gate_up's paired 24-token items (48-token tile, K loop at 24 and 48) beat
one-block 24-token items where every item is one block (session 26: -6 % at EP8 12 rows per
expert, no expert past 24 rows). Gate_up alone, SiLU fused, uniform routing.
argv[1]: precompile [threads] | time | ncu <config>  (ncu: four launches of one configuration).
Configurations: one (one-block items), pairs (planned), pairs_w2 (items of up to two blocks, the K
loop at 48 only: one-block items computed 48 wide), one_rw16 (one-block items, the K loop also at
16 tokens: an item with at most 16 real rows computes 16 columns)."""
import dataclasses, json, os, re, sys
from pathlib import Path

from chord_kernels.indexed.wgmma import WgmmaConfig

BASE = dict(mt=2, bk=256, stages=2, consumers=4, consumer_regs=104, dynamic=True)
CFGS = {
    "one": WgmmaConfig(24, **BASE),
    "pairs": WgmmaConfig(24, items=2, **BASE),
    "pairs_w2": WgmmaConfig(24, items=2, widths=(2,), **BASE),
    "one_rw16": WgmmaConfig(24, row_widths=(16,), **BASE),
}
CASES = (("ep8_tok12", 48, 4096, 576, 1), ("ep8_tok16", 48, 4096, 768, 1), ("tp8_tok10", 384, 512, 3840, 8))

if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    from chord_kernels.jit import CudaKernel
    silu = [dataclasses.replace(c, silu_mul=True) for c in CFGS.values()]
    ks = [CudaKernel(name="e_v", source=c.source(), entry=c.kernel().entry, arch="sm_90a", flags=("-Xptxas", "-v")) for c in silu]
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda c: c.kernel().compile("sm_90a"), silu))
        paths = list(ex.map(lambda k: k.compile("sm_90a"), ks))
    for t, p in zip(CFGS, paths):
        txt = Path(str(p).replace(".cubin", ".json")).read_text()
        print(t, "spill", re.findall(r"(\d+) bytes spill stores", txt), "C751", "C751" in txt)
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels.indexed.api import run_gemm
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")


def setup(name, e, n, slots, top_k, cfgs):
    g = torch.Generator(device=dev).manual_seed(slots + n)
    w = chord_kernels.pack("indexed", *random_quantized(e, n, 7168, generator=g, device=dev),
                           profile="h200_tp8" if e == 384 else "h200_ep8")
    tokens = slots // top_k
    a = (torch.randn(tokens, 7168, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32).contiguous()
    counts = torch.bincount(ids.reshape(-1).long(), minlength=e)
    fns, outs = {}, {}
    for t in cfgs:
        cfg = CFGS[t]
        r = align_block_size(ids, cfg.block_m, e)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        outs[t] = torch.full((slots, n // 2), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[t] = (lambda out=outs[t], cfg=cfg, route=route: run_gemm(a, w, route, block_m=cfg.block_m, top_k=top_k, out=out,
                                                                    config=cfg, activation="silu", zero_nonlocal=False))
    return fns, outs, counts


if sys.argv[1] == "ncu":
    fns, _, _ = setup(*CASES[0], [sys.argv[2]])
    for _ in range(4):
        fns[sys.argv[2]]()
    torch.cuda.synchronize()
    sys.exit(0)

from chord_bench.timing import interleaved
ROUNDS = int(os.environ.get("ROUNDS", "9"))
res = []
for case in CASES:
    fns, outs, counts = setup(*case, list(CFGS))
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = {t: torch.equal(outs["one"], o) for t, o in outs.items()}
    runs = []
    for rep in range(3):
        order = list(CFGS) if rep % 2 == 0 else list(CFGS)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=ROUNDS)
        runs.append({t: tm[t].median_us() for t in CFGS})
    res.append({"name": case[0], "us": runs, "bit_identical_to_one": same, "experts_over_16": int((counts > 16).sum()),
                "experts_over_24": int((counts > 24).sum())})
    print(f"{case[0]:10s} one " + " ".join(f"{r['one']:6.1f}" for r in runs) + "".join(
        f" | {t} " + " ".join(f"{r[t] / r['one'] - 1:+.1%}" for r in runs) + ("" if same[t] else " DIFF") for t in CFGS if t != "one")
          + f" | >16 {int((counts > 16).sum())} >24 {int((counts > 24).sum())}", flush=True)
    json.dump(res, open(f"{OUT}/pairs.json", "w"), indent=1)
