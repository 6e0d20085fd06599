"""The vLLM-free MoE layer (:mod:`chord_vllm.core`) against ``chord_kernels.reference.moe_layer``.

CPU tests run the reference GEMMs through the core (routing, buffers, aliasing, numerics contract:
bit for bit). GPU tests (``-m gpu``, for the H200) run Chord's kernels on Kimi K2 EP8 and TP8
shapes, fuzzed routing, an expert map, M = 0 and 1, repeated runs and CUDA-graph replay.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import chord_kernels
from chord_kernels import reference
from chord_kernels.formats import random_quantized
from chord_vllm import core

REL_TOL = 5e-3
"""Norm-relative error allowed between Chord's kernels and the reference (fp32 sums in another
order, then two bf16 roundings in between); the CPU path must match exactly."""


def _layer(e: int, h: int, i: int, *, device: str = "cpu", profile: str = "h200_ep8", seed: int = 0):
    g = torch.Generator(device=device).manual_seed(seed)
    w13 = random_quantized(e, 2 * i, h, generator=g, device=device)
    w2 = random_quantized(e, h, i, generator=g, device=device)
    packed = (chord_kernels.pack("indexed", *w13, profile=profile), chord_kernels.pack("indexed", *w2, profile=profile))
    return w13, w2, packed


def _routing(m: int, experts: int, top_k: int, *, seed: int, device: str = "cpu", hot: bool = False):
    g = torch.Generator().manual_seed(seed)
    ids = torch.stack([torch.randperm(experts, generator=g)[:top_k] for _ in range(m)]) if m else \
        torch.empty(0, top_k, dtype=torch.int64)
    if hot and m:  # one expert takes every token's first choice
        ids[:, 0] = 0
        ids[:, 1:] = torch.where(ids[:, 1:] == 0, 1, ids[:, 1:])
    weights = torch.rand(m, top_k, generator=g)
    return ids.to(torch.int32).to(device), weights.to(device)


def _expert_map(experts: int, rank: int, ranks: int, device: str = "cpu") -> torch.Tensor:
    """Linear EP placement: rank r holds experts [r E/R, (r+1) E/R)."""
    per = experts // ranks
    m = torch.full((experts,), -1, dtype=torch.int32)
    m[rank * per:(rank + 1) * per] = torch.arange(per, dtype=torch.int32)
    return m.to(device)


def _local(w, rank: int, ranks: int):
    per = w[0].shape[0] // ranks
    return tuple(t[rank * per:(rank + 1) * per] for t in w)


def _x(m: int, h: int, seed: int, device: str = "cpu") -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + 7)
    return (torch.randn(m, h, generator=g) * 0.5).to(torch.bfloat16).to(device)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 24), top_k=st.integers(1, 4), experts=st.sampled_from([4, 6, 8]),
       ep=st.sampled_from([1, 2]), hot=st.booleans(), seed=st.integers(0, 1 << 16))
def test_reference_backend_matches_moe_layer_bit_for_bit(m, top_k, experts, ep, hot, seed) -> None:
    w13, w2, _ = _layer(experts, 64, 64, seed=seed % 7)
    rank = seed % ep
    ids, weights = _routing(m, experts, top_k, seed=seed, hot=hot)
    x = _x(m, 64, seed)
    expert_map = _expert_map(experts, rank, ep) if ep > 1 else None
    local13, local2 = (_local(w13, rank, ep), _local(w2, rank, ep)) if ep > 1 else (w13, w2)
    p13 = chord_kernels.pack("indexed", *local13, profile="h200_ep8")
    p2 = chord_kernels.pack("indexed", *local2, profile="h200_ep8")
    got = core.moe_standard(x, p13, p2, weights, ids, global_num_experts=experts, expert_map=expert_map,
                            backend=core.REFERENCE)
    assert got.shape == (m, 64)
    if m:  # (reference.moe_layer cannot reshape zero rows)
        want = reference.moe_layer(x, local13, local2, weights, ids, global_num_experts=experts,
                                   expert_map=expert_map)
        assert torch.equal(got, want)


def test_output_may_share_workspace13_and_poison_never_leaks() -> None:
    """vLLM hands the output inside workspace13's memory; both workspaces arrive full of garbage."""
    w13, w2, (p13, p2) = _layer(6, 96, 64, seed=3)
    m, top_k = 9, 3
    ids, weights = _routing(m, 6, top_k, seed=1)
    x = _x(m, 96, 1)
    ws13_shape, ws2_shape, out_shape = core.workspace_shapes(m, p13.n, p2.n, top_k)
    common = torch.full((max(torch.Size(ws13_shape).numel(), torch.Size(out_shape).numel()),), float("nan"),
                        dtype=torch.bfloat16)
    ws2 = torch.full(ws2_shape, float("nan"), dtype=torch.bfloat16)
    out = common[: torch.Size(out_shape).numel()].view(out_shape)
    got = core.moe_standard(x, p13, p2, weights, ids, out=out, workspace13=common[: torch.Size(ws13_shape).numel()].view(ws13_shape),
                            workspace2=ws2, backend=core.REFERENCE)
    assert got.data_ptr() == out.data_ptr()
    assert torch.equal(got, reference.moe_layer(x, w13, w2, weights, ids))


def test_block_m_scales_the_slot_count_by_local_experts() -> None:
    """With expert parallelism the ids are global: 48 of 384 experts see an eighth of the slots."""
    _, _, (p13, p2) = _layer(48, 64, 64)
    tp = core.block_m_for(p13, p2, num_tokens=48, top_k=8, global_num_experts=48)
    ep = core.block_m_for(p13, p2, num_tokens=48 * 8, top_k=8, global_num_experts=384)
    assert tp == ep == chord_kernels.indexed.choose_block_m(p13, 48 * 8)


