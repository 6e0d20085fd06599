"""``align_block_size`` on CUDA (both of its kernel paths) against its pure PyTorch path, bit for bit."""

from __future__ import annotations

import pytest
import torch

from chord_kernels import routing
from chord_kernels.ops import align

pytestmark = pytest.mark.gpu

KIMI = 384
CASES = [  # tokens, top_k, experts, block_m, ids
    (0, 8, KIMI, 16, "uniform"),  # M = 0
    (1, 8, KIMI, 16, "uniform"),  # M = 1
    (7, 3, 5, 1, "uniform"),
    (37, 2, 13, 7, "uniform"),  # non-multiples everywhere
    (64, 8, KIMI, 8, "hot"),  # one hot expert, every other one empty
    (300, 8, KIMI, 24, "few"),  # most experts empty
    (513, 8, KIMI, 32, "invalid"),  # ids of -1 and >= experts are not routed
    (1024, 8, KIMI, 32, "uniform"),  # TP8 middle
    (2064, 8, KIMI, 56, "uniform"),
    (8192, 8, KIMI, 64, "uniform"),  # prefill: 65,536 slots
    (4096, 6, 160, 128, "skewed"),
    (3000, 8, 1500, 16, "uniform"),  # many experts: a 190 KB table in one CTA
    (300, 8, 4000, 8, "uniform"),  # more experts than one CTA's table holds: the chunked path
]


def _ids(tokens: int, top_k: int, experts: int, kind: str, gen: torch.Generator) -> torch.Tensor:
    if kind == "hot":
        return torch.full((tokens, top_k), experts // 2, dtype=torch.int32)
    if kind == "few":
        return torch.randint(0, 3, (tokens, top_k), generator=gen, dtype=torch.int32) * (experts // 3)
    if kind == "skewed":  # a few experts take most of the slots
        weights = torch.rand(experts, generator=gen) ** 8
        return torch.multinomial(weights, tokens * top_k, replacement=True, generator=gen).int().view(tokens, top_k)
    ids = torch.randint(0, experts, (tokens, top_k), generator=gen, dtype=torch.int32)
    if kind == "invalid":
        ids[::3, 0] = -1
        ids[1::5, -1] = experts
    return ids


def _assert_same(got: routing.AlignedRouting, want: routing.AlignedRouting) -> None:
    for name in ("sorted_token_ids", "expert_ids", "num_tokens_post_padded"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype == torch.int32 and a.shape == b.shape, name
        assert torch.equal(a.cpu(), b), name
    assert (got.block_m, got.num_slots, got.top_k) == (want.block_m, want.num_slots, want.top_k)


PATHS = {"single": {"single_max_slots": 1 << 30}, "chunks": {"single_max_slots": 0},
         "odd_chunks": {"single_max_slots": 0, "chunk_slots": 100}}


def _forced(ids: torch.Tensor, block_m: int, experts: int, expert_map: torch.Tensor | None,
            want: routing.AlignedRouting, path: str) -> routing.AlignedRouting:
    """align_into on one path, into outputs poisoned first (every element must be written)."""
    sorted_ids = torch.full(want.sorted_token_ids.shape, -7, dtype=torch.int32, device="cuda")
    expert_ids = torch.full(want.expert_ids.shape, -7, dtype=torch.int32, device="cuda")
    total = torch.full((1,), -7, dtype=torch.int32, device="cuda")
    local_map = None if expert_map is None else expert_map.cuda().int()
    align.align_into(ids.cuda().reshape(-1).contiguous(), local_map, block_m, experts, sorted_ids, expert_ids, total,
                     **PATHS[path])
    return routing.AlignedRouting(sorted_ids, expert_ids, total, block_m, want.num_slots, want.top_k)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize(("tokens", "top_k", "experts", "block_m", "kind"), CASES)
def test_kernel_equals_pytorch(tokens: int, top_k: int, experts: int, block_m: int, kind: str,
                               dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(tokens * 31 + experts)
    ids = _ids(tokens, top_k, experts, kind, gen).to(dtype)
    want = routing.align_block_size(ids, block_m, experts)
    got = routing.align_block_size(ids.cuda(), block_m, experts)
    _assert_same(got, want)
    for path in PATHS:
        if path == "single" and experts > 1700:
            continue  # its table does not fit one CTA's shared memory
        _assert_same(_forced(ids, block_m, experts, None, want, path), want)
    again = routing.align_block_size(ids.cuda(), block_m, experts)
    assert torch.equal(again.sorted_token_ids, got.sorted_token_ids)


@pytest.mark.parametrize("tokens", [0, 1, 700, 6000])
def test_kernel_with_expert_map(tokens: int) -> None:
    """EP8 rank 3 of Kimi K2: global experts 144-191 are local; every other block is -1."""
    gen = torch.Generator().manual_seed(tokens)
    ids = _ids(tokens, 8, KIMI, "uniform", gen)
    expert_map = torch.full((KIMI,), -1, dtype=torch.int64)
    expert_map[144:192] = torch.arange(48)
    want = routing.align_block_size(ids, 24, KIMI, expert_map)
    _assert_same(routing.align_block_size(ids.cuda(), 24, KIMI, expert_map.cuda()), want)
    for path in PATHS:
        _assert_same(_forced(ids, 24, KIMI, expert_map, want, path), want)


def test_non_contiguous_ids() -> None:
    gen = torch.Generator().manual_seed(4)
    ids = _ids(200, 16, KIMI, "uniform", gen)[:, ::2]
    _assert_same(routing.align_block_size(ids.cuda(), 16, KIMI), routing.align_block_size(ids, 16, KIMI))


def test_cuda_graph_replay_routes_new_ids() -> None:
    gen = torch.Generator().manual_seed(5)
    ids = _ids(512, 8, KIMI, "uniform", gen).cuda()
    align.prepare(ids.device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = routing.align_block_size(ids, 32, KIMI)
    for seed in (6, 7):
        fresh = _ids(512, 8, KIMI, "skewed", torch.Generator().manual_seed(seed))
        ids.copy_(fresh)
        graph.replay()
        torch.cuda.synchronize()
        _assert_same(captured, routing.align_block_size(fresh, 32, KIMI))


def test_too_many_experts_is_a_clear_error() -> None:
    from chord_kernels import ChordUnsupportedError

    with pytest.raises(ChordUnsupportedError, match="experts need"):
        routing.align_block_size(torch.zeros(4, 2, dtype=torch.int32, device="cuda"), 16, 100_000)
