"""The GPU dequant kernel is bit-exact with the reference dequant."""

from __future__ import annotations

import pytest
import torch

from chord_kernels import ChordInputError
from chord_kernels.formats import dequantize, random_quantized
from chord_kernels.ops import dequantize_gpu

pytestmark = pytest.mark.gpu

SHAPES = [(4096, 7168), (7168, 2048), (512, 7168), (7168, 256), (3, 5, 96), (1, 32), (48, 64, 7168), (0, 64)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_bit_exact_against_reference(shape: tuple[int, ...]) -> None:
    g = torch.Generator(device="cuda").manual_seed(sum(shape))
    packed, scales = random_quantized(*shape, generator=g, device="cuda")
    # Wide scales exercise rounding (subnormal to large products).
    scales = (scales.float() * torch.exp2(torch.randint(-12, 12, scales.shape, device="cuda", generator=g))).bfloat16()
    out = torch.full((*shape[:-1], shape[-1]), float("nan"), dtype=torch.bfloat16, device="cuda")
    dequantize_gpu(packed, scales, out=out)
    want = dequantize(packed.cpu(), scales.cpu())
    assert torch.equal(out.cpu().view(torch.int16), want.view(torch.int16))


def test_errors() -> None:
    packed, scales = random_quantized(8, 64, device="cuda")
    with pytest.raises(ChordInputError, match="packed: expected a tensor on cuda"):
        dequantize_gpu(packed.cpu(), scales.cpu())
    with pytest.raises(ChordInputError, match="contiguous"):
        dequantize_gpu(torch.cat([packed, packed], 1)[:, ::2], scales)
    with pytest.raises(ChordInputError, match="out: expected shape"):
        dequantize_gpu(packed, scales, out=torch.empty(8, 32, dtype=torch.bfloat16, device="cuda"))
