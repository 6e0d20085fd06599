# ruff: noqa
"""Session 46: compute-sanitizer target: the grouped contiguous mode with its routing read from m_indices in the
kernel — the wide items of 16-row blocks (expected_m 121-142) and 32-row blocks (143-150) and the 64 x 2 items (no expected_m): N = 200 (a
partial N tile) and 512 with SiLU-and-mul fused, K = 1056 (a short last stage) and 2048 (dynamic), one hot
expert across several segments and ragged others; NaN padding rows of a kept out, padding rows of the output
untouched, each launched twice and against the reference."""
import torch

import chord_kernels
from chord_kernels import grouped, reference, routing
from chord_kernels.formats import random_quantized
from chord_kernels.ops import silu_and_mul

SHAPES = ((4, 200, 1056, 140), (6, 512, 2048, 135), (4, 200, 1056, 148))  # experts, N, K, rows per expert

if __name__ == "__main__":
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(46)
    worst = 0.0
    for e, n, k, rows in SHAPES:
        packed, scales = random_quantized(e, n, k, generator=g, device=dev)
        w = chord_kernels.pack("contiguous", packed, scales, profile="h200_ep8")
        ids = torch.randint(0, e, (e * rows, 1), generator=g, device=dev)
        ids[: e * rows // 2] = 1  # a hot expert past three segments; the others ragged
        c = routing.contiguous_layout(ids, e)
        m = c.m_indices.numel()
        assert grouped.contiguous_config(w, m, c.expected_m, "sm_90a") is not None
        real = c.m_indices >= 0
        a = torch.randn(m, k, generator=g, device=dev).to(torch.bfloat16)
        a[~real] = float("nan")
        ref = reference.grouped_contiguous(a.nan_to_num(), (packed, scales), c.m_indices)
        for expected_m in (c.expected_m, None):  # the wide items, the 64 x 2 items
            outs = []
            for _ in range(2):
                out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=dev)
                grouped.contiguous(a, w, c.m_indices, out=out, expected_m=expected_m)
                outs.append(out)
            fused = torch.full((m, n // 2), float("nan"), dtype=torch.bfloat16, device=dev)
            grouped.contiguous(a, w, c.m_indices, out=fused, expected_m=expected_m, activation="silu")
            torch.cuda.synchronize()
            err = float((outs[0][real].float() - ref[real].float()).norm() / ref[real].float().norm())
            worst = max(worst, err)
            assert err < 5e-3 and torch.equal(outs[0][real], outs[1][real]) and outs[0][~real].isnan().all()
            assert torch.equal(fused[real], silu_and_mul(outs[0][real]))
    print(f"contiguous in-kernel routing (wide and 64 x 2 items): worst rel err {worst:.2e}, repeated runs identical")
