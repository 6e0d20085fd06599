# ruff: noqa: B023  (the timed closures run within their loop iteration)
"""Session 19: EP8's GEMMs (48 experts; gate_up N = 4096, K = 7168; down N = 7168, K = 2048) at 16-
and 24-token blocks: the planned WGMMA items against the decode kernel with short_k_config's wide
tiles (256 channels at two CTAs per SM, 512 at one), the GEMM alone, interleaved."""
import json
import os
import sys

import torch

import chord_kernels
from chord_bench.timing import interleaved
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import run_gemm
from chord_kernels.indexed.decode import DecodeConfig
from chord_kernels.indexed.heuristics import max_stages
from chord_kernels.routing import align_block_size

PRE = sys.argv[1:2] == ["precompile"]
E = 48
CASES = ((16, 6.0), (16, 8.0), (24, 12.0))  # block, rows per expert


def variants(bm):
    out = {"plan": None}
    for warps, mt, ctas in ((4, 4, 2), (8, 4, 1)):
        stages = max_stages(bm, warps=warps, mt=mt, bk=256, ctas_per_sm=ctas, limit=4)
        for sched in ("strided", "balanced"):
            out[f"w{warps}m{mt}c{ctas}s{stages}{sched[0].upper()}"] = DecodeConfig(
                block_m=bm, warps=warps, mt=mt, bk=256, stages=stages, ctas_per_sm=ctas, schedule=sched)
    return out


if PRE:
    for bm in (16, 24):
        for c in variants(bm).values():
            if c is not None:
                c.kernel().compile("sm_90a")
    sys.exit()

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
g = torch.Generator(device=dev).manual_seed(13)
ws = {name: chord_kernels.pack("indexed", *random_quantized(E, n, k, generator=g, device=dev), profile="h200_ep8")
      for name, n, k in (("gate_up", 4096, 7168), ("down", 7168, 2048))}
res = []
for bm, tok_e in CASES:
    slots = int(E * tok_e)
    ids = torch.randint(0, E, (slots, 1), generator=g, device=dev, dtype=torch.int32)
    r = align_block_size(ids, bm, E)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    for name, w in ws.items():
        a = (torch.randn(slots, w.k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        vs = variants(bm)
        outs = {t: torch.empty(slots, w.n, dtype=torch.bfloat16, device=dev) for t in vs}
        fns = {t: (lambda cfg=cfg, out=outs[t]: run_gemm(a, w, route, block_m=bm, top_k=1, out=out, config=cfg,
                                                         zero_nonlocal=False, tok_e=tok_e)) for t, cfg in vs.items()}
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        err = {t: ((o.float() - outs["plan"].float()).norm() / outs["plan"].float().norm()).item() for t, o in outs.items()}
        us = {t: x.median_us() for t, x in interleaved(fns, rounds=7).items()}
        res.append({"gemm": name, "block_m": bm, "tok_e": tok_e, "us": us, "rel_diff": err})
        print(f"{name:8} bm {bm} tok_e {tok_e:4.1f}: " + "  ".join(f"{t} {v:.1f}" for t, v in us.items())
              + f"  maxdiff {max(err.values()):.1e}", flush=True)
        json.dump(res, open(f"{OUT}/ep8_decode_tiles.json", "w"), indent=1)
