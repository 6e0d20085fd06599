"""The source format: packing, the reference dequant, and the compressed-tensors cross-check."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from chord_kernels import ChordInputError
from chord_kernels.formats import (
    check_quantized,
    dequantize,
    pack_int4,
    quantize,
    random_quantized,
    unpack_int4,
)


@settings(max_examples=40, deadline=None)
@given(
    experts=st.integers(1, 3),
    n=st.integers(1, 9),
    k_words=st.integers(1, 8),
    seed=st.integers(0, 2**31 - 1),
)
def test_pack_unpack_round_trip(experts: int, n: int, k_words: int, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 16, (experts, n, k_words * 8), generator=g, dtype=torch.uint8)
    packed = pack_int4(codes)
    assert packed.dtype == torch.int32 and packed.shape == (experts, n, k_words)
    assert torch.equal(unpack_int4(packed), codes)


def test_bit_positions_follow_the_source_format() -> None:
    # Column k lives in word k // 8 at bits 4 * (k % 8).
    codes = torch.zeros(1, 16, dtype=torch.uint8)
    codes[0, 3] = 0xA
    codes[0, 15] = 0xF  # top nibble of word 1: the word is negative as int32
    packed = pack_int4(codes)
    assert packed[0, 0].item() == 0xA << 12
    assert packed[0, 1].item() == (0xF << 28) - (1 << 32)


def test_matches_compressed_tensors_packer() -> None:
    helpers = pytest.importorskip("compressed_tensors.compressors.pack_quantized.helpers")
    g = torch.Generator().manual_seed(1)
    values = torch.randint(-8, 8, (2, 24, 96), generator=g, dtype=torch.int8)
    theirs = helpers.pack_to_int32(values, num_bits=4)
    ours = pack_int4((values.to(torch.int16) + 8).to(torch.uint8))
    assert torch.equal(ours, theirs)
    back = helpers.unpack_from_int32(theirs[1], num_bits=4, shape=torch.Size(values.shape[1:]))
    assert torch.equal(back, values[1])


def test_dequant_matches_compressed_tensors_dequantize() -> None:
    forward = pytest.importorskip("compressed_tensors.quantization.lifecycle.forward")
    qargs = pytest.importorskip("compressed_tensors.quantization").QuantizationArgs(
        num_bits=4, type="int", symmetric=True, strategy="group", group_size=32
    )
    packed, scales = random_quantized(40, 128, generator=torch.Generator().manual_seed(2))
    q = unpack_int4(packed).to(torch.int8) - 8
    theirs = forward.dequantize(q, scales, torch.zeros_like(scales, dtype=torch.int8), qargs, dtype=torch.bfloat16)
    assert torch.equal(dequantize(packed, scales), theirs)


def test_dequant_is_subtract_then_scale_with_one_rounding() -> None:
    packed, scales = random_quantized(3, 16, 64, generator=torch.Generator().manual_seed(3))
    exact = (unpack_int4(packed).double() - 8) * scales.double().repeat_interleave(32, dim=-1)
    assert torch.equal(dequantize(packed, scales), exact.to(torch.bfloat16))


def test_dequant_of_every_scale_bit_pattern_and_code_is_one_rounding() -> None:
    # All 65536 bf16 scales (subnormal, inf, NaN included) against all 16 codes, twice per group.
    scales = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)[:, None]
    codes = torch.arange(16, dtype=torch.uint8).repeat(2).expand(scales.shape[0], 32).contiguous()
    exact = (codes.double() - 8) * scales.double()
    torch.testing.assert_close(dequantize(pack_int4(codes), scales), exact.to(torch.bfloat16), rtol=0, atol=0, equal_nan=True)


def test_quantize_round_trip_error_is_bounded() -> None:
    w = torch.randn(8, 64, generator=torch.Generator().manual_seed(4))
    packed, scales = quantize(w)
    err = (dequantize(packed, scales).float() - w).abs()
    bound = scales.float().repeat_interleave(32, dim=-1) * 0.5 + 1e-2 * w.abs()
    assert bool((err <= bound).all())


@pytest.mark.parametrize(
    ("packed", "scales", "message"),
    [
        (torch.zeros(4, 4, dtype=torch.int64), torch.zeros(4, 1, dtype=torch.bfloat16), "dtype torch.int32"),
        (torch.zeros(4, 4, dtype=torch.int32), torch.zeros(4, 1, dtype=torch.float16), "dtype torch.bfloat16"),
        (torch.zeros(4, 3, dtype=torch.int32), torch.zeros(4, 1, dtype=torch.bfloat16), "multiple of 32"),
        (torch.zeros(4, 8, dtype=torch.int32), torch.zeros(4, 1, dtype=torch.bfloat16), r"expected shape \[4, 2\]"),
        (torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.bfloat16), "dimensions"),
    ],
)
def test_bad_quantized_pairs_are_named(packed: torch.Tensor, scales: torch.Tensor, message: str) -> None:
    with pytest.raises(ChordInputError, match=message):
        check_quantized(packed, scales)


def test_pack_rejects_k_not_multiple_of_8_and_float_codes() -> None:
    with pytest.raises(ChordInputError, match="multiple of 8"):
        pack_int4(torch.zeros(2, 12, dtype=torch.uint8))
    with pytest.raises(ChordInputError, match="integer dtype"):
        pack_int4(torch.zeros(2, 16))


@pytest.mark.parametrize("bad", [16, -1, 255])
def test_pack_int4_refuses_codes_outside_4_bits(bad):
    codes = torch.zeros(2, 8, dtype=torch.int64)
    codes[1, 3] = bad  # once masked to its low nibble: a different weight, silently
    with pytest.raises(ChordInputError, match=rf"codes: expected unsigned 4-bit codes 0..15, got values in \[{min(bad, 0)}, {max(bad, 0)}\]"):
        pack_int4(codes.to(torch.uint8) if bad == 255 else codes)


def test_random_quantized_refuses_negative_sizes():
    with pytest.raises(ChordInputError, match=r"shape: expected non-negative integer sizes, got \(-1, 32\)"):
        random_quantized(-1, 32)
