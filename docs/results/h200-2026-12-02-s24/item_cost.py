# ruff: noqa
"""Session 24: the fixed cost of a work item. Each GEMM of EP8 / TP8 middle shapes timed at several K (the same
experts, routing, N and plan rules), interleaved CUDA graphs: t(K) = intercept + slope * K; the intercept is what an
item costs beyond its K loop (epilogue, item start), as a share of the planned K's time."""
import json, os
import torch
import chord_kernels
from chord_kernels import indexed
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
E_G, TOPK = 384, 8
CASES = [  # name, local experts, tokens, N, Ks, top_k of the rows
    ("ep8_tok16_gate_up", 48, 768, 4096, (3584, 7168, 10752), 8),
    ("ep8_tok16_down", 48, 768, 7168, (2048, 3072, 4096), 1),
    ("ep8_tok43_gate_up", 48, 2064, 4096, (3584, 7168, 10752), 8),
    ("ep8_tok43_down", 48, 2064, 7168, (2048, 3072, 4096), 1),
    ("tp8_1024_gate_up", 384, 1024, 512, (3584, 7168, 10752), 8),
]
res = []
for name, el, tokens, n, ks, k_top in CASES:
    gen = torch.Generator(device=dev).manual_seed(tokens)
    if el < E_G:  # EP: the harness's pre-dispatched rows, top-1 over the 48 local experts
        ids = torch.randint(0, el, (tokens, 1), device=dev, generator=gen, dtype=torch.int32)
    else:
        probs = torch.softmax(torch.randn(tokens, E_G, device=dev, generator=gen), dim=-1)
        ids = probs.topk(TOPK, dim=-1)[1].to(torch.int32)
    emap = None
    slots = ids.numel()
    rt = ids.shape[1]
    fns = {}
    for k in ks:
        w = chord_kernels.pack("indexed", *random_quantized(el, n, k, generator=gen, device=dev),
                               profile="h200_ep8" if el < E_G else "h200_tp8")
        bm = indexed.choose_block_m(w, slots)
        r = align_block_size(ids, bm, el)
        indexed.prepare(w, bm, dev)
        cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
        launch = indexed.plan(w, block_m=bm, capacity=cap, device=dev, tok_e=slots / el)
        ws = indexed.new_workspace(launch.workspace_bytes, dev)
        kt = rt if k_top == TOPK else 1
        rows = slots // kt
        a = (torch.randn(rows, k, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
        o = torch.empty(slots, n, dtype=torch.bfloat16, device=dev)
        def g(a=a, w=w, r=r, bm=bm, o=o, cfg=launch.config, ws=ws, kt=kt):
            indexed.gemm(a, w, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=bm,
                         top_k=kt, out=o, config=cfg, workspace=ws)
        fns[k] = g
        g()
    torch.cuda.synchronize()
    us = {k: t.median_us() for k, t in interleaved({str(k): f for k, f in fns.items()}, rounds=7).items()}
    xs = [float(k) for k in ks]; ys = [us[str(k)] for k in ks]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    icpt = my - slope * mx
    planned = 7168 if 7168 in ks else 2048
    rec = {"case": name, "block_m": bm, "us": us, "slope_us_per_k": slope, "intercept_us": icpt,
           "intercept_share": icpt / us[str(planned)]}
    res.append(rec)
    print(f"{name:20s} bm {bm:3d} " + " ".join(f"K{k} {us[str(k)]:7.1f}" for k in ks) +
          f" | intercept {icpt:6.1f} us = {icpt / us[str(planned)]:.1%} of K{planned}", flush=True)
    json.dump(res, open(f"{OUT}/item_cost.json", "w"), indent=1)
