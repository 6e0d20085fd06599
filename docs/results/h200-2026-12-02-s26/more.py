# ruff: noqa
"""Session 26, last call: does the paired items' gain carry to other shapes? Interleaved, three
timings, bit for bit against the planned configuration: EP8's down (K = 2048, top-k weights) at 16
rows per expert on four warpgroups in one- and two-block 24-token items against the planned two
warpgroups; and at 8 rows per expert (16-token blocks) gate_up (SiLU fused) and down in items of up
to two and three 16-token blocks on four warpgroups against the planned one-block items.
argv[1] == precompile: compile only (with ptxas -v)."""
import dataclasses, json, os, re, sys
from pathlib import Path

from chord_kernels.indexed import planner as P
from chord_kernels.indexed.wgmma import WgmmaConfig

FOUR = dict(mt=2, bk=256, stages=2, consumers=4, consumer_regs=104, dynamic=True)
CASES = {  # name: (n, k, slots, silu, {tag: config})
    "ep8_tok16_down": (7168, 2048, 768, False, {"plan": P._rows_config(7168, 2048, 24, 16.0),
                                                "four1": WgmmaConfig(24, **FOUR), "four2": WgmmaConfig(24, items=2, **FOUR)}),
    "ep8_tok8_gate_up": (4096, 7168, 384, True, {"plan": P._rows_config(4096, 7168, 16, 8.0),
                                                 "four2": WgmmaConfig(16, items=2, **FOUR), "four3": WgmmaConfig(16, items=3, **FOUR)}),
    "ep8_tok8_down": (7168, 2048, 384, False, {"plan": P._rows_config(7168, 2048, 16, 8.0),
                                               "four2": WgmmaConfig(16, items=2, **FOUR), "four3": WgmmaConfig(16, items=3, **FOUR)}),
}

if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    from chord_kernels.jit import CudaKernel
    cfgs = {}
    for name, (n, k, slots, silu, c) in CASES.items():
        for t, x in c.items():
            cfgs[f"{name}/{t}"] = dataclasses.replace(x, silu_mul=silu)
    ks = {t: CudaKernel(name="m_v", source=c.source(), entry=c.kernel().entry, arch="sm_90a", flags=("-Xptxas", "-v")) for t, c in cfgs.items()}
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda c: c.kernel().compile("sm_90a"), cfgs.values()))
        paths = dict(zip(ks, ex.map(lambda k: k.compile("sm_90a"), ks.values())))
    for t, p in paths.items():
        txt = Path(str(p).replace(".cubin", ".json")).read_text()
        print(t, cfgs[t].stages, "spill", re.findall(r"(\d+) bytes spill stores", txt), "C751", "C751" in txt)
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels.indexed.api import run_gemm
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
SKIP = set(os.environ.get("SKIP", "").split(","))
res = []
for name, (n, k, slots, silu, cfgs) in CASES.items():
    cfgs = {t: c for t, c in cfgs.items() if f"{name}/{t}" not in SKIP}
    g = torch.Generator(device=dev).manual_seed(slots + n + k)
    w = chord_kernels.pack("indexed", *random_quantized(48, n, k, generator=g, device=dev), profile="h200_ep8")
    a = (torch.randn(slots, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(slots, 48, generator=g, device=dev).argsort(dim=1)[:, :1].to(torch.int32).contiguous()
    tw = None if silu else torch.rand(slots, 1, generator=g, device=dev)
    fns, outs = {}, {}
    for t, cfg in cfgs.items():
        r = align_block_size(ids, cfg.block_m, 48)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        outs[t] = torch.full((slots, n // 2 if silu else n), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[t] = (lambda out=outs[t], cfg=cfg, route=route: run_gemm(a, w, route, block_m=cfg.block_m, top_k=1, out=out, config=cfg,
                                                                    topk_weights=tw, activation="silu" if silu else None, zero_nonlocal=False))
        fns[t]()
    torch.cuda.synchronize()
    same = {t: torch.equal(outs["plan"], o) for t, o in outs.items()}
    runs = []
    for rep in range(3):
        order = list(cfgs) if rep % 2 == 0 else list(cfgs)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=9)
        runs.append({t: tm[t].median_us() for t in cfgs})
    res.append({"name": name, "configs": {t: str(c) for t, c in cfgs.items()}, "us": runs, "bit_identical": same})
    print(f"{name:18s} plan " + " ".join(f"{r['plan']:6.1f}" for r in runs) + "".join(
        f" | {t} " + " ".join(f"{r[t] / r['plan'] - 1:+.1%}" for r in runs) + ("" if same[t] else " DIFF") for t in cfgs if t != "plan"), flush=True)
    json.dump(res, open(f"{OUT}/more.json", "w"), indent=1)
