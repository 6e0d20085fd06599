# ruff: noqa
"""Session 67: compute-sanitizer target: the WGMMA kernel in clusters of two CTAs (WgmmaConfig.cta_pair) on
small shapes — the weight ring's wide items of 16-token blocks (items of up to 8 blocks, 128-K stages, dynamic
and strided), a one-block 80-token item on 256-K stages (by hand), SiLU fused and plain with top-k weights; a
hot expert and ragged others, K with a short last stage, N with a partial last tile; each launched twice, against
the unpaired configuration (bit for bit) and the reference; poisoned outputs."""
import dataclasses

import torch

import chord_kernels
from chord_kernels import reference
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import gemm
from chord_kernels.indexed.wgmma import WgmmaConfig, choose_wgmma_config
from chord_kernels.routing import align_block_size

CONFIGS = (
    ("ring16x8_dynamic", 16, WgmmaConfig(16, 2, 128, 3, items=8, dynamic=True, weight_ring=True, cta_pair=True)),
    ("ring16x8_strided", 16, WgmmaConfig(16, 2, 128, 3, items=8, dynamic=False, weight_ring=True, cta_pair=True)),
    ("bm80_256k", 80, dataclasses.replace(choose_wgmma_config(4096, 7168, 80, 64.0), cta_pair=True)),  # row widths
)

if __name__ == "__main__":
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(67)
    e, n, k, rows, top_k = 6, 1856, 800, 150, 2
    packed, scales = random_quantized(e, n, k, generator=g, device=dev)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    ids = torch.rand(rows, e, generator=g, device=dev).argsort(dim=1)[:, :top_k]
    ids[: rows // 2, 0] = 1  # a hot expert
    a = torch.randn(rows, k, generator=g, device=dev).to(torch.bfloat16)
    tw = torch.rand(rows, top_k, generator=g, device=dev)
    worst = 0.0
    for name, block_m, config in CONFIGS:
        assert config.ntiles(n) % 2 == 0, config
        r = align_block_size(ids, block_m, e)
        for silu in (True, False):
            weights = None if silu else tw
            ref = reference.indexed_gemm(a, (packed, scales), r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded,
                                         block_m=block_m, top_k=top_k, topk_weights=weights)
            if silu:
                ref = reference.silu_and_mul(ref)
            outs = []
            for cfg in (config, config, dataclasses.replace(config, cta_pair=False)):
                out = torch.full((rows * top_k, n // 2 if silu else n), float("nan"), dtype=torch.bfloat16, device=dev)
                gemm(a, pw, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=block_m, top_k=top_k,
                     topk_weights=weights, out=out, config=cfg, activation="silu" if silu else None)
                outs.append(out)
            torch.cuda.synchronize()
            err = float((outs[0].float() - ref.float()).norm() / ref.float().norm())
            worst = max(worst, err)
            assert not outs[0].isnan().any(), name
            assert err < 5e-3, (name, err)
            assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2]), name
    print(f"cta pairs: worst rel err {worst:.2e}; repeated and unpaired runs identical")
