# ruff: noqa
"""Session 62: since session 61 the 64 x 2 gate_up items commit per K group on whole stages (5.5-6 % faster at TP8
12288). The one-block items of TWO_ITEM_BLOCKS (96 / 104 tokens, 151-192 rows per expert) and the 24 x 7 wide items
(120-150) were chosen against 64 x 2 items that committed per K step (sessions 11, 22, 23). The whole layer
(moe_experts: gate_up with SiLU fused, output in routing order; down from routing-order rows, top-k sum) at the
planned block against 64, each on its own routing, interleaved, three timings (listed, reversed, listed), every
output bit for bit against the planned block's. argv: precompile [threads] | time [name,...]"""
import json, math, os, sys, types

# (name, experts, N13, H, tokens, top_k, block sizes: planned first, seed)
CASES = [(f"tp8_{m}_s{s}", 384, 512, 7168, m, 8, (bm, 64), s)
         for m, bm in ((7168, 24), (7680, 96), (8192, 96), (8704, 104), (9216, 104)) for s in (0, 1)] + \
        [(f"ep8_tok{t}_s{s}", 48, 4096, 7168, 48 * t, 1, (bm, 64), s)
         for t, bm in ((128, 24), (140, 24), (160, 96), (171, 96), (185, 104)) for s in (0, 1)]
ARCH, SMS = "sm_90a", 132

if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    from chord_kernels.indexed.api import launch_plan
    ks = {}
    for name, e, n13, h, tokens, top_k, bms, seed in CASES:
        slots, tok_e = tokens * top_k, tokens * top_k / e
        prof = "h200_tp8" if e == 384 else "h200_ep8"
        for small in (True, False):
            w13 = types.SimpleNamespace(n=n13, k=h, num_experts=e, profile=prof, small_scales=small)
            w2 = types.SimpleNamespace(n=h, k=n13 // 2, num_experts=e, profile=prof, small_scales=small)
            for bm in bms:
                lo = slots // bm
                for cap in range(lo, lo + e + 2):
                    for w, act, rows in ((w13, "silu", False), (w2, None, True)):
                        k = launch_plan(w, bm, cap, SMS, ARCH, tok_e=tok_e, activation=act, block_rows=rows).config.kernel()
                        ks[k.source] = k
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda k: k.compile(ARCH), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels.indexed.api import moe_experts
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "5"))
names = sys.argv[2].split(",") if len(sys.argv) > 2 else None
res = []
for case in CASES:
    name, e, n13, h, tokens, top_k, bms, seed = case
    if names and name not in names:
        continue
    g = torch.Generator(device=dev).manual_seed(tokens + e + 1000 * seed)
    prof = "h200_tp8" if e == 384 else "h200_ep8"
    w13 = chord_kernels.pack("indexed", *random_quantized(e, n13, h, generator=g, device=dev), profile=prof)
    w2 = chord_kernels.pack("indexed", *random_quantized(e, h, n13 // 2, generator=g, device=dev), profile=prof)
    a = (torch.randn(tokens, h, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32).contiguous()
    tw = torch.rand(tokens, top_k, generator=g, device=dev)
    counts = torch.bincount(ids.reshape(-1).long(), minlength=e).tolist()
    fns, outs = {}, {}
    for bm in bms:
        r = align_block_size(ids, bm, e)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        outs[bm] = torch.full((tokens, h), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[bm] = lambda route=route, bm=bm, out=outs[bm]: moe_experts(a, w13, w2, route, tw, ids, block_m=bm, out=out)
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    first = outs[bms[0]]
    same = all(torch.equal(first, o) for o in outs.values())
    nan = any(bool(o.isnan().any()) for o in outs.values())
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=ROUNDS)
        runs.append({t: tm[t].median_us() for t in fns})
    blocks = {bm: sum(math.ceil(c / bm) for c in counts) for bm in bms}
    res.append({"name": name, "block_ms": list(bms), "blocks": blocks, "max_rows": max(counts), "us": runs,
                "same": same, "nan": nan})
    print(f"{name:16s} max {max(counts):4d} blocks {blocks} bm={bms[0]} "
          + " ".join(f"{x[bms[0]]:7.1f}" for x in runs)
          + "".join(f" | bm={b} " + " ".join(f"{x[b] / x[bms[0]] - 1:+.1%}" for x in runs) for b in bms[1:])
          + ("" if same and not nan else " DIFF/NAN"), flush=True)
    json.dump(res, open(f"{OUT}/layer_blk62.json", "w"), indent=1)
