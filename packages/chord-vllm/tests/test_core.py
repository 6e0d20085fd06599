"""The vLLM-free MoE layer (:mod:`chord_vllm.core`) against ``chord_kernels.reference.moe_layer``.

CPU tests run the reference GEMMs through the core (routing, buffers, aliasing, numerics contract:
bit for bit). GPU tests (``-m gpu``, for the H200) run Chord's kernels on Kimi K2 EP8 and TP8
shapes, fuzzed routing, an expert map, M = 0 and 1, repeated runs and CUDA-graph replay; and the
batched (masked, DeepEP low-latency) experts on Kimi EP8 shapes with ragged counts.
"""

from __future__ import annotations

import math

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


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 3000), top_k=st.integers(1, 8), ep=st.sampled_from([1, 8]), seed=st.integers(0, 1 << 16))
def test_routing_rows_bound_holds_every_routing(m, top_k, ep, seed) -> None:
    """workspace_shapes' room for the activation in routing order is at least what the routing of
    the layer holds (rows = routing blocks x block_m), whatever the ids; slot order needs less."""
    experts = 64
    _, _, (p13, p2) = _layer(experts // ep, 64, 64)
    ids, _ = _routing(m, experts, top_k, seed=seed)
    expert_map = _expert_map(experts, seed % ep, ep) if ep > 1 else None
    block_m = core.block_m_for(p13, p2, m, top_k, experts)
    route = core.chord_align(ids, block_m, experts, expert_map)
    rows = chord_kernels.indexed.routing_capacity(route[0], route[1], block_m) * block_m
    bound = core.routing_rows_bound(p13, p2, m, top_k, experts)
    assert rows <= bound
    _, (ws2,), _ = core.workspace_shapes(m, p13.n, p2.n, top_k, bound)
    _, (slot_ws2,), _ = core.workspace_shapes(m, p13.n, p2.n, top_k)
    assert ws2 >= bound * (p13.n // 2) + m * top_k * p2.n and slot_ws2 <= ws2


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


def _batched(experts: int, max_m: int, h: int, counts: list[int], seed: int, device: str = "cpu"):
    """A ``[E, max_m, H]`` batched buffer whose rows past each count are NaN (they may be garbage)."""
    x = _x(experts * max_m, h, seed).view(experts, max_m, h).clone()
    for e, c in enumerate(counts[:experts]):
        x[e, max(0, c):] = float("nan")
    return x.to(device), torch.tensor(counts, dtype=torch.int32, device=device)


def _batched_reference(x: torch.Tensor, w13, w2, counts: list[int]) -> torch.Tensor:
    """Each expert's first rows through ``reference.moe_layer`` as one choice of weight 1 (exact):
    ``[sum(counts), H]`` in expert order."""
    e_ids = [e for e, c in enumerate(counts) for _ in range(min(c, x.shape[1]))]
    rows = torch.cat([x[e, :min(c, x.shape[1])] for e, c in enumerate(counts)]) if e_ids else x[0, :0]
    ids = torch.tensor(e_ids, dtype=torch.int32).view(-1, 1).to(x.device)
    ones = torch.ones(ids.shape, dtype=torch.float32, device=x.device)
    return reference.moe_layer(rows, w13, w2, ones, ids) if e_ids else rows


def _valid_rows(out: torch.Tensor, counts: list[int]) -> torch.Tensor:
    return torch.cat([out[e, :min(c, out.shape[1])] for e, c in enumerate(counts)])


BATCHED_COUNTS = {  # (experts, max_m): counts per expert, a list longer than E as from vLLM's
    "ragged": (6, 9, [3, 0, 9, 1, 5, 2]),  # BatchedPrepareAndFinalize is read only up to E
    "one hot": (4, 16, [0, 16, 0, 0]),
    "M = 1": (4, 1, [1, 0, 1, 1]),
    "counts above max_m, extra entries": (3, 5, [7, 5, -1, 4, 4]),
}


@pytest.mark.parametrize("case", sorted(BATCHED_COUNTS))
def test_batched_reference_backend_matches_per_expert_reference(case: str) -> None:
    experts, max_m, counts = BATCHED_COUNTS[case]
    w13, w2, (p13, p2) = _layer(experts, 96, 64, seed=5)
    x, num_tokens = _batched(experts, max_m, 96, counts, seed=2)
    ws13_shape, ws2_shape, out_shape = core.batched_workspace_shapes(experts, max_m, p13.n, p2.n)
    assert out_shape == (experts, max_m, 96)
    # vLLM lets the output share workspace13's memory; everything arrives poisoned.
    common = torch.full((max(math.prod(ws13_shape), math.prod(out_shape)),), float("nan"), dtype=torch.bfloat16)
    out = common[: math.prod(out_shape)].view(out_shape)
    got = core.moe_batched(x, p13, p2, num_tokens, expected_m=3, out=out,
                           workspace13=common[: math.prod(ws13_shape)].view(ws13_shape),
                           workspace2=torch.full(ws2_shape, float("nan"), dtype=torch.bfloat16),
                           backend=core.REFERENCE)
    assert got.data_ptr() == out.data_ptr()
    valid = [min(max(c, 0), max_m) for c in counts[:experts]]
    want = _batched_reference(x, w13, w2, valid)
    assert torch.equal(_valid_rows(got, valid), want)
    assert torch.isfinite(want).all()


@settings(max_examples=20, deadline=None)
@given(experts=st.integers(1, 6), max_m=st.integers(0, 20), expected_m=st.integers(0, 80),
       seed=st.integers(0, 1 << 16))
def test_batched_fuzzed_counts_and_block_sizes(experts, max_m, expected_m, seed) -> None:
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(0, max_m + 1, (experts,), generator=g).tolist()
    w13, w2, (p13, p2) = _layer(experts, 64, 64, seed=seed % 3)
    x, num_tokens = _batched(experts, max_m, 64, counts, seed=seed)
    got = core.moe_batched(x, p13, p2, num_tokens, expected_m=expected_m, backend=core.REFERENCE)
    assert got.shape == (experts, max_m, 64)
    if sum(counts):
        assert torch.equal(_valid_rows(got, counts), _batched_reference(x, w13, w2, counts))


def test_batched_bad_inputs_are_named() -> None:
    _, _, (p13, p2) = _layer(4, 64, 64)
    x, counts = _batched(4, 3, 64, [1, 2, 3, 0], seed=0)
    with pytest.raises(ValueError, match=r"expected \[4, max_m, 64\] activations for w13 \[4, 128, 64\]"):
        core.moe_batched(x[:3], p13, p2, counts, backend=core.REFERENCE)
    with pytest.raises(ValueError, match=r"expert_num_tokens: expected int32 \[>= 4\], got torch.int64 \[4\]"):
        core.moe_batched(x, p13, p2, counts.long(), backend=core.REFERENCE)
    with pytest.raises(ValueError, match=r"expected int32 \[>= 4\], got torch.int32 \[3\]"):
        core.moe_batched(x, p13, p2, counts[:3], backend=core.REFERENCE)


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
def test_prepare_leaves_nothing_to_compile_or_load(kimi, monkeypatch: pytest.MonkeyPatch) -> None:
    """After prepare() (the fixture's) moe_standard, decode to prefill, launches only kernels
    indexed.prepare_layer loads (the down from rows in routing order and the top-k sum included) and
    loads none: vLLM's first batch of a new size, or its graph capture, waits for no nvcc."""
    from chord_kernels import hardware
    from chord_kernels.indexed import api
    from chord_kernels.jit import CudaKernel, driver
    from chord_kernels.ops import align

    w13, w2, p13, p2, expert_map, total, top_k = kimi
    launched: list[CudaKernel] = []
    launch = CudaKernel.launch

    def record(self: CudaKernel, *args, **kwargs) -> None:
        launched.append(self)
        launch(self, *args, **kwargs)

    def refuse(*args, **kwargs):
        raise AssertionError("a kernel was loaded after prepare()")

    monkeypatch.setattr(CudaKernel, "launch", record)
    monkeypatch.setattr(driver, "load_function", refuse)
    allowed = {*api.layer_kernels(p13, p2, hardware.arch(torch.cuda.current_device())), *align.kernels()}
    for m in (1, 200, 2048, 6000):  # 8- and 16-token blocks (decode kernel), 56-token items, the wide items
        ids, weights = _routing(m, total, top_k, seed=m + 5, device="cuda")
        x = _x(m, p13.k, m + 5, device="cuda")
        launched.clear()
        got = core.moe_standard(x, p13, p2, weights, ids, global_num_experts=total, expert_map=expert_map)
        assert launched and not [k.name for k in launched if k not in allowed], m
        want = reference.moe_layer(x, w13, w2, weights, ids, global_num_experts=total, expert_map=expert_map)
        assert _rel_err(got, want) < REL_TOL, m


@pytest.mark.gpu
def test_routing_order_layer_is_the_slot_order_layer(kimi) -> None:
    """At 43 rows per expert (WGMMA blocks) gate_up writes the activation in routing order when
    workspace2 has room for it (workspace_shapes with routing_rows_bound): bit for bit the layer a
    workspace2 sized for slot order gets."""
    w13, w2, p13, p2, expert_map, total, top_k = kimi
    m = 2048
    ids, weights = _routing(m, total, top_k, seed=77, device="cuda")
    x = _x(m, p13.k, 77, device="cuda")
    bound = core.routing_rows_bound(p13, p2, m, top_k, total)
    block_m = core.block_m_for(p13, p2, m, top_k, total)
    route = core.chord_align(ids, block_m, total, expert_map)
    assert 0 < chord_kernels.indexed.routing_order_rows(p13, p2, route, block_m, x.device) <= bound
    outs = []
    for rows in (bound, 0):
        _, ws2_shape, out_shape = core.workspace_shapes(m, p13.n, p2.n, top_k, rows)
        ws2 = torch.full(ws2_shape, float("nan"), dtype=torch.bfloat16, device="cuda")
        out = torch.full(out_shape, float("nan"), dtype=torch.bfloat16, device="cuda")
        outs.append(core.moe_standard(x, p13, p2, weights, ids, global_num_experts=total, expert_map=expert_map,
                                      out=out, workspace2=ws2))
    assert torch.equal(outs[0], outs[1])
    want = reference.moe_layer(x, w13, w2, weights, ids, global_num_experts=total, expert_map=expert_map)
    assert _rel_err(outs[0], want) < REL_TOL


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


def _capture(step) -> torch.cuda.CUDAGraph:
    """``step`` warmed up on a side stream, then captured."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # warm-up on the capture stream
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph


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

        graph = _capture(step)
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


# --- GPU: the batched (masked) experts on Kimi K2 EP8 shapes ---------------------------------

BATCHED_MAX_M = 32
"""Rows per expert of the batched buffer (DeepEP low-latency: tokens per rank x ranks), kept modest."""


@pytest.fixture(scope="module")
def kimi_ep8():
    w13, w2, p13, p2, *_ = _kimi("ep8")
    core.prepare(p13, p2, torch.device("cuda"), batched=True)
    return w13, w2, p13, p2


def _kimi_counts(experts: int, seed: int) -> list[int]:
    """Ragged counts: an empty expert, one full (hot) one, one of a single row, the rest random."""
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(0, 12, (experts,), generator=g).tolist()
    counts[:3] = [0, BATCHED_MAX_M, 1]
    return counts


@pytest.mark.gpu
@pytest.mark.parametrize("expected_m", [1, 8, 16, 32])
def test_batched_kernels_match_reference_on_kimi_ep8(kimi_ep8, expected_m: int) -> None:
    w13, w2, p13, p2 = kimi_ep8
    counts = _kimi_counts(p13.num_experts, seed=expected_m)
    x, num_tokens = _batched(p13.num_experts, BATCHED_MAX_M, p13.k, counts, seed=expected_m, device="cuda")
    out = torch.full((p13.num_experts, BATCHED_MAX_M, p2.n), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = core.moe_batched(x, p13, p2, num_tokens, expected_m=expected_m, out=out)
    rows = _valid_rows(got, counts)
    want = _batched_reference(x, w13, w2, counts)
    assert torch.isfinite(rows).all() and _rel_err(rows, want) < REL_TOL
    again = core.moe_batched(x, p13, p2, num_tokens, expected_m=expected_m)
    assert torch.equal(_valid_rows(again, counts), rows)  # deterministic run to run


@pytest.mark.gpu
def test_batched_cuda_graph_capture_and_replay(kimi_ep8) -> None:
    """Captured once after prepare(); replayed on fresh rows and counts."""
    w13, w2, p13, p2 = kimi_ep8
    e, k = p13.num_experts, p13.k
    x, num_tokens = _batched(e, BATCHED_MAX_M, k, _kimi_counts(e, seed=0), seed=0, device="cuda")
    ws13, ws2, out_shape = core.batched_workspace_shapes(e, BATCHED_MAX_M, p13.n, p2.n)
    ws13 = torch.empty(ws13, dtype=torch.bfloat16, device="cuda")
    ws2 = torch.empty(ws2, dtype=torch.bfloat16, device="cuda")
    out = torch.empty(out_shape, dtype=torch.bfloat16, device="cuda")

    def step():
        core.moe_batched(x, p13, p2, num_tokens, expected_m=8, out=out, workspace13=ws13, workspace2=ws2)

    graph = _capture(step)
    for seed in (1, 2):
        counts = _kimi_counts(e, seed=seed)
        new_x, new_counts = _batched(e, BATCHED_MAX_M, k, counts, seed=seed, device="cuda")
        x.copy_(new_x)
        num_tokens.copy_(new_counts)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        rows = _valid_rows(out, counts)
        assert torch.isfinite(rows).all() and _rel_err(rows, _batched_reference(x, w13, w2, counts)) < REL_TOL, seed
