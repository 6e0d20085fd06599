"""The steps between the GEMMs (SiLU-and-mul, top-k sum) follow the numerics contract exactly."""

from __future__ import annotations

import pytest
import torch

from chord_kernels import ChordInputError, reference
from chord_kernels.ops import silu_and_mul, topk_sum

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows", [0, 1, 37])
def test_silu_and_mul_is_fp32_math_rounded_once(device: str, rows: int) -> None:
    g = torch.Generator().manual_seed(rows)
    x = (torch.randn(rows, 2 * 96, generator=g) * 4).bfloat16().to(device)
    gate, up = x.double().chunk(2, dim=-1)
    exact = torch.nn.functional.silu(gate) * up
    out = torch.full((rows, 96), float("nan"), dtype=torch.bfloat16, device=device)
    assert silu_and_mul(x, out=out) is out
    assert torch.equal(out, reference.silu_and_mul(x))
    # One rounding of an fp32 result: within half a bf16 ulp of the exact value (plus fp32 error).
    ulp = torch.finfo(torch.bfloat16).eps * exact.abs().clamp_min(1e-30)
    assert bool(((out.double() - exact).abs() <= 0.5 * ulp + 1e-6 * exact.abs() + 1e-30).all())
    assert silu_and_mul(x).shape == (rows, 96)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("rows", "top_k"), [(0, 8), (1, 1), (1, 8), (29, 3)])
def test_topk_sum_is_fp32_sum_rounded_once(device: str, rows: int, top_k: int) -> None:
    g = torch.Generator().manual_seed(rows * 10 + top_k)
    x = torch.randn(rows, top_k, 64, generator=g).bfloat16().to(device)
    out = torch.full((rows, 64), float("nan"), dtype=torch.bfloat16, device=device)
    assert topk_sum(x, out=out) is out
    assert torch.equal(out, x.float().sum(dim=1).bfloat16())
    exact = x.double().sum(dim=1)
    ulp = torch.finfo(torch.bfloat16).eps * exact.abs()
    assert bool(((out.double() - exact).abs() <= 0.5 * ulp + 1e-5 * x.double().abs().sum(dim=1) + 1e-30).all())
    assert topk_sum(x).shape == (rows, 64)


def test_errors_name_what_was_expected() -> None:
    with pytest.raises(ChordInputError, match="even last dimension"):
        silu_and_mul(torch.zeros(2, 5, dtype=torch.bfloat16))
    with pytest.raises(ChordInputError, match="dtype torch.bfloat16"):
        silu_and_mul(torch.zeros(2, 4))
    with pytest.raises(ChordInputError, match=r"out: expected shape \[2, 2\]"):
        silu_and_mul(torch.zeros(2, 4, dtype=torch.bfloat16), out=torch.zeros(2, 4, dtype=torch.bfloat16))
    with pytest.raises(ChordInputError, match="3 dimensions"):
        topk_sum(torch.zeros(2, 4, dtype=torch.bfloat16))
    with pytest.raises(ChordInputError, match=r"out: expected shape \[2, 4\]"):
        topk_sum(torch.zeros(2, 3, 4, dtype=torch.bfloat16), out=torch.zeros(2, 3, dtype=torch.bfloat16))