def test_bad_shapes_are_named() -> None:
    _, _, (p13, p2) = _layer(4, 64, 64)
    ids, weights = _routing(3, 4, 2, seed=0)
    with pytest.raises(ValueError, match=r"expected \[3, 64\] activations for w13 \[4, 128, 64\]"):
        core.moe_standard(_x(3, 32, 0), p13, p2, weights, ids, backend=core.REFERENCE)
    with pytest.raises(ValueError, match="pass expert_map for expert parallelism"):
        core.moe_standard(_x(3, 64, 0), p13, p2, weights, ids, global_num_experts=8, backend=core.REFERENCE)


# --- GPU: Chord's kernels ------------------------------------------------------------------

KIMI = {  # (local experts, global experts, hidden, intermediate per rank, top-k)
    "ep8": (48, 384, 7168, 2048, 8),
    "tp8": (384, 384, 7168, 256, 8),
}


def _rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-30)).item()


def _kimi(name: str):
    local, total, h, i, top_k = KIMI[name]
    profile = "h200_ep8" if name == "ep8" else "h200_tp8"
    w13, w2, (p13, p2) = _layer(local, h, i, device="cuda", profile=profile, seed=11)
    expert_map = _expert_map(total, 3, total // local, device="cuda") if local != total else None
    core.prepare(p13, p2, torch.device("cuda"))
    return (w13, w2, p13, p2, expert_map, total, top_k)


@pytest.fixture(scope="module", params=sorted(KIMI))
def kimi(request):
    return _kimi(request.param)


@pytest.mark.gpu
@pytest.mark.parametrize("m", [0, 1, 7, 64, 257])
def test_kernels_match_reference_on_kimi_shapes(kimi, m: int) -> None:
    w13, w2, p13, p2, expert_map, total, top_k = kimi
    ids, weights = _routing(m, total, top_k, seed=m, device="cuda")
    x = _x(m, p13.k, m, device="cuda")
    got = core.moe_standard(x, p13, p2, weights, ids, global_num_experts=total, expert_map=expert_map)
    assert got.shape == (m, p13.k) and torch.isfinite(got).all()
    if m:
        want = reference.moe_layer(x, w13, w2, weights, ids, global_num_experts=total, expert_map=expert_map)
        assert _rel_err(got, want) < REL_TOL
    again = core.moe_standard(x, p13, p2, weights, ids, global_num_experts=total, expert_map=expert_map)
    assert torch.equal(got, again)  # deterministic run to run


@pytest.mark.gpu
@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 96), top_k=st.integers(1, 8), ep=st.sampled_from([1, 4]), hot=st.booleans(),
       seed=st.integers(0, 1 << 16))
def test_kernels_fuzzed_routing_and_expert_map(m, top_k, ep, hot, seed) -> None:
    experts, h, i = 16, 512, 256
    w13, w2, _ = _layer(experts, h, i, device="cuda", seed=seed % 5)
    rank = seed % ep
    expert_map = _expert_map(experts, rank, ep, device="cuda") if ep > 1 else None
    local13, local2 = (_local(w13, rank, ep), _local(w2, rank, ep)) if ep > 1 else (w13, w2)
    p13 = chord_kernels.pack("indexed", *local13, profile="h200_ep8")
    p2 = chord_kernels.pack("indexed", *local2, profile="h200_ep8")
    ids, weights = _routing(m, experts, top_k, seed=seed, device="cuda", hot=hot)
    x = _x(m, h, seed, device="cuda")
    got = core.moe_standard(x, p13, p2, weights, ids, global_num_experts=experts, expert_map=expert_map)
    want = reference.moe_layer(x, local13, local2, weights, ids, global_num_experts=experts, expert_map=expert_map)
    if want.float().norm() == 0:  # every choice remote: the partial sum is exactly zero
        assert torch.equal(got, want)
    else:
        assert _rel_err(got, want) < REL_TOL


@pytest.mark.gpu
def test_cuda_graph_capture_and_replay(kimi) -> None:
    """One graph per token count, captured after prepare(), replayed on fresh inputs."""
    w13, w2, p13, p2, expert_map, total, top_k = kimi
    for m in (1, 16):
        ids, weights = _routing(m, total, top_k, seed=100 + m, device="cuda")
        x = _x(m, p13.k, 100 + m, device="cuda")
        ws13, ws2, out_shape = core.workspace_shapes(m, p13.n, p2.n, top_k)
        ws13 = torch.empty(ws13, dtype=torch.bfloat16, device="cuda")
        ws2 = torch.empty(ws2, dtype=torch.bfloat16, device="cuda")
        out = torch.empty(out_shape, dtype=torch.bfloat16, device="cuda")

        def step(x=x, weights=weights, ids=ids, out=out, ws13=ws13, ws2=ws2):
            core.moe_standard(x, p13, p2, weights, ids, global_num_experts=total, expert_map=expert_map,
                              out=out, workspace13=ws13, workspace2=ws2)

        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            step()  # warm-up on the capture stream
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        for seed in (1, 2):
            new_ids, new_weights = _routing(m, total, top_k, seed=seed * 1000 + m, device="cuda")
            ids.copy_(new_ids)
            weights.copy_(new_weights)
            x.copy_(_x(m, p13.k, seed * 1000 + m, device="cuda"))
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            want = reference.moe_layer(x, w13, w2, weights, ids, global_num_experts=total, expert_map=expert_map)
            assert torch.isfinite(out).all() and _rel_err(out, want) < REL_TOL, (m, seed)
