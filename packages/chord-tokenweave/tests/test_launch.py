"""The fused kernel's launch configuration: given values kept, the rest defaulted, bad ones
named."""

from __future__ import annotations

import pytest

from chord_tokenweave.errors import TokenWeaveInputError
from chord_tokenweave.launch import default_config, kernel_config, triton_next_pow2


def test_next_pow2() -> None:
    assert [triton_next_pow2(n) for n in (1, 2, 3, 5, 4096, 5120, 8193)] == [
        1, 2, 4, 8, 4096, 8192, 16384]


@pytest.mark.parametrize(("world", "hidden"), [(2, 8192), (4, 8192), (8, 8192), (2, 1024)])
def test_nothing_given_is_the_default(world: int, hidden: int) -> None:
    assert kernel_config(world, hidden) == default_config(world, hidden)


def test_given_values_are_kept_and_warps_follow_the_rows() -> None:
    assert kernel_config(2, 8192, 1, 8, 2) == (1, 8, 2)
    # Rows other than the default's: 8 warps from 4096 elements per iteration, 4 below.
    assert kernel_config(2, 8192, rows_per_iter=1) == (1, 8, 3)
    assert kernel_config(2, 1024, rows_per_iter=2) == (2, 4, 1)
    assert kernel_config(2, 1024, rows_per_iter=4) == (4, 8, 1)
    # The default's rows keep the default's warps; stages alone change nothing else.
    assert kernel_config(2, 8192, rows_per_iter=2, stages=1) == (2, 16, 1)


@pytest.mark.parametrize(("rows", "warps", "stages"), [(-1, None, None), (None, 3, None),
                                                       (None, 64, None), (None, None, -2)])
def test_bad_values_are_named(rows: int | None, warps: int | None, stages: int | None) -> None:
    with pytest.raises(TokenWeaveInputError, match="rows_per_iter must be > 0"):
        kernel_config(2, 8192, rows, warps, stages)
