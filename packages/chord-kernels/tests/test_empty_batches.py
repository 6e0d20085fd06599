"""Every public op that takes tokens accepts M = 0 (vLLM calls idle ranks with no tokens) and M = 1.

GPU ops are checked in test_indexed_gpu.py and test_dequant_gpu.py; these are the host ones.
"""

from __future__ import annotations

import pytest
import torch

import chord_kernels
from chord_kernels import indexed, reference, routing
from chord_kernels.formats import dequantize, random_quantized
from chord_kernels.ops import silu_and_mul, topk_sum

E, H, INTER, TOP_K = 6, 64, 32, 2


@pytest.fixture(scope="module")
def weights() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    return {"w13": random_quantized(E, 2 * INTER, H, generator=g), "w2": random_quantized(E, H, INTER, generator=g)}


def _ids(m: int) -> torch.Tensor:
    return torch.stack([torch.randperm(E, generator=torch.Generator().manual_seed(t))[:TOP_K] for t in range(m)]) \
        if m else torch.zeros(0, TOP_K, dtype=torch.int64)


@pytest.mark.parametrize("m", [0, 1])
def test_routing_builders(m: int) -> None:
    ids, hidden = _ids(m), torch.randn(m, H).bfloat16()
    r = routing.align_block_size(ids, 8, E)
    assert r.num_slots == m * TOP_K
    assert int(r.num_tokens_post_padded) == 8 * m * TOP_K  # distinct experts: one block per slot
    assert bool((r.sorted_token_ids[int(r.num_tokens_post_padded):] == m * TOP_K).all())
    c = routing.contiguous_layout(ids, E)
    assert c.m_indices.numel() == 128 * m * TOP_K and c.gather(hidden).shape == (128 * m * TOP_K, H)
    masked = routing.masked_layout(ids, E)
    assert int(masked.masked_m.sum()) == m * TOP_K
    gathered = masked.gather(hidden)
    assert gathered.shape == (E, masked.max_m, H)
    assert int((gathered != 0).any(dim=-1).sum()) == (m * TOP_K if m else 0)


@pytest.mark.parametrize("m", [0, 1])
def test_reference_ops(m: int, weights: dict) -> None:
    ids, hidden = _ids(m), torch.randn(m, H, generator=torch.Generator().manual_seed(1)).bfloat16()
    tw = torch.rand(m, TOP_K, generator=torch.Generator().manual_seed(2))
    r = routing.align_block_size(ids, 8, E)
    args = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    gate_up = reference.indexed_gemm(hidden, weights["w13"], *args, block_m=8, top_k=TOP_K)
    assert gate_up.shape == (m * TOP_K, 2 * INTER)
    c = routing.contiguous_layout(ids, E)
    assert reference.grouped_contiguous(c.gather(hidden), weights["w13"], c.m_indices).shape[0] == c.m_indices.numel()
    masked = routing.masked_layout(ids, E)
    assert reference.grouped_masked(masked.gather(hidden), weights["w13"], masked.masked_m).shape == \
        (E * masked.max_m, 2 * INTER)
    assert reference.silu_and_mul(gate_up).shape == (m * TOP_K, INTER)
    out = reference.moe_layer(hidden, weights["w13"], weights["w2"], tw, ids)
    assert out.shape == (m, H) and out.dtype == torch.bfloat16
    if m == 1:
        w13, w2 = dequantize(*weights["w13"]).double(), dequantize(*weights["w2"]).double()
        want = sum(tw[0, j].double() * reference.silu_and_mul((hidden[0].double() @ w13[e].t()).bfloat16()).double()
                   @ w2[e].t() for j, e in enumerate(ids[0].tolist()))
        assert ((out[0].double() - want).norm() / want.norm()).item() < 1e-2


@pytest.mark.parametrize("m", [0, 1])
def test_ops_and_planning(m: int, weights: dict) -> None:
    x = torch.randn(m, TOP_K, H).bfloat16()
    assert topk_sum(x).shape == (m, H)
    assert silu_and_mul(x.reshape(m * TOP_K, H)).shape == (m * TOP_K, H // 2)
    pw = chord_kernels.pack("indexed", *weights["w2"], profile="h200_ep8")
    block_m = indexed.choose_block_m(pw, m * TOP_K)
    assert block_m == 8
    capacity = indexed.routing_capacity(*(lambda r: (r.sorted_token_ids, r.expert_ids))(
        routing.align_block_size(_ids(m), block_m, E)), block_m)
    plan = indexed.plan(pw, block_m=block_m, capacity=capacity, num_sms=132, arch="sm_90a")
    assert 1 <= plan.grid <= 132 * plan.config.ctas_per_sm
