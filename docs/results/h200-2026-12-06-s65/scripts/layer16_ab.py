# ruff: noqa
"""Session 65: the EP8 layer (moe_experts: gate_up with SiLU in routing order, down from those rows with the
top-k sum) at 121-149 rows per expert on 16-token routing blocks (the wide items of ten, planned now to 136)
against 24-token blocks (the 24 x 7 items, planned before). Interleaved, three timings, bit for bit."""
import json, os, sys

import torch
import chord_kernels
from chord_kernels import indexed
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
TP8 = os.environ.get("TP8") == "1"  # TP8: 384 experts of I / 8, no expert map
E, G, TOP_K, H, I = (384, 384, 8, 7168, 256) if TP8 else (48, 384, 8, 7168, 2048)
res = []
for tok_e in (map(int, sys.argv[2].split(",")) if len(sys.argv) > 2 else (121, 128, 136, 140)):
    tokens = tok_e * G // TOP_K
    g = torch.Generator(device=dev).manual_seed(1000 + tok_e)
    w13 = chord_kernels.pack("indexed", *random_quantized(E, 2 * I, H, generator=g, device=dev), profile="h200_ep8")
    w2 = chord_kernels.pack("indexed", *random_quantized(E, H, I, generator=g, device=dev), profile="h200_ep8")
    ids = torch.rand(tokens, G, generator=g, device=dev).topk(TOP_K, dim=1).indices.to(torch.int32).contiguous()
    tw = torch.rand(tokens, TOP_K, generator=g, device=dev)
    emap = torch.full((G,), -1, dtype=torch.int32, device=dev)
    emap[:E] = torch.arange(E, dtype=torch.int32, device=dev)
    hidden = (torch.randn(tokens, H, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    planned = indexed.layer_block_m(w13, w2, tokens * TOP_K * E // G)
    if TP8:
        emap = None
    fns, outs = {}, {}
    for bm in (16, 24):
        r = align_block_size(ids, bm, G, emap)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        outs[bm] = torch.empty(tokens, H, dtype=torch.bfloat16, device=dev)
        fns[f"bm{bm}"] = lambda route=route, bm=bm: indexed.moe_experts(hidden, w13, w2, route, tw, ids, block_m=bm,
                                                                       expert_map=emap, out=outs[bm])
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = torch.equal(outs[16], outs[24])
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"tp8": TP8, "tok_e": tok_e, "planned_block": planned, "same": same, "us": runs})
    print(f"{'tp8' if TP8 else 'ep8'} layer tok_e {tok_e:3d} (planned {planned}) bm24 " + " ".join(f"{x['bm24']:7.1f}" for x in runs)
          + " | bm16 " + " ".join(f"{x['bm16'] / x['bm24'] - 1:+.1%}" for x in runs) + ("" if same else " DIFF"),
          flush=True)
    json.dump(res, open(f"{OUT}/layer16_ab{'_tp8' if TP8 else ''}.json", "w"), indent=1)
