# ruff: noqa
"""Session 26: why are gate_up's paired 24-token items faster than one-block items where no expert
passes 24 rows? The pairs' 48-token tile stages its epilogue in 16-token passes (kEpiGroups 2);
this times gate_up alone (SiLU fused, uniform routing, no expert map) with one-block 24-token items
at 24-, 16- and 8-token epilogue passes (epi_groups 0 / 2 / 1, epi_groups.patch), the pairs, and
32-token one-block items at 32- and 16-token passes (32-token pairs with 8-token passes fit two
stages but serialize their wgmmas, C7512: not run); interleaved, three timings; bit for bit against
the one-block 24-token items.
argv[1] == precompile: compile only (with ptxas -v)."""
import dataclasses, json, os, re, sys
from pathlib import Path

from chord_kernels.indexed.wgmma import WgmmaConfig

BASE = dict(mt=2, bk=256, stages=2, consumers=4, consumer_regs=104, dynamic=True, silu_mul=True)
CFGS = {
    "one": WgmmaConfig(24, **BASE),
    "pairs": WgmmaConfig(24, items=2, **BASE),
    "one_epi2": WgmmaConfig(24, epi_groups=2, **BASE),
    "one_epi1": WgmmaConfig(24, epi_groups=1, **BASE),
    "bm32": WgmmaConfig(32, **BASE),
    "bm32_epi2": WgmmaConfig(32, epi_groups=2, **BASE),
}
CASES = (("ep8_tok12", 48, 4096, 576, 1), ("ep8_tok16", 48, 4096, 768, 1), ("ep8_tok20", 48, 4096, 960, 1),
         ("tp8_tok10", 384, 512, 3840, 8), ("tp8_tok21", 384, 512, 8192, 8))

if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    from chord_kernels.jit import CudaKernel
    ks = [CudaKernel(name="e_v", source=c.source(), entry=c.kernel().entry, arch="sm_90a", flags=("-Xptxas", "-v")) for c in CFGS.values()]
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda c: c.kernel().compile("sm_90a"), CFGS.values()))
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
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "9"))
res = []
for name, e, n, slots, top_k in CASES:
    g = torch.Generator(device=dev).manual_seed(slots + n)
    w = chord_kernels.pack("indexed", *random_quantized(e, n, 7168, generator=g, device=dev),
                           profile="h200_tp8" if e == 384 else "h200_ep8")
    tokens = slots // top_k
    a = (torch.randn(tokens, 7168, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32).contiguous()
    counts = torch.bincount(ids.reshape(-1).long(), minlength=e)
    fns, outs = {}, {}
    for t, cfg in CFGS.items():
        r = align_block_size(ids, cfg.block_m, e)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        plain = dataclasses.replace(cfg, silu_mul=False)
        outs[t] = torch.full((slots, n // 2), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[t] = (lambda out=outs[t], cfg=plain, route=route: run_gemm(a, w, route, block_m=cfg.block_m, top_k=top_k, out=out,
                                                                      config=cfg, activation="silu", zero_nonlocal=False))
        fns[t]()
    torch.cuda.synchronize()
    same = {t: torch.equal(outs["one"], o) for t, o in outs.items()}
    runs = []
    for rep in range(3):
        order = list(CFGS) if rep % 2 == 0 else list(CFGS)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=ROUNDS)
        runs.append({t: tm[t].median_us() for t in CFGS})
    res.append({"name": name, "us": runs, "bit_identical_to_one": same, "experts_over_24": int((counts > 24).sum()),
                "experts_over_32": int((counts > 32).sum())})
    print(f"{name:10s} one " + " ".join(f"{r['one']:6.1f}" for r in runs) + "".join(
        f" | {t} " + " ".join(f"{r[t] / r['one'] - 1:+.1%}" for r in runs) + ("" if same[t] else " DIFF") for t in CFGS if t != "one")
          + f" | >24 {int((counts > 24).sum())} >32 {int((counts > 32).sum())}", flush=True)
    json.dump(res, open(f"{OUT}/epi.json", "w"), indent=1)
