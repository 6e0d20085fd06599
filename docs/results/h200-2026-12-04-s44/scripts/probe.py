# ruff: noqa
"""Session 44. ab: each GEMM of the EP8 / TP8 middle and prefill shapes as chord-bench's chord-indexed runs it
(rows gathered by slot, output by slot, the down on its own block size) against the way the layer runs it
(one block size; gate_up's output in routing order, the down's input in routing order by tensor copies),
interleaved, three timings (listed, reversed, listed), outputs compared bit for bit.
ncu CASE GEMM WAY: that launch, four times (for ncu --launch-skip 3 --launch-count 1)."""
import json, os, sys

import torch
import chord_kernels
from chord_kernels import indexed
from chord_kernels.indexed.api import run_gemm
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
CASES = {"ep8_tok16": (48, 768, 1), "ep8_tok43": (48, 2064, 1), "ep8_tok128": (48, 6144, 1),
         "ep8_tok341": (48, 16368, 1), "tp8_1024": (384, 1024, 8), "tp8_8192": (384, 8192, 8)}
SHAPES = {"ep8": ((4096, 7168), (7168, 2048)), "tp8": ((512, 7168), (7168, 256))}


def setup(name):
    e, tokens, top_k = CASES[name]
    (n1, k1), (n2, k2) = SHAPES[name[:3]]
    g = torch.Generator(device=dev).manual_seed(tokens * 7 + e)
    prof = "h200_ep8" if e == 48 else "h200_tp8"
    w13 = chord_kernels.pack("indexed", *random_quantized(e, n1, k1, generator=g, device=dev), profile=prof)
    w2 = chord_kernels.pack("indexed", *random_quantized(e, n2, k2, generator=g, device=dev), profile=prof)
    ids = torch.rand(tokens, e, generator=g, device=dev).topk(top_k, dim=1).indices.to(torch.int32).contiguous()
    tw = torch.rand(tokens, top_k, generator=g, device=dev).reshape(-1).contiguous()
    slots = tokens * top_k
    a1 = (torch.randn(tokens, k1, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    a2 = (torch.randn(slots, k2, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    tok_e = slots / e
    bm = indexed.choose_block_m(w13, slots)
    bm2 = indexed.choose_block_m(w2, slots)
    r = align_block_size(ids, bm, e)
    r2 = align_block_size(ids, bm2, e) if bm2 != bm else r
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    route2 = (r2.sorted_token_ids, r2.expert_ids, r2.num_tokens_post_padded)
    ws = indexed.new_workspace(max(indexed.max_workspace_bytes(w13, device=dev), indexed.max_workspace_bytes(w2, device=dev)) * 4, dev)
    sid = r.sorted_token_ids.long()
    a2_ro = a2[sid.clamp(max=slots - 1)].contiguous()
    cap_rows = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm) * bm
    pos = torch.arange(cap_rows, device=dev)
    real = sid[:cap_rows] < slots
    fns, outs = {}, {}
    nan = float("nan")
    outs["gu_slot"] = torch.full((slots, n1), nan, dtype=torch.bfloat16, device=dev)
    outs["gu_ro"] = torch.full((cap_rows, n1), nan, dtype=torch.bfloat16, device=dev)
    outs["dn_slot"] = torch.full((slots, n2), nan, dtype=torch.bfloat16, device=dev)
    outs["dn_ro"] = torch.full((slots, n2), nan, dtype=torch.bfloat16, device=dev)
    fns["gu_slot"] = lambda: run_gemm(a1, w13, route, block_m=bm, top_k=top_k, out=outs["gu_slot"], workspace=ws, tok_e=tok_e)
    fns["gu_ro"] = lambda: run_gemm(a1, w13, route, block_m=bm, top_k=top_k, out=outs["gu_ro"], workspace=ws, tok_e=tok_e,
                                    out_position=True)
    fns["dn_slot"] = lambda: run_gemm(a2, w2, route2, block_m=bm2, top_k=1, topk_weights=tw, out=outs["dn_slot"],
                                      workspace=ws, tok_e=tok_e)
    fns["dn_ro"] = lambda: run_gemm(a2_ro, w2, route, block_m=bm, top_k=1, topk_weights=tw, out=outs["dn_ro"],
                                    workspace=ws, tok_e=tok_e, block_rows=True, num_slots=slots)
    info = {"block_m": bm, "block_m_down": bm2, "slots": slots}
    check = lambda: {"gu_same": bool(torch.equal(outs["gu_ro"][pos[real]], outs["gu_slot"][sid[:cap_rows][real]])),
                     "dn_same": bool(torch.equal(outs["dn_ro"], outs["dn_slot"])),
                     "nan": bool(outs["gu_slot"].isnan().any() or outs["dn_slot"].isnan().any())}
    return fns, info, check


if sys.argv[1] == "precompile":  # on the CPU: the configurations run_gemm plans on an H200 (132 SMs)
    import dataclasses
    from concurrent.futures import ThreadPoolExecutor
    from chord_kernels.indexed.planner import cached_plan, config_for_rows, weight_config
    from chord_kernels.indexed.api import _tma_rows_twin
    ks = {}
    for name, (e, tokens, top_k) in CASES.items():
        (n1, k1), (n2, k2) = SHAPES[name[:3]]
        import types
        prof = "h200_ep8" if e == 48 else "h200_tp8"
        g = torch.Generator().manual_seed(1)
        w13 = types.SimpleNamespace(n=n1, k=k1, num_experts=e, profile=prof, small_scales=True)
        w2 = types.SimpleNamespace(n=n2, k=k2, num_experts=e, profile=prof, small_scales=True)
        ids = torch.rand(tokens, e, generator=g).topk(top_k, dim=1).indices.to(torch.int32)
        slots, tok_e = tokens * top_k, tokens * top_k / e
        for w, bm, ro in ((w13, indexed.choose_block_m(w13, slots), False), (w2, indexed.choose_block_m(w2, slots), False),
                          (w2, indexed.choose_block_m(w13, slots), True)):
            r = align_block_size(ids, bm, e)
            cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
            c = cached_plan(w.n, w.k, bm, cap, 132, "sm_90a", config_for_rows(w.n, w.k, bm, "sm_90a", tok_e)).config
            c = weight_config(c, w)
            if ro:
                c = _tma_rows_twin(c)
            print(name, w.n, w.k, bm, cap, ro, c)
            ks[c.kernel().source] = c.kernel()
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

if sys.argv[1] == "ncu":
    fns, info, _ = setup(sys.argv[2])
    f = fns[sys.argv[3]]
    for _ in range(4):
        f()
    torch.cuda.synchronize()
    sys.exit(0)

from chord_bench.timing import interleaved
from chord_kernels import hardware
from chord_kernels.indexed.planner import cached_plan

names = sys.argv[2].split(",") if len(sys.argv) > 2 else [c for c in CASES if c != "tp8_1024"]
res = []
for name in names:
    fns, info, check = setup(name)
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    info.update(check())
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"name": name, **info, "us": runs})
    print(f"{name:11s} bm {info['block_m']}/{info['block_m_down']} same {info['gu_same']} {info['dn_same']} nan {info['nan']} | "
          + " | ".join(f"{t} " + " ".join(f"{x[t]:7.1f}" for x in runs) for t in fns)
          + " || gu_ro " + " ".join(f"{x['gu_ro'] / x['gu_slot'] - 1:+.1%}" for x in runs)
          + " dn_ro " + " ".join(f"{x['dn_ro'] / x['dn_slot'] - 1:+.1%}" for x in runs)
          + " sum " + " ".join(f"{(x['gu_ro'] + x['dn_ro']) / (x['gu_slot'] + x['dn_slot']) - 1:+.1%}" for x in runs), flush=True)
    json.dump(res, open(f"{OUT}/probe_ab.json", "w"), indent=1)
