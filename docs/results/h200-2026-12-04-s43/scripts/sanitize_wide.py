# ruff: noqa
"""Session 43: compute-sanitizer target: the grouped contiguous mode's wide items of 32-row blocks (up to five
per item, tensor copies, the weight ring): N = 200 (a partial N tile) and 512 with
SiLU-and-mul fused, K = 1056 (a short last stage) and 2048 (dynamic), one hot expert across four segments and
empty experts; each launched twice and against the reference."""
import torch

import chord_kernels
from chord_kernels import grouped, reference, routing
from chord_kernels.formats import random_quantized
from chord_kernels.ops import silu_and_mul

dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(43)
worst = 0.0
for e, n, k, rows in ((4, 200, 1056, 140), (6, 512, 2048, 135)):
    packed, scales = random_quantized(e, n, k, generator=g, device=dev)
    w = chord_kernels.pack("contiguous", packed, scales, profile="h200_ep8")
    ids = torch.randint(0, e, (e * rows, 1), generator=g, device=dev)
    ids[: e * rows // 2] = 1  # a hot expert past three segments; the others ragged
    c = routing.contiguous_layout(ids, e)
    m = c.m_indices.numel()
    assert grouped.contiguous_config(w, m, c.expected_m, "sm_90a") is not None
    a = torch.randn(m, k, generator=g, device=dev).to(torch.bfloat16)
    real = c.m_indices >= 0
    outs = []
    for _ in range(2):
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=dev)
        grouped.contiguous(a, w, c.m_indices, out=out, expected_m=c.expected_m)
        outs.append(out)
    fused = grouped.contiguous(a, w, c.m_indices, expected_m=c.expected_m, activation="silu")
    ref = reference.grouped_contiguous(a, (packed, scales), c.m_indices)
    torch.cuda.synchronize()
    err = float((outs[0][real].float() - ref[real].float()).norm() / ref[real].float().norm())
    worst = max(worst, err)
    assert err < 5e-3 and torch.equal(outs[0][real], outs[1][real]) and outs[0][~real].isnan().all()
    assert torch.equal(fused[real], silu_and_mul(outs[0][real]))
print(f"wide contiguous items: worst rel err {worst:.2e}, repeated runs identical")
