# ruff: noqa
"""Session 44: TP8's down (K = 256, runs of seven N tiles, ping-pong consumers) at 56-token blocks from rows in
routing order, as the layer runs it: the plan (row widths at 48 tokens, 208 consumer registers: ptxas
serializes its wgmmas, C7512) against no row widths at 216 registers (compiles clean), interleaved, three
timings, bit for bit. argv: precompile [threads] | time."""
import json, os, sys

from chord_kernels.indexed import wgmma as W

CLEAN = W.WgmmaConfig(block_m=56, mt=2, bk=256, stages=4, items=1, dynamic=False, n_run=7, pingpong=True,
                      consumer_regs=216, subnormal=True, tma_rows=True)
if sys.argv[1] == "precompile":
    CLEAN.kernel().compile("sm_90a")
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels import indexed
from chord_kernels.indexed.api import run_gemm
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
e, n, k, top_k = 384, 7168, 256, 8
g = torch.Generator(device=dev).manual_seed(44)
w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_tp8")
res = []
for tokens in (1900, 2048, 2176, 2304):
    slots = tokens * top_k
    ids = torch.rand(tokens, e, generator=g, device=dev).topk(top_k, dim=1).indices.to(torch.int32)
    tw = torch.rand(slots, generator=g, device=dev)
    bm = 56
    r = align_block_size(ids, bm, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    rows = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm) * bm
    a = (torch.randn(slots, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    a_ro = a[r.sorted_token_ids[:rows].long().clamp(max=slots - 1)].contiguous()
    ws = indexed.new_workspace(indexed.max_workspace_bytes(w, device=dev) * 4, dev)
    outs = {t: torch.full((slots, n), float("nan"), dtype=torch.bfloat16, device=dev) for t in ("plan", "clean")}
    fns = {"plan": lambda: run_gemm(a_ro, w, route, block_m=bm, top_k=1, topk_weights=tw, out=outs["plan"], workspace=ws,
                                    block_rows=True, num_slots=slots, tok_e=slots / e),
           "clean": lambda: run_gemm(a_ro, w, route, block_m=bm, top_k=1, topk_weights=tw, out=outs["clean"], workspace=ws,
                                     block_rows=True, num_slots=slots, config=CLEAN)}
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = torch.equal(outs["plan"], outs["clean"]) and not outs["plan"].isnan().any()
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=7)
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"tokens": tokens, "us": runs, "same": bool(same)})
    print(f"tp8 {tokens} down bm56 plan " + " ".join(f"{x['plan']:6.1f}" for x in runs) + " | clean "
          + " ".join(f"{x['clean'] / x['plan'] - 1:+.1%}" for x in runs) + ("" if same else " DIFF"), flush=True)
    json.dump(res, open(f"{OUT}/runs_ab.json", "w"), indent=1)
