"""The grouped family's routing blocks on the CPU: run through the reference indexed GEMM, they
give exactly the grouped reference (the GPU path hands the same tensors to the indexed engine,
whose kernels test_indexed_*_gpu.py check against that reference)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from chord_kernels import grouped, reference, routing
from chord_kernels.formats import random_quantized
from chord_kernels.grouped import contiguous_routing, masked_routing
from chord_kernels.indexed.api import _tma_rows_twin
from chord_kernels.indexed.heuristics import PREFILL_BLOCK
from chord_kernels.indexed.planner import cached_plan, config_for_rows
from chord_kernels.indexed.wgmma import WgmmaConfig, block_rows_wide_configs


def _rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-30)).item()


@pytest.mark.parametrize(("experts", "tokens", "top_k", "block_m"), [(6, 50, 2, 128), (4, 9, 1, 32), (5, 1, 3, 8),
                                                                     (3, 300, 1, 64), (7, 40, 2, 64)])
def test_contiguous_routing_is_the_grouped_contiguous_gemm(experts: int, tokens: int, top_k: int, block_m: int) -> None:
    g = torch.Generator().manual_seed(experts * 100 + tokens)
    ids = torch.rand(tokens, experts, generator=g).argsort(dim=1)[:, :top_k]
    if tokens == 300:
        ids[:] = 1  # one hot expert, the others empty
    layout = routing.contiguous_layout(ids, experts)
    weight = random_quantized(experts, 40, 96, generator=g)
    a = torch.randn(layout.m_indices.numel(), 96, generator=g).to(torch.bfloat16)
    sorted_ids, expert_ids, used = contiguous_routing(layout.m_indices, block_m)
    assert int(used) == layout.m_indices.numel() == sorted_ids.numel()
    # Every real row is a slot exactly once and no padding row is (not even in a block of padding
    # only, whose expert is -1: the kernels zero the slots of such blocks).
    slots = sorted_ids[sorted_ids < sorted_ids.numel()].sort().values
    assert torch.equal(slots, (layout.m_indices >= 0).nonzero().flatten().to(slots.dtype))
    got = reference.indexed_gemm(a, weight, sorted_ids, expert_ids, used, block_m=block_m, top_k=1)
    want = reference.grouped_contiguous(a, weight, layout.m_indices)
    assert _rel_err(got, want) < 1e-6
    assert torch.equal(got[layout.m_indices < 0].abs().sum(dim=1), torch.zeros(int((layout.m_indices < 0).sum())))


def test_masked_routing_is_the_grouped_masked_gemm() -> None:
    g = torch.Generator().manual_seed(7)
    groups, max_m, k = 6, 21, 64
    weight = random_quantized(groups, 24, k, generator=g)
    a = torch.randn(groups * max_m, k, generator=g).to(torch.bfloat16)
    for counts in ([0, 21, 1, 20, 8, 0], [21] * 6, [0] * 6, [3, 9, 16, 17, 5, 2]):
        masked_m = torch.tensor(counts, dtype=torch.int32)
        for block_m in (8, 16, 24, 32):
            sorted_ids, expert_ids, used = masked_routing(masked_m, max_m, block_m)
            per_group = -(-max_m // block_m)
            assert sorted_ids.numel() == int(used) == groups * per_group * block_m
            assert expert_ids.numel() == groups * per_group
            got = reference.indexed_gemm(a, weight, sorted_ids, expert_ids, used, block_m=block_m, top_k=1)
            want = reference.grouped_masked(a, weight, masked_m)
            assert _rel_err(got, want) < 1e-6, (counts, block_m)


def test_masked_counts_outside_the_buffer_select_all_or_nothing() -> None:
    sorted_ids, expert_ids, _ = masked_routing(torch.tensor([30, -4], dtype=torch.int32), max_m=10, block_m=8)
    sentinel = 2 * 10
    assert sorted_ids[:10].tolist() == list(range(10))  # 30 > max_m: all 10 rows, never the next group's
    assert (sorted_ids[10:16] == sentinel).all() and (sorted_ids[16:] == sentinel).all()
    assert expert_ids.tolist() == [0, 0, -1, -1]


def test_contiguous_kernels_read_m_indices_where_compiled_to() -> None:
    """The contiguous mode's kernels (its 64 x 2 and wide items of 16- or 32-row blocks: two consumers)
    read its routing from ``m_indices``; four-consumer kernels and blocks that do not divide its
    128-row segments are compiled without that branch (their producers would spill), so they get
    ``contiguous_routing``'s tensors."""
    def planned(n: int, k: int, block_m: int, tok_e: float) -> WgmmaConfig:
        blocks = 48 * int(tok_e) // block_m
        return cached_plan(n, k, block_m, blocks, 132, "sm_90a", config_for_rows(n, k, block_m, "sm_90a", tok_e)).config

    for n, k in ((4096, 7168), (7168, 2048)):
        plan = _tma_rows_twin(planned(n, k, PREFILL_BLOCK, 256.0))
        assert plan.tma_rows and plan.items == 2 and plan.reads_contiguous_rows
        assert all(wide.reads_contiguous_rows for wide in block_rows_wide_configs(n, k))
    four = planned(4096, 7168, 24, 16.0)
    assert four.consumers == 4 and not _tma_rows_twin(four).reads_contiguous_rows
    assert not WgmmaConfig(block_m=64, mt=2, items=2).reads_contiguous_rows  # rows gathered
    assert not _tma_rows_twin(planned(4096, 7168, 56, 43.0)).reads_contiguous_rows


