# ruff: noqa
"""Session 23 (l2_ab): what the activation rows' DRAM traffic costs gate_up. The planned gate_up
against the same launch whose slots are remapped to the first 2048 tokens (slot s -> s mod
2048 x top_k: the same experts, blocks and work, activation rows that fit the L2). From perm_ab:
gate_up on an activation permuted into routing order (one tensor copy per routing
block and 64-K slice, as the grouped modes and the layer's down load theirs) against gate_up
gathering its rows from the hidden states (the plan), and what the permutation costs
(torch.index_select of the local rows: the traffic a permute kernel would move). Both GEMMs as
moe_experts runs them (SiLU fused, routing-order output), on one routing, interleaved CUDA graphs,
real rows compared bit for bit. argv[1] == precompile: compile only."""
import json, os, sys
import torch
import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import choose_block_m
from chord_kernels.indexed.api import _silu_mul_twin, _tma_rows_twin, routing_order_rows, run_gemm
from chord_kernels.indexed.planner import config_for_rows, configs_for
from chord_kernels.routing import align_block_size

H, E, TOPK = 7168, 384, 8
SHAPES = {"tp8": (E, 256), "ep8": (48, 2048)}
CASES = [(m, int(t)) for m, t in (x.split(":") for x in os.environ.get(
    "CASES", "ep8:2064,ep8:6144,ep8:16368,tp8:4096,tp8:8192").split(","))]


def bm_of(mode, tokens):
    e, i = SHAPES[mode]
    w0 = chord_kernels.pack("indexed", *random_quantized(e, 2 * i, 64), profile=f"h200_{mode}")
    return choose_block_m(w0, tokens * TOPK * e // E)


if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for mode, tokens in CASES:
        e, i = SHAPES[mode]
        bm = bm_of(mode, tokens)
        for c in configs_for(2 * i, H, bm, "sm_90a"):
            s = _silu_mul_twin(c, 2 * i)
            for x in (s, _tma_rows_twin(s)):
                ks[x.kernel().source] = x.kernel()
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels compiled", flush=True)
    sys.exit(0)

from chord_bench.timing import interleaved
dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
g = torch.Generator(device=dev).manual_seed(23)
W = {mode: tuple(chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile=f"h200_{mode}")
                 for n, k in ((2 * i, H), (H, i))) for mode, (e, i) in SHAPES.items()}
res = []
for mode, tokens in CASES:
    w13, w2 = W[mode]
    gen = torch.Generator(device=dev).manual_seed(tokens)
    hidden = (torch.randn(tokens, H, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    probs = torch.softmax(torch.randn(tokens, E, device=dev, generator=gen), dim=-1)
    tw, ids = probs.topk(TOPK, dim=-1)
    ids = ids.to(torch.int32).contiguous()
    emap = None
    if mode == "ep8":
        emap = torch.full((E,), -1, dtype=torch.int32, device=dev)
        emap[:48] = torch.arange(48, dtype=torch.int32, device=dev)
    tok_e = tokens * TOPK / E
    bm = bm_of(mode, tokens)
    r = align_block_size(ids, bm, E, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    rows = routing_order_rows(w13, w2, route, bm, dev, tok_e)
    assert rows > 0
    num_slots = ids.numel()
    ntp = int(r.num_tokens_post_padded.item())
    sid = r.sorted_token_ids[:ntp].long()
    local_block = (r.expert_ids[: ntp // bm] >= 0).repeat_interleave(bm)
    real = (sid < num_slots) & local_block
    pos = real.nonzero().squeeze(1)
    src = sid[pos] // TOPK
    small = r.sorted_token_ids.clone()
    valid = small < num_slots
    small[valid] = small[valid] % (2048 * TOPK)
    route_small = (small, r.expert_ids, r.num_tokens_post_padded)
    o_plan = torch.full((rows, w13.n // 2), float("nan"), dtype=torch.bfloat16, device=dev)
    o_small = o_plan.clone()
    fns = {
        "planned": lambda: run_gemm(hidden, w13, route, block_m=bm, top_k=TOPK, activation="silu", zero_nonlocal=False,
                                    out_position=True, tok_e=tok_e, out=o_plan),
        "l2_rows": lambda: run_gemm(hidden, w13, route_small, block_m=bm, top_k=TOPK, activation="silu",
                                    zero_nonlocal=False, out_position=True, tok_e=tok_e, out=o_small),
    }
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    us = {t: x.median_us() for t, x in interleaved(fns, rounds=7).items()}
    rec = {"mode": mode, "tokens": tokens, "rows_per_expert": tok_e, "block_m": bm, "us": us}
    res.append(rec)
    print(f"{mode} {tokens:6d} rows/e {tok_e:6.1f} bm {bm:3d} | gate_up planned {us['planned']:7.1f} "
          f"L2-resident rows {us['l2_rows']:7.1f} ({us['l2_rows'] / us['planned'] - 1:+.1%})", flush=True)
    json.dump(res, open(f"{OUT}/l2_ab.json", "w"), indent=1)
