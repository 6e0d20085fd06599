"""The reference GEMMs agree with a naive per-slot computation and with each other."""

from __future__ import annotations

import pytest
import torch

from chord_kernels import ChordInputError, pack
from chord_kernels.formats import dequantize, random_quantized
from chord_kernels.reference import (
    grouped_contiguous,
    grouped_masked,
    indexed_gemm,
    moe_layer,
    silu_and_mul,
)
from chord_kernels.routing import align_block_size, contiguous_layout, masked_layout


def _naive_slots(hidden: torch.Tensor, w: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """out[t] = hidden[t // top_k] @ w[ids.flat[t]]^T in float64, one slot at a time."""
    top_k = ids.shape[1]
    rows = [hidden[t // top_k].double() @ w[e].double().t() for t, e in enumerate(ids.reshape(-1).tolist())]
    return torch.stack(rows)


@pytest.mark.parametrize(("m", "top_k", "experts", "block_m"), [(1, 1, 3, 8), (7, 2, 5, 4), (33, 8, 16, 16)])
def test_indexed_gemm_matches_naive(m: int, top_k: int, experts: int, block_m: int) -> None:
    g = torch.Generator().manual_seed(m)
    hidden = torch.randn(m, 64, generator=g).bfloat16()
    packed, scales = random_quantized(experts, 24, 64, generator=g)
    ids = torch.randint(0, experts, (m, top_k), generator=g)
    r = align_block_size(ids, block_m, experts)
    out = indexed_gemm(hidden, (packed, scales), r.sorted_token_ids, r.expert_ids,
                       r.num_tokens_post_padded, block_m=block_m, top_k=top_k)
    ref = _naive_slots(hidden, dequantize(packed, scales), ids)
    torch.testing.assert_close(out.double(), ref, rtol=1e-2, atol=1e-2)


def test_indexed_gemm_zeroes_non_local_rows_and_applies_topk_weights() -> None:
    g = torch.Generator().manual_seed(9)
    hidden = torch.randn(6, 32, generator=g).bfloat16()
    packed, scales = random_quantized(2, 8, 32, generator=g)
    ids = torch.tensor([[0, 3], [1, 2], [3, 3], [2, 0], [1, 1], [0, 2]])
    expert_map = torch.tensor([-1, -1, 0, 1])
    weights = torch.rand(6, 2, generator=g)
    r = align_block_size(ids, 4, 4, expert_map)
    out = indexed_gemm(hidden, (packed, scales), r.sorted_token_ids, r.expert_ids,
                       r.num_tokens_post_padded, block_m=4, top_k=2, topk_weights=weights)
    w = dequantize(packed, scales)
    flat = ids.reshape(-1)
    for t in range(12):
        e = int(flat[t])
        if e < 2:
            assert bool((out[t] == 0).all())
        else:
            want = (hidden[t // 2].float() @ w[e - 2].float().t()) * weights.reshape(-1)[t]
            torch.testing.assert_close(out[t].float(), want, rtol=1e-2, atol=1e-2)


def test_grouped_layouts_agree_with_indexed() -> None:
    g = torch.Generator().manual_seed(11)
    hidden = torch.randn(20, 64, generator=g).bfloat16()
    packed, scales = random_quantized(4, 16, 64, generator=g)
    ids = torch.randint(0, 4, (20, 2), generator=g)
    r = align_block_size(ids, 8, 4)
    indexed = indexed_gemm(hidden, (packed, scales), r.sorted_token_ids, r.expert_ids,
                           r.num_tokens_post_padded, block_m=8, top_k=2)
    c = contiguous_layout(ids, 4, alignment=16)
    contiguous = grouped_contiguous(c.gather(hidden), (packed, scales), c.m_indices)
    real = c.row_slots >= 0
    assert torch.equal(contiguous[real], indexed[c.row_slots[real]])
    assert bool((contiguous[~real] == 0).all())
    mr = masked_layout(ids, 4)
    masked = grouped_masked(mr.gather(hidden), (packed, scales), mr.masked_m)
    slots = mr.row_slots.reshape(-1)
    assert torch.equal(masked[slots >= 0], indexed[slots[slots >= 0]])


def test_moe_layer_matches_dense_per_token_computation() -> None:
    g = torch.Generator().manual_seed(12)
    m, hdim, inter, experts, top_k = 9, 64, 32, 6, 3
    hidden = torch.randn(m, hdim, generator=g).bfloat16()
    w13 = random_quantized(experts, 2 * inter, hdim, generator=g)
    w2 = random_quantized(experts, hdim, inter, generator=g, scale=0.05)
    ids = torch.stack([torch.randperm(experts, generator=g)[:top_k] for _ in range(m)])
    weights = torch.softmax(torch.randn(m, top_k, generator=g), -1)
    out = moe_layer(hidden, w13, w2, weights, ids)
    w13f, w2f = dequantize(*w13).double(), dequantize(*w2).double()
    want = torch.zeros(m, hdim, dtype=torch.float64)
    for t in range(m):
        for j in range(top_k):
            e = int(ids[t, j])
            gate, up = (hidden[t].double() @ w13f[e].t()).chunk(2)
            want[t] += weights[t, j].double() * ((torch.nn.functional.silu(gate) * up) @ w2f[e].t())
    rel = (out.double() - want).norm() / want.norm()
    assert rel < 1e-2, rel


def test_moe_layer_accepts_packed_weight_objects() -> None:
    g = torch.Generator().manual_seed(13)
    hidden = torch.randn(4, 32, generator=g).bfloat16()
    w13, w2 = random_quantized(2, 64, 32, generator=g), random_quantized(2, 32, 32, generator=g)
    ids, weights = torch.tensor([[0], [1], [1], [0]]), torch.ones(4, 1)
    a = moe_layer(hidden, w13, w2, weights, ids)
    b = moe_layer(hidden, pack("reference", *w13, "any"), pack("reference", *w2, "any"), weights, ids)
    assert torch.equal(a, b)


def test_reference_errors() -> None:
    with pytest.raises(ChordInputError, match="even last dimension"):
        silu_and_mul(torch.zeros(2, 3, dtype=torch.bfloat16))
    with pytest.raises(ChordInputError, match="K=32"):
        r = align_block_size(torch.zeros(1, 1, dtype=torch.int32), 4, 1)
        indexed_gemm(torch.zeros(1, 64, dtype=torch.bfloat16), random_quantized(1, 8, 32),
                     r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=4, top_k=1)
    with pytest.raises(ChordInputError, match="hidden: expected dtype torch.bfloat16"):
        moe_layer(torch.zeros(2, 32), random_quantized(1, 8, 32), random_quantized(1, 32, 32),
                  torch.ones(2, 1), torch.zeros(2, 1, dtype=torch.int64))


def _routed_case():
    packed, scales = random_quantized(4, 64, 256, generator=torch.Generator().manual_seed(3))
    a = torch.randn(5, 256).bfloat16()
    r = align_block_size(torch.tensor([[0, 1], [2, 3], [1, 0], [3, 2], [0, 2]]), 16, 4)
    return a, (packed, scales), r


@pytest.mark.parametrize("block_m", [8, 0])
def test_indexed_gemm_refuses_routing_tensors_of_another_block_size(block_m):
    a, w, r = _routed_case()
    with pytest.raises(ChordInputError, match="block_m|num_tokens_post_padded: expected 0..40 entries"):
        indexed_gemm(a, w, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=block_m, top_k=2)


def test_indexed_gemm_refuses_inconsistent_routing_and_negative_slots():
    a, w, r = _routed_case()
    with pytest.raises(ChordInputError, match="num_tokens_post_padded: expected 0..16 entries"):
        indexed_gemm(a, w, r.sorted_token_ids, r.expert_ids[:1], r.num_tokens_post_padded, block_m=16, top_k=2)
    slots = r.sorted_token_ids.clone()
    slots[0] = -3  # once silently read row -3 // 2 = -2 of a
    with pytest.raises(ChordInputError, match="sorted_token_ids: expected slots 0..9 or the sentinel 10, got -3"):
        indexed_gemm(a, w, slots, r.expert_ids, r.num_tokens_post_padded, block_m=16, top_k=2)
    with pytest.raises(ChordInputError, match="topk_weights: expected dtype"):
        indexed_gemm(a, w, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=16, top_k=2,
                     topk_weights=torch.ones(5, 2, dtype=torch.int64))
    with pytest.raises(ChordInputError, match="weight: expected a PackedWeight, a .* got NoneType"):
        indexed_gemm(a, None, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=16, top_k=2)


def test_grouped_references_refuse_mismatched_shapes():
    packed, scales = random_quantized(4, 64, 256)
    with pytest.raises(ChordInputError, match="a: expected K=256 columns to match the weight, got 128"):
        grouped_contiguous(torch.randn(5, 128).bfloat16(), (packed, scales), torch.zeros(5, dtype=torch.int32))
    with pytest.raises(ChordInputError, match="m_indices: expert 9 is out of range for 4 experts"):
        grouped_contiguous(torch.randn(2, 256).bfloat16(), (packed, scales), torch.tensor([0, 9], dtype=torch.int32))
    counts = torch.ones(4, dtype=torch.int32)
    with pytest.raises(ChordInputError, match="a: expected K=256 columns"):
        grouped_masked(torch.randn(4, 2, 128).bfloat16(), (packed, scales), counts)
    with pytest.raises(ChordInputError, match=r"a: expected \[4, max_m, K\] or \[4 \* max_m, K\]"):
        grouped_masked(torch.randn(5, 256).bfloat16(), (packed, scales), counts)


def test_moe_layer_refuses_a_w2_of_another_hidden_size_and_a_foreign_expert_count():
    w13, w2 = random_quantized(4, 128, 256), random_quantized(4, 256, 64)
    hidden, ids = torch.randn(5, 256).bfloat16(), torch.randint(0, 4, (5, 2))
    weights = torch.rand(5, 2)
    with pytest.raises(ChordInputError, match=r"expected w13 \[E, 2I, H\] and w2 \[E, H, I\] with H=256"):
        moe_layer(hidden, w13, random_quantized(4, 128, 64), weights, ids)  # once returned [5, 128]
    with pytest.raises(ChordInputError, match="global_num_experts=2 differs from the 4 experts"):
        moe_layer(hidden, w13, w2, weights, ids, global_num_experts=2)  # once dropped experts 2 and 3
