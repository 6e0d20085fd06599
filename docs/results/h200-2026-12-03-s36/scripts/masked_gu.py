# ruff: noqa
"""Session 36: plain gate_up (no SiLU) of the masked layout (DeepEP low-latency buffers, 48 groups x 256
rows, top-k 1) at 16-token blocks, 6-9 rows per group: the WGMMA kernel's items (planned; whole blocks
by tensor copies in this layout) against the decode kernel's wide tiles with row widths (rows gathered
one by one), interleaved in one process, three timings, bit for bit. argv: precompile [threads] | time"""
import dataclasses, json, os, sys

from chord_kernels.indexed.api import _tma_rows_twin
from chord_kernels.indexed.heuristics import short_k_config
from chord_kernels.indexed.wgmma import choose_wgmma_config

E, CAP, N, K, BM = 48, 256, 4096, 7168, 16
VARIANTS = {"old": dataclasses.replace(choose_wgmma_config(N, K, BM), subnormal=True),
            "dec": dataclasses.replace(short_k_config(N, BM), subnormal=True)}
if sys.argv[1] == "precompile":
    for c in VARIANTS.values():
        for x in {c, _tma_rows_twin(c)}:
            x.kernel().compile("sm_90a")
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import MaskedRows
from chord_kernels.indexed.api import run_gemm
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
res = []
for t in (6, 7, 8, 9):
    for seed in (0, 1):
        g = torch.Generator(device=dev).manual_seed(1000 * seed + t)
        w = chord_kernels.pack("indexed", *random_quantized(E, N, K, generator=g, device=dev), profile="h200_ep8")
        a = (torch.randn(E * CAP, K, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        counts = torch.bincount(torch.randint(0, E, (E * t,), device=dev, generator=g), minlength=E).to(torch.int32)
        rows = MaskedRows(counts, CAP)
        fns, outs = {}, {}
        for tag, c in VARIANTS.items():
            outs[tag] = torch.full((E * CAP, N), float("nan"), dtype=torch.bfloat16, device=dev)

            def fn(c=c, out=outs[tag]):
                run_gemm(a, w, rows, block_m=BM, top_k=1, out=out, config=c, zero_nonlocal=False, tok_e=t)
            fns[tag] = fn
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        valid = (torch.arange(CAP, device=dev)[None, :] < counts[:, None].long()).reshape(-1)
        same = torch.equal(outs["old"][valid], outs["dec"][valid]) and not outs["old"][valid].isnan().any()
        runs = []
        for rep in range(3):
            order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
            tm = interleaved({k: fns[k] for k in order}, rounds=9)
            runs.append({k: tm[k].median_us() for k in fns})
        res.append({"rows": t, "seed": seed, "max_rows": int(counts.max()), "us": runs, "same": same})
        print(f"masked{t}_s{seed} max rows {int(counts.max()):3d} old " + " ".join(f"{x['old']:7.1f}" for x in runs)
              + " | dec " + " ".join(f"{x['dec'] / x['old'] - 1:+.1%}" for x in runs) + ("" if same else " DIFF/NAN"),
              flush=True)
        json.dump(res, open(f"{OUT}/masked_gu.json", "w"), indent=1)
