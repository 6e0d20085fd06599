# ruff: noqa
"""Session 68: the routing block where the two-stage gate_up items now prefetch their rows, TP8 (EP=1: EP8): the
layer (indexed.moe_experts, each block on its own routing, BLOCKS) at 120-190 rows per expert. Interleaved CUDA graphs, three timings, outputs compared bit for bit.
argv: time [tokens,...]"""
import json, os, sys

import torch
import chord_kernels
from chord_kernels import indexed
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
EP = os.environ.get("EP") == "1"  # EP8: 48 local experts of 384 under an expert map; else TP8's 384 of I / 8
E, G, TOP_K, H, I = (48, 384, 8, 7168, 2048) if EP else (384, 384, 8, 7168, 256)
BLOCKS = tuple(int(b) for b in os.environ.get("BLOCKS", "96,64,88,104").split(","))
res = []
for tokens in (map(int, sys.argv[2].split(",")) if len(sys.argv) > 2 else (7200, 8192, 9000)):
    g = torch.Generator(device=dev).manual_seed(6800 + tokens)
    w13 = chord_kernels.pack("indexed", *random_quantized(E, 2 * I, H, generator=g, device=dev), profile="h200_ep8" if EP else "h200_tp8")
    w2 = chord_kernels.pack("indexed", *random_quantized(E, H, I, generator=g, device=dev), profile="h200_ep8" if EP else "h200_tp8")
    ids = torch.rand(tokens, G, generator=g, device=dev).topk(TOP_K, dim=1).indices.to(torch.int32).contiguous()
    tw = torch.rand(tokens, TOP_K, generator=g, device=dev)
    hidden = (torch.randn(tokens, H, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    emap = None
    if EP:
        emap = torch.full((G,), -1, dtype=torch.int32, device=dev)
        emap[:E] = torch.arange(E, dtype=torch.int32, device=dev)
    planned = indexed.layer_block_m(w13, w2, tokens * TOP_K * E // G)
    fns, outs = {}, {}
    for bm in BLOCKS:
        r = align_block_size(ids, bm, G, emap)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        outs[bm] = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[f"bm{bm}"] = lambda route=route, bm=bm: indexed.moe_experts(hidden, w13, w2, route, tw, ids, block_m=bm,
                                                                       expert_map=emap, out=outs[bm])
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    base = outs[BLOCKS[0]]
    same = {bm: bool(torch.isfinite(o).all()) and torch.equal(o, base) for bm, o in outs.items()}
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"tokens": tokens, "planned_block": planned, "same": same, "us": runs})
    b0 = f"bm{BLOCKS[0]}"
    print(f"{'ep8' if EP else 'tp8'} layer {tokens:5d} (planned {planned}) {b0} " + " ".join(f"{x[b0]:7.1f}" for x in runs)
          + "".join(f" | {t} " + " ".join(f"{x[t] / x[b0] - 1:+.1%}" for x in runs) for t in fns if t != b0)
          + ("" if all(same.values()) else f" SAME={same}"), flush=True)
    json.dump(res, open(f"{OUT}/blocks_ab{os.environ.get('TAG', '')}.json", "w"), indent=1)
    del w13, w2, hidden, outs, fns
    torch.cuda.empty_cache()
