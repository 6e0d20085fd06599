"""Wave-aware split offsets (TokenWeave §4.1.1).

A GEMM over ``m`` tokens runs ``ceil(m / tile_m) * ceil(n / tile_n)`` output tiles on ``num_sms``
SMs, i.e. in ``ceil(tiles / num_sms)`` waves; a wave costs about the same whether it is full or
not. Splitting the batch naively (T/2 + T/2) can turn ``w`` waves into ``w + 1`` or ``w + 2``
(each half ends in a partial wave), which eats the gain of overlapping communication. We choose
the offset ``s`` (a multiple of ``align``) whose two halves together run the fewest waves over all
GEMMs of the layer; ties go to the most balanced split, then to the larger first split (the second
split's attention also reads the first split's keys, so it is the slower one).

Everything here is pure integer arithmetic on Python ints, so every rank computes the same answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from chord_tokenweave.errors import TokenWeaveInputError

H200_SMS = 132


@dataclass(frozen=True)
class GemmShape:
    """One token-parallel GEMM of a layer: ``[m, k] @ [k, n]`` with ``m`` = tokens (per rank)."""

    n: int
    k: int
    tile_m: int = 128
    tile_n: int = 128
    name: str = ""

    def __post_init__(self) -> None:
        for field in ("n", "k", "tile_m", "tile_n"):
            value = getattr(self, field)
            if not isinstance(value, int) or value <= 0:
                raise TokenWeaveInputError(f"GemmShape.{field} must be a positive int, got {value!r}")

    def tiles(self, m: int) -> int:
        """Output tiles for ``m`` tokens."""
        return -(-m // self.tile_m) * -(-self.n // self.tile_n)

    def waves(self, m: int, num_sms: int = H200_SMS) -> int:
        """Waves of ``num_sms`` tiles needed for ``m`` tokens (0 for ``m == 0``)."""
        if m < 0:
            raise TokenWeaveInputError(f"token count must be >= 0, got {m}")
        if num_sms <= 0:
            raise TokenWeaveInputError(f"num_sms must be positive, got {num_sms}")
        return -(-self.tiles(m) // num_sms)


def layer_waves(m: int, gemms: Sequence[GemmShape], num_sms: int = H200_SMS) -> int:
    """Sum of the waves of every GEMM of a layer for ``m`` tokens."""
    return sum(g.waves(m, num_sms) for g in gemms)


def split_cost(
    num_tokens: int, offset: int, gemms: Sequence[GemmShape], num_sms: int = H200_SMS
) -> int:
    """Waves run by the two splits ``[0, offset)`` and ``[offset, num_tokens)`` together."""
    return layer_waves(offset, gemms, num_sms) + layer_waves(num_tokens - offset, gemms, num_sms)


def wave_aware_split(
    num_tokens: int,
    gemms: Sequence[GemmShape],
    *,
    num_sms: int = H200_SMS,
    align: int | None = None,
    min_fraction: float = 0.25,
) -> int | None:
    """The split offset for ``num_tokens`` tokens, or ``None`` when no split is possible.

    Candidates are multiples of ``align`` (default: the smallest ``tile_m`` of ``gemms``) with
    both halves holding at least ``min_fraction`` of the tokens. The result minimises the total
    waves of both halves; among equals it is the most balanced, then the larger first half.
    """
    if not isinstance(num_tokens, int) or num_tokens < 0:
        raise TokenWeaveInputError(f"num_tokens must be an int >= 0, got {num_tokens!r}")
    if not gemms:
        raise TokenWeaveInputError("gemms must name at least one GemmShape")
    if not 0.0 <= min_fraction < 0.5:
        raise TokenWeaveInputError(f"min_fraction must be in [0, 0.5), got {min_fraction}")
    step = min(g.tile_m for g in gemms) if align is None else align
    if step <= 0:
        raise TokenWeaveInputError(f"align must be positive, got {step}")
    if not isinstance(num_sms, int) or num_sms <= 0:
        raise TokenWeaveInputError(f"num_sms must be a positive int, got {num_sms!r}")
    # Each half holds at least ceil(min_fraction * T) tokens (flooring let a half fall below
    # the fraction: 170 tokens split 128/42, 42 < 42.5).
    least = math.ceil(num_tokens * min_fraction)
    lo = max(step, -(-least // step) * step)
    hi = num_tokens - max(1, least)
    best: tuple[int, int, int] | None = None
    best_offset: int | None = None
    for offset in range(lo, hi + 1, step):
        key = (
            split_cost(num_tokens, offset, gemms, num_sms),
            abs(2 * offset - num_tokens),
            -offset,
        )
        if best is None or key < best:
            best, best_offset = key, offset
    return best_offset


def wave_penalty(
    num_tokens: int, offset: int, gemms: Sequence[GemmShape], num_sms: int = H200_SMS
) -> int:
    """Extra waves the split costs over running the whole batch at once (>= 0)."""
    return split_cost(num_tokens, offset, gemms, num_sms) - layer_waves(num_tokens, gemms, num_sms)
