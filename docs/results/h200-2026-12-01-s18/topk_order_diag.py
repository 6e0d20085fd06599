"""Session 18: where the epilogue top-k sum on routing-order rows goes wrong (refused by
gemm_topk_sum since session 17). Runs the fused sum through run_gemm (bypassing the guard) next to
the two steps, NaN-poisoned outputs, and prints which rows differ."""
import dataclasses

import torch

import chord_kernels
from chord_kernels import indexed
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import _TopkSum, routing_order_rows, run_gemm
from chord_kernels.indexed.wgmma import choose_wgmma_config
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(0)
e, h, m, inter, top_k = 4, 2336, 300, 512, 2
w13 = chord_kernels.pack("indexed", *random_quantized(e, 2 * inter, h, generator=g, device=dev), profile="h200_ep8")
w2 = chord_kernels.pack("indexed", *random_quantized(e, h, inter, generator=g, device=dev), profile="h200_ep8")
for bm in (80, 64):
    gu = choose_wgmma_config(2 * inter, h, bm)
    dn = choose_wgmma_config(h, inter, bm)
    twin = dn.topk_sum_twin(h)
    print("down", dn, "\ntwin", twin, flush=True)
    ids = torch.rand(m, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    tw = torch.rand(m, top_k, generator=g, device=dev)
    hidden = torch.randn(m, h, generator=g, device=dev).to(torch.bfloat16)
    r = align_block_size(ids, bm, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    n = routing_order_rows(w13, w2, route, bm, dev)
    act = torch.empty(n, inter, dtype=torch.bfloat16, device=dev)
    run_gemm(hidden, w13, route, block_m=bm, top_k=top_k, activation="silu", zero_nonlocal=False, out=act,
             out_position=True, config=dataclasses.replace(gu, silu_mul=True))
    rows2 = torch.full((m * top_k, h), float("nan"), dtype=torch.bfloat16, device=dev)
    ref = indexed.gemm_topk_sum(act, w2, *route, tw, ids, block_m=bm, routing_order=True, config=dn, slot_rows=rows2)
    for rep in range(3):
        out = torch.full((m, h), float("nan"), dtype=torch.bfloat16, device=dev)
        rows = torch.full((m * top_k, h), float("nan"), dtype=torch.bfloat16, device=dev)
        red = _TopkSum(ids, None, e, out)
        run_gemm(act, w2, route, block_m=bm, top_k=1, topk_weights=tw, out=rows, config=twin, topk_sum=red,
                 block_rows=True, num_slots=m * top_k)
        torch.cuda.synchronize()
        bad_tok = (~(out == ref).all(dim=1)).nonzero().flatten()
        nan_tok = out.isnan().any(dim=1).nonzero().flatten()
        # slot rows the fused kernel stored (tokens with two local slots keep both rows)
        bad_rows = (~((rows == rows2) | rows.isnan()).all(dim=1)).nonzero().flatten()
        nan_rows = rows.isnan().all(dim=1).nonzero().flatten()
        print(f"bm {bm} rep {rep}: tokens differing {bad_tok.numel()}/{m} (NaN {nan_tok.numel()}), slot rows "
              f"differing {bad_rows.numel()}, slot rows never written {nan_rows.numel()}; first bad tokens "
              f"{bad_tok[:12].tolist()}; first unwritten rows {nan_rows[:12].tolist()}", flush=True)
        if bad_tok.numel():
            t = bad_tok[0].item()
            print("  token", t, "ids", ids[t].tolist(), "positions of its slots",
                  [(r.sorted_token_ids == 2 * t + j).nonzero().flatten().tolist() for j in range(top_k)],
                  "max|diff|", (out[t].float() - ref[t].float()).abs().max().item(), flush=True)
    # control: the same twin on slot-order rows
    slot_act = torch.empty(m * top_k, inter, dtype=torch.bfloat16, device=dev)
    inv = torch.full((m * top_k,), -1, dtype=torch.long, device=dev)
    pos = torch.arange(r.sorted_token_ids.numel(), device=dev)
    ok = r.sorted_token_ids < m * top_k
    inv[r.sorted_token_ids[ok].long()] = pos[ok]
    slot_act.copy_(act[inv])
    a = indexed.gemm_topk_sum(slot_act, w2, *route, tw, ids, block_m=bm, config=dn)
    b = indexed.gemm_topk_sum(slot_act, w2, *route, tw, ids, block_m=bm, config=twin)
    print(f"bm {bm} slot order: two steps == routing order {torch.equal(a, ref)}, twin == two steps {torch.equal(a, b)}",
          flush=True)
