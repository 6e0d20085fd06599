# ruff: noqa
"""Session 24: what a launch costs without its K loops. The planned EP8 / TP8 GEMMs of item_cost.py timed as planned,
with num_tokens_post_padded = 0 (no items: launch, set-up, the routing scan) and with one routing block (one item per
N tile: the pipeline's fill and drain), interleaved CUDA graphs."""
import json, os
import torch
import chord_kernels
from chord_kernels import indexed
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
CASES = [("ep8_tok16_gate_up", 48, 768, 4096, 7168, 1), ("ep8_tok16_down", 48, 768, 7168, 2048, 1),
         ("ep8_tok43_down", 48, 2064, 7168, 2048, 1), ("tp8_1024_gate_up", 384, 1024, 512, 7168, 8)]
res = []
for name, el, tokens, n, k, rt in CASES:
    gen = torch.Generator(device=dev).manual_seed(tokens)
    if rt == 1:
        ids = torch.randint(0, el, (tokens, 1), device=dev, generator=gen, dtype=torch.int32)
    else:
        ids = torch.softmax(torch.randn(tokens, el, device=dev, generator=gen), -1).topk(rt, -1)[1].to(torch.int32)
    slots = ids.numel()
    w = chord_kernels.pack("indexed", *random_quantized(el, n, k, generator=gen, device=dev),
                           profile="h200_ep8" if el == 48 else "h200_tp8")
    bm = indexed.choose_block_m(w, slots)
    r = align_block_size(ids, bm, el)
    indexed.prepare(w, bm, dev)
    cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
    launch = indexed.plan(w, block_m=bm, capacity=cap, device=dev, tok_e=slots / el)
    a = (torch.randn(slots // rt, k, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    fns = {}
    for tag, ntpp in (("planned", r.num_tokens_post_padded), ("no_items", torch.zeros_like(r.num_tokens_post_padded)),
                      ("one_block", torch.full_like(r.num_tokens_post_padded, bm))):
        ws = indexed.new_workspace(launch.workspace_bytes, dev)
        o = torch.empty(slots, n, dtype=torch.bfloat16, device=dev)
        def g(ntpp=ntpp, o=o, ws=ws):
            indexed.gemm(a, w, r.sorted_token_ids, r.expert_ids, ntpp, block_m=bm, top_k=rt, out=o,
                         config=launch.config, workspace=ws, zero_nonlocal=False)
        g()
        fns[tag] = g
    torch.cuda.synchronize()
    us = {t: x.median_us() for t, x in interleaved(fns, rounds=7).items()}
    res.append({"case": name, "block_m": bm, "config": str(launch.config), "us": us})
    print(f"{name:20s} bm {bm:3d} planned {us['planned']:7.1f} no items {us['no_items']:6.1f} one block {us['one_block']:6.1f}", flush=True)
    json.dump(res, open(f"{OUT}/empty_launch.json", "w"), indent=1)