def test_contiguous_routing_reads_each_block_expert_from_its_first_row() -> None:
    # An expert's padding follows its real rows: block 1 (rows 4-7) is expert 2's last row and padding,
    # block 2 padding only (expert -1, every row a sentinel), block 3 expert 0.
    m_indices = torch.tensor([2, 2, 2, 2, 2, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0], dtype=torch.int32)
    sorted_ids, expert_ids, used = contiguous_routing(m_indices, 4)
    assert expert_ids.tolist() == [2, 2, -1, 0] and int(used) == 16
    assert sorted_ids.tolist() == [0, 1, 2, 3, 4, 16, 16, 16, 16, 16, 16, 16, 12, 13, 14, 15]


@pytest.mark.parametrize(("masked_m", "max_m", "block_m", "match"), [
    (torch.tensor([1, 2], dtype=torch.int32), 3, 0, "block_m: expected a positive integer, got 0"),
    (torch.tensor([1, 2], dtype=torch.int32), -1, 2, "max_m: expected a non-negative integer, got -1"),
    (torch.tensor([[1, 2]], dtype=torch.int32), 3, 2, r"masked_m: expected 1 dimensions, got shape \(1, 2\)"),
    (torch.tensor([1.0, 2.0]), 3, 2, "masked_m: expected dtype torch.int32 or torch.int64, got torch.float32"),
    ([1, 2], 3, 2, "masked_m: expected a torch.Tensor, got list"),
])
def test_masked_routing_refuses_bad_arguments(masked_m, max_m, block_m, match):
    from chord_kernels import ChordInputError

    with pytest.raises(ChordInputError, match=match):
        masked_routing(masked_m, max_m, block_m)


def _layout_rows(counts: list[int]) -> torch.Tensor:
    ids = torch.arange(len(counts)).repeat_interleave(torch.tensor(counts, dtype=torch.int64))
    return routing.contiguous_layout(ids.view(-1, 1), len(counts)).m_indices


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 700), min_size=1, max_size=40), st.sampled_from([160, 144, 200]))
def test_wide_items_pay_counts_each_experts_rows_from_its_segments(counts: list[int], wide_rows: int) -> None:
    """grouped.wide_items_pay (the rule both kernels of the contiguous mode's pair evaluate) reads
    each expert's rows from its segments: the experts present, those at 129..wide_rows rows and
    those past, as counted from the rows per expert directly."""
    rows = torch.tensor(counts)
    present, fit, past = int((rows > 0).sum()), int(((rows > 128) & (rows <= wide_rows)).sum()), int((rows > wide_rows).sum())
    assert grouped.wide_items_pay(_layout_rows(counts), len(counts), wide_rows) == (fit * 5 >= present and fit > past)


def test_wide_items_pay_where_many_experts_pass_one_segment_not_for_one_hot_expert() -> None:
    """The measured cases: Poisson rows around 128-150 per expert take the wide items (sessions 43
    and 46); one hot expert with 8x the mean, the others below one segment, the 64 x 2 items
    (session 56: 9-30 % faster there); so do rows past 160 on most experts and an empty layout."""
    g = torch.Generator().manual_seed(57)
    poisson = lambda mean, e: torch.poisson(torch.full((e,), float(mean)), generator=g).long().tolist()  # noqa: E731
    for mean in (128, 135, 150):
        assert grouped.wide_items_pay(_layout_rows(poisson(mean, 48)), 48, 160)
    for mean in (105, 185):
        assert not grouped.wide_items_pay(_layout_rows(poisson(mean, 48)), 48, 160)
    for e in (12, 48):  # the benchmark's skewed draw: one expert with 8x the mean of 128, the rest share the others
        rest = (128 * e - 1024) // (e - 1)
        assert not grouped.wide_items_pay(_layout_rows([1024, *poisson(rest, e - 1)]), e, 160)
    assert not grouped.wide_items_pay(torch.full((256,), -1, dtype=torch.int32), 4, 160)
