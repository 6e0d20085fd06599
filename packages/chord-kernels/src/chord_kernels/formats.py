"""The source weight format (compressed-tensors ``pack-quantized``, int4, symmetric, group 32).

Numerics contract (docs/formats.md): a weight is an unsigned 4-bit code ``q`` in [0, 15] whose
value is ``q - 8``; every 32 consecutive input channels (K) share one bf16 scale ``s``; the
dequantized weight is ``bf16(bf16(q - 8) * s)`` — one rounding, since ``q - 8`` is exact in bf16.

Packing (``weight_packed`` int32 ``[..., N, K/8]``): the code of column ``k`` sits in word
``k // 8`` at bits ``4 * (k % 8)``. Everything here is pure PyTorch and runs on CPU or GPU.
"""

from __future__ import annotations

import torch

from chord_kernels.checks import require_multiple, require_tensor
from chord_kernels.errors import ChordInputError

GROUP_SIZE = 32
"""Input channels (K) that share one scale."""
PACK_FACTOR = 8
"""4-bit codes per int32 word."""
CODE_OFFSET = 8
"""Stored code = signed value + CODE_OFFSET."""


def pack_int4(codes: torch.Tensor) -> torch.Tensor:
    """Pack unsigned codes ``[..., N, K]`` (values 0..15, any integer dtype) into int32 ``[..., N, K/8]``."""
    require_tensor("codes", codes, ndim=(2, 3))
    if codes.dtype.is_floating_point or codes.dtype == torch.bool:
        raise ChordInputError(f"codes: expected an integer dtype, got {codes.dtype}")
    k = codes.shape[-1]
    require_multiple("codes.shape[-1] (K)", k, PACK_FACTOR)
    if codes.numel() and codes.device.type != "meta":
        low, high = (int(v) for v in torch.aminmax(codes.to(torch.int16) if codes.dtype == torch.uint8 else codes))
        if low < 0 or high > 15:
            raise ChordInputError(f"codes: expected unsigned 4-bit codes 0..15, got values in [{low}, {high}]")
    nibbles = codes.reshape(*codes.shape[:-1], k // PACK_FACTOR, PACK_FACTOR)
    # One nibble at a time: widening all codes at once would take 8 bytes per code (an EP8 rank's
    # gate_up stack is 1.4 G codes). Nibbles occupy disjoint bits, so OR assembles the word.
    word = torch.zeros(nibbles.shape[:-1], dtype=torch.int64, device=codes.device)
    for j in range(PACK_FACTOR):
        word |= nibbles[..., j].to(torch.int64) << (4 * j)
    # Fold the unsigned 32-bit word into int32 two's complement, as the compressed-tensors packer stores it.
    word -= (word >> 31) << 32
    return word.to(torch.int32)


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_int4`: int32 ``[..., N, K/8]`` -> uint8 codes ``[..., N, K]``."""
    require_tensor("packed", packed, dtype=torch.int32, ndim=(2, 3))
    codes = torch.empty((*packed.shape, PACK_FACTOR), dtype=torch.uint8, device=packed.device)
    for j in range(PACK_FACTOR):  # one nibble at a time: no int32 copy per code
        codes[..., j] = (packed >> (4 * j)) & 0xF
    return codes.reshape(*packed.shape[:-1], packed.shape[-1] * PACK_FACTOR)


def check_quantized(packed: torch.Tensor, scales: torch.Tensor, name: str = "weight") -> tuple[int, int]:
    """Validate a (packed, scales) pair and return (N, K)."""
    require_tensor(f"{name} packed", packed, dtype=torch.int32, ndim=(2, 3))
    require_tensor(f"{name} scales", scales, dtype=torch.bfloat16, ndim=packed.dim())
    n, k = packed.shape[-2], packed.shape[-1] * PACK_FACTOR
    require_multiple(f"{name} K", k, GROUP_SIZE, "group size 32")
    want = (*packed.shape[:-1], k // GROUP_SIZE)
    if tuple(scales.shape) != want:
        raise ChordInputError(
            f"{name} scales: expected shape {list(want)} for packed shape {list(packed.shape)} "
            f"(one bf16 scale per {GROUP_SIZE} K), got {list(scales.shape)}"
        )
    if packed.device != scales.device:
        raise ChordInputError(
            f"{name}: packed is on {packed.device} but scales are on {scales.device}"
        )
    return n, k


def dequantize(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Reference dequant: ``bf16(bf16(q - 8) * s)`` -> bf16 ``[..., N, K]``. Defines numerical truth."""
    check_quantized(packed, scales)
    values = unpack_int4(packed).to(torch.bfloat16).sub_(CODE_OFFSET)  # q - 8 is exact in bf16
    # bf16 * bf16: the exact product rounded once to bf16; in place, the scales broadcast over
    # their group (no bf16 copy of the codes or the scales per code).
    values.view(*scales.shape, GROUP_SIZE).mul_(scales.unsqueeze(-1))
    return values


def quantize(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric group-32 int4 quantization of a float weight ``[..., N, K]`` -> (packed, scales)."""
    require_tensor("weight", weight, dtype=(torch.float32, torch.bfloat16, torch.float16), ndim=(2, 3))
    k = weight.shape[-1]
    require_multiple("weight K", k, GROUP_SIZE, "group size 32")
    w = weight.float().reshape(*weight.shape[:-1], k // GROUP_SIZE, GROUP_SIZE)
    scales = (w.abs().amax(dim=-1) / 7.0).clamp_min(1e-8).to(torch.bfloat16)
    q = torch.round(w / scales.float().unsqueeze(-1)).clamp(-8, 7) + CODE_OFFSET
    codes = q.reshape(weight.shape).to(torch.uint8)
    return pack_int4(codes), scales


def random_quantized(
    *shape: int,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
    scale: float = 0.02,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fresh random (packed, scales) for a weight of logical shape ``([E,] N, K)``.

    Codes are uniform over 0..15; scales are uniform in [0.5, 1.5] * ``scale`` so that products
    of random bf16 activations stay well inside bf16 range.
    """
    if len(shape) not in (2, 3):
        raise ChordInputError(f"shape: expected (N, K) or (E, N, K), got {shape}")
    *lead, n, k = shape
    if any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in shape):
        raise ChordInputError(f"shape: expected non-negative integer sizes, got {shape}")
    require_multiple("K", k, GROUP_SIZE, "group size 32")
    gen_device = generator.device if generator is not None else torch.device("cpu")
    codes = torch.randint(0, 16, (*lead, n, k), generator=generator, device=gen_device, dtype=torch.uint8)
    s = (torch.rand((*lead, n, k // GROUP_SIZE), generator=generator, device=gen_device) + 0.5) * scale
    return pack_int4(codes).to(device), s.to(torch.bfloat16).to(device)
