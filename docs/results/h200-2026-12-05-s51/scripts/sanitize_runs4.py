# ruff: noqa
"""Session 48 (the 64 x 2 items added): compute-sanitizer target: runs of N tiles on four consumer warpgroups of one tile (the
planned TP8 down at 40-104-token blocks) — blocks 40 and 96 (row widths 32 / 88), runs not dividing the
N tiles (N = 1800: eight 256-channel tiles, the last partial), K = 224 (a short stage), an expert map,
top-k weights; rows by slot (gathers) and in routing order (tensor copies); each against the reference."""
import torch

import chord_kernels
from chord_kernels import indexed, reference
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import wgmma as W
from chord_kernels.routing import align_block_size

if __name__ == "__main__":
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(47)
    e_global, e_local, n, k, tokens, top_k = 16, 8, 1800, 224, 300, 4
    packed, scales = random_quantized(e_local, n, k, generator=g, device=dev)
    w = chord_kernels.pack("indexed", packed, scales, profile="h200_tp8")
    expert_map = torch.full((e_global,), -1, dtype=torch.int32, device=dev)
    expert_map[::2] = torch.arange(e_local, dtype=torch.int32, device=dev)
    ids = torch.rand(tokens, e_global, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32)
    slots = tokens * top_k
    a = torch.randn(slots, k, generator=g, device=dev).to(torch.bfloat16)
    tw = torch.rand(slots, generator=g, device=dev)
    worst = 0.0
    for bm in (40, 96, 64):
        cfg = W.choose_wgmma_config(7168, 256, bm)
        assert cfg.consumers == 4 and cfg.n_run and (cfg.row_widths or cfg.items == 2)
        cfg = W.WgmmaConfig(**{**cfg.__dict__, "n_run": 3})  # runs of three over eight N tiles
        r = align_block_size(ids, bm, e_global, expert_map)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        local = r.expert_ids >= 0
        ref = reference.indexed_gemm(a, (packed, scales), r.sorted_token_ids,
                                     torch.where(local, r.expert_ids, -1), r.num_tokens_post_padded,
                                     block_m=bm, top_k=1, topk_weights=tw)
        cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
        ordered = a[r.sorted_token_ids[:cap * bm].long().clamp(max=slots - 1)]
        outs = []
        for in_order in (False, True):
            out = torch.full((slots, n), float("nan"), dtype=torch.bfloat16, device=dev)
            indexed.gemm(ordered if in_order else a, w, *route, block_m=bm, top_k=1, topk_weights=tw, out=out,
                         config=cfg, routing_order=in_order)
            outs.append(out)
        torch.cuda.synchronize()
        written = ~outs[0].isnan().any(dim=1)
        assert torch.equal(outs[0][written], outs[1][written])
        err = float((outs[0][written].float() - ref[written].float()).norm() / ref[written].float().norm())
        worst = max(worst, err)
        assert err < 5e-3, err
    print(f"four-consumer runs: worst rel err {worst:.2e}, slot order and routing order identical")
