"""Routing builders: vLLM's align contract, grouped contiguous and masked layouts."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from chord_kernels import ChordInputError
from chord_kernels.routing import align_block_size, contiguous_layout, masked_layout


def test_align_hand_worked_case() -> None:
    # Slots (token*top_k + j): 0->e0 1->e2 2->e2 3->e1 4->e0 5->e0
    topk_ids = torch.tensor([[0, 2], [2, 1], [0, 0]], dtype=torch.int32)
    r = align_block_size(topk_ids, block_m=4, num_experts=4)
    sentinel = 6
    assert r.num_slots == sentinel
    assert r.sorted_token_ids.shape == (6 + 4 * 3,)
    assert r.sorted_token_ids.tolist()[:12] == [0, 4, 5, sentinel, 3, sentinel, sentinel, sentinel, 1, 2, sentinel, sentinel]
    assert set(r.sorted_token_ids.tolist()[12:]) == {sentinel}
    assert r.expert_ids.tolist() == [0, 1, 2, -1, -1]
    assert r.num_tokens_post_padded.dtype == torch.int32 and r.num_tokens_post_padded.tolist() == [12]


def test_align_leaves_out_ids_outside_the_experts() -> None:
    # Slots 1 (-1) and 4 (id 3 of 3 experts) are not routed; the rest as if they were absent.
    topk_ids = torch.tensor([[0, -1], [2, 0], [3, 2]], dtype=torch.int64)
    r = align_block_size(topk_ids, block_m=2, num_experts=3)
    sentinel = 6
    assert r.sorted_token_ids.tolist()[:4] == [0, 3, 2, 5]
    assert set(r.sorted_token_ids.tolist()[4:]) == {sentinel}
    assert r.expert_ids.tolist()[:3] == [0, 2, -1]
    assert r.num_tokens_post_padded.tolist() == [4]


def test_align_expert_map_marks_non_local_blocks() -> None:
    topk_ids = torch.tensor([[0, 3], [1, 3]])
    expert_map = torch.tensor([-1, -1, 0, 1])  # this rank holds global experts 2 and 3
    r = align_block_size(topk_ids, block_m=2, num_experts=4, expert_map=expert_map)
    # global 0: block 0, global 1: block 1, global 3: block 2 -> local 1
    assert r.expert_ids.tolist()[:3] == [-1, -1, 1]


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(1, 40),
    top_k=st.integers(1, 4),
    experts=st.integers(1, 12),
    block_m=st.sampled_from([1, 4, 8, 16, 64]),
    hot=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_align_properties(m: int, top_k: int, experts: int, block_m: int, hot: bool, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, experts, (m, top_k), generator=g)
    if hot:  # one hot expert, the rest empty
        ids.fill_(experts - 1)
    r = align_block_size(ids, block_m, experts)
    numel = m * top_k
    used = r.num_tokens_post_padded.item()
    assert r.sorted_token_ids.numel() == numel + experts * (block_m - 1)
    assert used % block_m == 0 and used <= r.sorted_token_ids.numel()
    live = r.sorted_token_ids[:used]
    valid = live[live < numel]
    # every valid slot appears exactly once; everything else is the sentinel
    assert sorted(valid.tolist()) == list(range(numel))
    assert bool((r.sorted_token_ids[used:] == numel).all())
    assert bool(((live == numel) | (live < numel)).all())
    # blocks never mix experts, and each block's expert is the one its slots chose
    flat = ids.reshape(-1)
    for b in range(used // block_m):
        block = live[b * block_m:(b + 1) * block_m]
        slots = block[block < numel]
        assert slots.numel() > 0, "a block in use must hold at least one slot"
        assert bool((flat[slots.long()] == r.expert_ids[b]).all())
    assert bool((r.expert_ids[used // block_m:] == -1).all())


def test_align_errors() -> None:
    with pytest.raises(ChordInputError, match="topk_ids: expected dtype"):
        align_block_size(torch.zeros(2, 2), 4, 4)
    with pytest.raises(ChordInputError, match="block_m"):
        align_block_size(torch.zeros(2, 2, dtype=torch.int32), 0, 4)
    with pytest.raises(ChordInputError, match=r"expert_map: expected shape \[4\]"):
        align_block_size(torch.zeros(2, 2, dtype=torch.int32), 4, 4, expert_map=torch.zeros(3, dtype=torch.int32))


def test_contiguous_layout_pads_each_expert_to_alignment() -> None:
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 5, (37, 3), generator=g)
    ids[ids == 2] = 4  # expert 2 is empty
    c = contiguous_layout(ids, 5, alignment=16)
    assert c.m_indices.numel() % 16 == 0
    real = c.row_slots >= 0
    assert sorted(c.row_slots[real].tolist()) == list(range(ids.numel()))
    assert bool((c.m_indices[~real] == -1).all())
    assert bool((ids.reshape(-1)[c.row_slots[real]] == c.m_indices[real]).all())
    hidden = torch.randn(37, 8).bfloat16()
    gathered = c.gather(hidden)
    assert torch.equal(gathered[real], hidden[c.row_slots[real] // 3])
    assert bool((gathered[~real] == 0).all())
    assert c.expected_m == round(37 * 3 / 5)
    local = contiguous_layout(torch.tensor([[0, 1], [1, 3], [3, 3]]), 4, expert_map=torch.tensor([-1, 0, -1, 1]))
    assert local.expected_m == round(5 / 2)  # the local experts' rows over the local experts


def test_masked_layout_with_expert_map() -> None:
    ids = torch.tensor([[0, 1], [1, 3], [3, 3]])
    expert_map = torch.tensor([-1, 0, -1, 1])
    r = masked_layout(ids, 4, expert_map=expert_map)
    assert r.masked_m.tolist() == [2, 3]
    assert r.row_slots.tolist() == [[1, 2, -1], [3, 4, 5]]
    with pytest.raises(ChordInputError, match="max_m"):
        masked_layout(ids, 4, max_m=2, expert_map=expert_map)


def test_align_kernels_refuse_int32_overflow() -> None:
    from chord_kernels import ChordUnsupportedError
    from chord_kernels.ops import align

    ids, out = torch.zeros(3, dtype=torch.int32), torch.empty(1, dtype=torch.int32)
    with pytest.raises(ChordUnsupportedError, match="int32 indices"):  # 3 chunks x 2^30 experts
        align.align_into(ids, None, 8, 1 << 30, out, out, out, chunk_slots=1)


def test_grouped_layouts_skip_invalid_ids_under_an_expert_map():
    # -1 (and >= num_experts) ids are not routed, as in align_block_size; under an expert map a -1
    # id once indexed the map from its end and landed on the last global expert's group.
    expert_map = torch.tensor([-1, 0, -1, 1])
    negative = masked_layout(torch.tensor([[1, -1], [3, 1]]), 4, expert_map=expert_map)
    assert negative.masked_m.tolist() == [2, 1]  # once [2, 2]: the -1 slot in expert 3's group
    assert negative.row_slots.tolist() == [[0, 3], [2, -1]]
    ids = torch.tensor([[0, -1], [3, 4]])
    masked = masked_layout(ids, 4, expert_map=expert_map)
    assert masked.masked_m.tolist() == [0, 1] and masked.row_slots[1].tolist() == [2]
    contiguous = contiguous_layout(ids, 4, expert_map=expert_map)
    assert sorted(contiguous.row_slots[contiguous.row_slots >= 0].tolist()) == [2]
    plain = masked_layout(ids, 4)  # without a map: 4 is out of range, not routed
    assert plain.masked_m.tolist() == [1, 0, 0, 1]
    assert contiguous_layout(ids, 4).m_indices.ne(-1).sum().item() == 2


def test_grouped_layouts_refuse_a_map_with_local_ids_past_its_local_count():
    with pytest.raises(ChordInputError, match=r"expert_map: expected local ids 0\.\.1 .* got 5"):
        masked_layout(torch.tensor([[0]]), 2, expert_map=torch.tensor([0, 5]))


@pytest.mark.parametrize("num_experts", [0, -1, 4.0])
def test_routing_builders_refuse_a_bad_num_experts(num_experts):
    ids = torch.zeros(2, 1, dtype=torch.int64)
    for build in (lambda: contiguous_layout(ids, num_experts), lambda: masked_layout(ids, num_experts),
                  lambda: align_block_size(ids, 16, num_experts)):
        with pytest.raises(ChordInputError, match=f"num_experts: expected a positive integer, got {num_experts}"):
            build()


def test_routing_builders_refuse_non_integer_sizes():
    ids = torch.zeros(2, 1, dtype=torch.int64)
    with pytest.raises(ChordInputError, match="block_m: expected a positive integer, got 16.0"):
        align_block_size(ids, 16.0, 4)
    with pytest.raises(ChordInputError, match="max_m: expected a positive integer, got 4.0"):
        masked_layout(ids, 4, max_m=4.0)
