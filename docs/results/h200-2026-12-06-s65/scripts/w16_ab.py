# ruff: noqa
"""Session 65: the indexed family's EP8 wide items (120-150 rows per expert: ep8_tok128) on 16-row routing blocks,
ten per item, K loops at 8, 9, 10 blocks (the grouped contiguous mode's BLOCK_ROWS_WIDE, there 11 % faster than the
indexed 24 x 7 items on ep8_tok128's gate_up) against the plan (24-row blocks, 7 per item, widths 6, 7).
gate_up SiLU fused with its output in routing order, and plain (slot order); the down from routing-order rows
(tensor copies, top-k weights). Interleaved, three timings; outputs NaN-poisoned, compared bit for bit by slot.
argv: precompile [threads] | time [tok_e,...]"""
import dataclasses, json, os, sys, types

import torch
from chord_kernels import indexed
from chord_kernels.indexed.api import launch_plan
from chord_kernels.indexed.planner import cached_plan, config_for_rows
from chord_kernels.indexed.wgmma import _wide_items, WIDE_CONSUMER_REGS

E, TOP_K, (N1, K1), (N2, K2), ARCH, SMS = 48, 8, (4096, 7168), (7168, 2048), "sm_90a", 132
TOK_ES = (121, 128, 140, 149)


def variants(n, k, tok_e, cap24, cap16):
    plan = cached_plan(n, k, 24, cap24, SMS, ARCH, config_for_rows(n, k, 24, ARCH, tok_e)).config
    return {"plan": (24, plan),
            "w16_8910": (16, _wide_items(n, k, 16, 10, (8, 9, 10), WIDE_CONSUMER_REGS)),
            "w16_810": (16, _wide_items(n, k, 16, 10, (8, 10), WIDE_CONSUMER_REGS))}


def caps(tok_e):
    slots = int(E * tok_e)
    return slots, range(slots // 24, slots // 24 + E + 2), range(slots // 16, slots // 16 + E + 2)


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for tok_e in TOK_ES:
        slots, c24s, c16s = caps(tok_e)
        for small in (True, False):
            for (n, k), acts in (((N1, K1), ("silu", None)), ((N2, K2), (None,))):
                w = types.SimpleNamespace(n=n, k=k, num_experts=E, profile="h200_ep8", small_scales=small)
                for c24, c16 in zip(c24s, c16s):
                    for bm, c in variants(n, k, tok_e, c24, c16).values():
                        for act in acts:
                            rows = n == N2 or act == "silu"
                            kk = launch_plan(w, bm, c24 if bm == 24 else c16, SMS, ARCH, config=c, activation=act,
                                             block_rows=n == N2).config.kernel()
                            ks[kk.source] = kk
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda kk: kk.compile(ARCH), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import run_gemm
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
res = []
for tok_e in (map(int, sys.argv[2].split(",")) if len(sys.argv) > 2 else TOK_ES):
    tokens = tok_e * 384 // TOP_K
    g = torch.Generator(device=dev).manual_seed(tok_e)
    w13 = chord_kernels.pack("indexed", *random_quantized(E, N1, K1, generator=g, device=dev), profile="h200_ep8")
    w2 = chord_kernels.pack("indexed", *random_quantized(E, N2, K2, generator=g, device=dev), profile="h200_ep8")
    gid = torch.rand(tokens, 384, generator=g, device=dev).topk(TOP_K, dim=1).indices.to(torch.int32)
    emap = torch.full((384,), -1, dtype=torch.int32, device=dev)
    emap[:E] = torch.arange(E, dtype=torch.int32, device=dev)
    ids = gid.contiguous()
    slots = tokens * TOP_K
    tw = torch.rand(tokens, TOP_K, generator=g, device=dev).reshape(-1).contiguous()
    a1 = (torch.randn(tokens, K1, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    a_slot = (torch.randn(slots, K2, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    routes = {}
    for bm in (16, 24):
        r = align_block_size(ids, bm, 384, emap)
        cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
        pos_slot = r.sorted_token_ids.long()[:cap * bm]
        real = pos_slot < slots
        a2 = torch.zeros(cap * bm, K2, dtype=torch.bfloat16, device=dev)
        a2[real] = a_slot[pos_slot[real]]
        routes[bm] = ((r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded), cap, pos_slot, real, a2)
    ws = indexed.new_workspace(max(indexed.max_workspace_bytes(w13, device=dev),
                                   indexed.max_workspace_bytes(w2, device=dev)) * 4, dev)
    local = (ids < E)  # slots on this rank's experts
    for gname in ("gu_silu_pos", "gu_plain", "dn_rows"):
        w = w2 if gname == "dn_rows" else w13
        fns, outs, to_slot = {}, {}, {}
        for tag, (bm, c) in variants(w.n, w.k, tok_e, routes[24][1], routes[16][1]).items():
            route, cap, pos_slot, real, a2 = routes[bm]
            if gname == "gu_silu_pos":
                outs[tag] = torch.full((cap * bm, N1 // 2), float("nan"), dtype=torch.bfloat16, device=dev)
                fns[tag] = lambda o=outs[tag], c=c, bm=bm, route=route: run_gemm(
                    a1, w13, route, block_m=bm, top_k=TOP_K, out=o, config=c, workspace=ws, activation="silu",
                    out_position=True, zero_nonlocal=False)
                def conv(o, pos_slot=pos_slot, real=real):
                    s = torch.full((slots, o.shape[1]), float("nan"), dtype=o.dtype, device=dev)
                    s[pos_slot[real]] = o[real]
                    return s
                to_slot[tag] = conv
            elif gname == "gu_plain":
                outs[tag] = torch.full((slots, N1), float("nan"), dtype=torch.bfloat16, device=dev)
                fns[tag] = lambda o=outs[tag], c=c, bm=bm, route=route: run_gemm(
                    a1, w13, route, block_m=bm, top_k=TOP_K, out=o, config=c, workspace=ws, zero_nonlocal=False)
                to_slot[tag] = lambda o: o
            else:
                outs[tag] = torch.full((slots, N2), float("nan"), dtype=torch.bfloat16, device=dev)
                fns[tag] = lambda o=outs[tag], c=c, bm=bm, route=route, a2=a2: run_gemm(
                    a2, w2, route, block_m=bm, top_k=1, topk_weights=tw, out=o, config=c, workspace=ws,
                    block_rows=True, num_slots=slots, zero_nonlocal=False)
                to_slot[tag] = lambda o: o
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        lsl = local.reshape(-1)
        sl = {t: to_slot[t](o)[lsl] for t, o in outs.items()}
        same = all(torch.equal(sl["plan"], s) for s in sl.values())
        nan = any(bool(s.isnan().any()) for s in sl.values())
        runs = []
        for rep in range(3):
            order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
            tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
            runs.append({t: tm[t].median_us() for t in fns})
        res.append({"tok_e": tok_e, "gemm": gname, "same": same, "nan": nan, "us": runs,
                    "caps": {bm: routes[bm][1] for bm in routes},
                    "configs": {t: str(c) for t, (bm, c) in variants(w.n, w.k, tok_e, routes[24][1], routes[16][1]).items()}})
        print(f"tok_e {tok_e:3d} {gname:11s} plan " + " ".join(f"{x['plan']:7.1f}" for x in runs)
              + "".join(f" | {t} " + " ".join(f"{x[t] / x['plan'] - 1:+.1%}" for x in runs) for t in fns if t != "plan")
              + ("" if same and not nan else f" DIFF={not same}/NAN={nan}"), flush=True)
        json.dump(res, open(f"{OUT}/w16_ab.json", "w"), indent=1)
