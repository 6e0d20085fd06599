"""The grouped family (contiguous and masked) against the reference on an H200: fresh random data,
poisoned outputs (rows the GEMM must not touch stay poisoned), padding rows, empty groups,
masked_m = 0 and = max_m, odd N/K, repeated runs identical, CUDA-graph capture, mode refusals."""

from __future__ import annotations

import dataclasses
import zlib

import pytest
import torch
from test_indexed_gpu import _rel_err, _weights

import chord_kernels
from chord_kernels import grouped, indexed, reference, routing
from chord_kernels.errors import ChordInputError, ChordLayoutError
from chord_kernels.ops import silu_and_mul

pytestmark = pytest.mark.gpu
REL_TOL = 5e-3

CONTIGUOUS = [  # name, experts, N, K, tokens, top_k, routing
    ("ep8_gate_up", 48, 4096, 7168, 768, 8, "uniform"),
    ("ep8_down", 48, 7168, 2048, 512, 8, "uniform"),
    ("odd_nk", 5, 72, 160, 37, 2, "uniform"),
    ("one_hot_expert", 6, 256, 512, 300, 1, "hot"),
    ("empty_experts", 16, 192, 640, 9, 2, "uniform"),
]


def _ids(experts: int, tokens: int, top_k: int, kind: str, gen: torch.Generator) -> torch.Tensor:
    if kind == "hot":
        return torch.zeros(tokens, top_k, dtype=torch.int64, device="cuda")
    return torch.rand(tokens, experts, generator=gen, device="cuda").argsort(dim=1)[:, :top_k]


@pytest.mark.parametrize("case", CONTIGUOUS, ids=[c[0] for c in CONTIGUOUS])
def test_contiguous_matches_reference(case: tuple) -> None:
    name, e, n, k, tokens, top_k, kind = case
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(name.encode()))
    packed, scales = _weights(e, n, k, gen)
    w = chord_kernels.pack("contiguous", packed, scales, profile="h200_ep8")
    c = routing.contiguous_layout(_ids(e, tokens, top_k, kind, gen), e)
    hidden = torch.randn(tokens, k, generator=gen, device="cuda").to(torch.bfloat16)
    a = c.gather(hidden)
    outs = []
    for _ in range(2):
        out = torch.full((a.shape[0], n), float("nan"), dtype=torch.bfloat16, device="cuda")
        grouped.contiguous(a, w, c.m_indices, out=out)
        outs.append(out)
    torch.cuda.synchronize()
    real = c.m_indices >= 0
    ref = reference.grouped_contiguous(a, (packed, scales), c.m_indices)
    assert not outs[0][real].isnan().any(), "real rows never written"
    assert outs[0][~real].isnan().all(), "padding rows were written"
    assert _rel_err(outs[0][real], ref[real]) <= REL_TOL
    assert torch.equal(outs[0][real], outs[1][real]), "repeated runs differ"


MASKED = [  # name, experts, N, K, max_m, counts ("uniform" draws 0..max_m; else explicit edges)
    ("ep8_gate_up_decode", 48, 4096, 7168, 24, "uniform"),
    ("ep8_down_prefill", 48, 7168, 2048, 160, "uniform"),
    ("ep8_down_decode_bm16_row_widths", 48, 7168, 2048, 16, "uniform"),  # ~8 rows per group: 16-token blocks
    ("edges", 6, 264, 1056, 40, "edges"),
    ("bm32_edges", 6, 640, 4128, 40, "edges"),  # 16 rows per group: 32-token blocks, a short last K stage, partial N tile
    ("bm48", 6, 512, 4128, 88, "edges"),  # 32 rows per group: 48-token blocks
    ("four_pairs_bm24", 6, 512, 4128, 30, "edges"),  # 12 rows per group: items of two 24-token blocks
    ("ep8_gate_up_bm24_pairs", 48, 4096, 7168, 30, "uniform"),  # ~15 rows per group, up to 30
    ("ep8_down_bm24_three", 48, 7168, 2048, 30, "uniform"),  # the down on three consumer warpgroups
    ("odd_nk", 5, 72, 160, 13, "uniform"),
]


@pytest.mark.parametrize("case", MASKED, ids=[c[0] for c in MASKED])
def test_masked_matches_reference(case: tuple) -> None:
    name, g, n, k, max_m, kind = case
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(name.encode()))
    packed, scales = _weights(g, n, k, gen)
    w = chord_kernels.pack("masked", packed, scales, profile="h200_ep8")
    if kind == "edges":  # empty, full, one row, and ragged groups
        counts = [0, max_m, 1, max_m - 1, 17, 0][:g]
        masked_m = torch.tensor(counts, dtype=torch.int32, device="cuda")
    else:
        masked_m = torch.randint(0, max_m + 1, (g,), generator=gen, device="cuda", dtype=torch.int32)
    a = torch.randn(g, max_m, k, generator=gen, device="cuda").to(torch.bfloat16)
    expected_m = max(1, int(masked_m.float().mean().item()))
    outs = []
    for _ in range(2):
        out = torch.full((g, max_m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        grouped.masked(a, w, masked_m, expected_m, out=out)
        outs.append(out)
    torch.cuda.synchronize()
    real = torch.arange(max_m, device="cuda").unsqueeze(0) < masked_m.unsqueeze(1)
    ref = reference.grouped_masked(a, (packed, scales), masked_m).view(g, max_m, n)
    assert not outs[0][real].isnan().any(), "real rows never written"
    assert outs[0][~real].isnan().all(), "rows past masked_m were written"
    if real.any():
        assert _rel_err(outs[0][real], ref[real]) <= REL_TOL
    assert torch.equal(outs[0][real], outs[1][real]), "repeated runs differ"


IN_KERNEL_EXPECTED_M = (2, 6, 16, 43, 64, 100, 130, 145, 200)
"""Rows per group that plan, at N 512 / K 2048, decode blocks of 8 and 16 and WGMMA blocks of 32,
56, 80, 64 x 2 (dynamic schedule: K >= 2048) and the wide items (weight ring): at 130 up to ten
16-row blocks compiled at three widths, at 145 24-row blocks (at K <= 2048 six compiled at four
widths)."""


@pytest.mark.parametrize("expected_m", IN_KERNEL_EXPECTED_M)
def test_masked_in_kernel_routing_is_the_indexed_api(expected_m: int) -> None:
    """The kernels compute the masked mode's routing from masked_m: bit for bit what the indexed
    API computes over the blocks grouped.masked_routing builds, counts above max_m and negative
    ones included; rows past a count stay poisoned."""
    gen = torch.Generator(device="cuda").manual_seed(expected_m)
    g, n, k, max_m = 6, 512, 2048, 256
    packed, scales = _weights(g, n, k, gen)
    w = chord_kernels.pack("masked", packed, scales, profile="h200_ep8")
    w_indexed = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    counts = [expected_m, 0, max_m + 9, -3, min(max_m, expected_m + 13), 1]
    masked_m = torch.tensor(counts, dtype=torch.int32, device="cuda")
    a = torch.randn(g, max_m, k, generator=gen, device="cuda").to(torch.bfloat16)
    # Rows past a count hold garbage in DeepEP's buffers; the WGMMA kernel loads whole blocks of
    # rows (tensor copies), so NaN there must stay out of the real rows' results.
    past = torch.arange(max_m, device="cuda").unsqueeze(0) >= masked_m.clamp(0, max_m).unsqueeze(1)
    a[past] = float("nan")
    out = torch.full((g, max_m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    grouped.masked(a, w, masked_m, expected_m, out=out)
    block_m = grouped.masked_block_m(w, expected_m)
    want = torch.full((g * max_m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    indexed.gemm(a.view(g * max_m, k), w_indexed, *grouped.masked_routing(masked_m, max_m, block_m),
                 block_m=block_m, top_k=1, out=want)
    torch.cuda.synchronize()
    real = torch.arange(max_m, device="cuda").unsqueeze(0) < masked_m.clamp(0, max_m).unsqueeze(1)
    assert torch.equal(out[real], want.view(g, max_m, n)[real])
    assert not out[real].isnan().any() and out[~real].isnan().all()
    ref = reference.grouped_masked(a.nan_to_num(), (packed, scales), masked_m.clamp(0, max_m)).view(g, max_m, n)
    assert _rel_err(out[real], ref[real]) <= REL_TOL


CONTIGUOUS_TMA = [  # name, experts, N, K, tokens, top_k: the tensor-copy rows of the WGMMA kernel
    ("ep8_gate_up", 48, 4096, 7168, 3000, 8),  # 64 x 2 items, dynamic schedule
    ("k_tail", 7, 520, 1056, 700, 2),  # a short last K tile (1056 = 4 x 256 + 32), partial N tile
    ("k_256", 9, 7168, 256, 900, 3),  # one stage per item, strided schedule
]


@pytest.mark.parametrize("case", CONTIGUOUS_TMA, ids=[c[0] for c in CONTIGUOUS_TMA])
def test_contiguous_tensor_copies_are_the_gathered_rows(case: tuple) -> None:
    """The contiguous mode reads its routing blocks from ``m_indices`` in the kernel and loads each
    64-row block with tensor copies (tma_rows): bit for bit the indexed API's row gathers over the
    routing tensors ``contiguous_routing`` builds, NaN in the padding rows of ``a`` staying out of the
    real rows, padding rows of the output untouched."""
    name, e, n, k, tokens, top_k = case
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(name.encode()))
    packed, scales = _weights(e, n, k, gen)
    w = chord_kernels.pack("contiguous", packed, scales, profile="h200_ep8")
    w_indexed = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    c = routing.contiguous_layout(_ids(e, tokens, top_k, "uniform", gen), e)
    a = c.gather(torch.randn(tokens, k, generator=gen, device="cuda").to(torch.bfloat16))
    real = c.m_indices >= 0
    a[~real] = float("nan")
    out = torch.full((a.shape[0], n), float("nan"), dtype=torch.bfloat16, device="cuda")
    grouped.contiguous(a, w, c.m_indices, out=out)
    block_m = grouped.contiguous_block_m("sm_90a")
    want = torch.full_like(out, float("nan"))
    indexed.gemm(a, w_indexed, *grouped.contiguous_routing(c.m_indices, block_m), block_m=block_m, top_k=1,
                 out=want)
    torch.cuda.synchronize()
    assert torch.equal(out[real], want[real])
    assert not out[real].isnan().any() and out[~real].isnan().all()
    ref = reference.grouped_contiguous(a.nan_to_num(), (packed, scales), c.m_indices)
    assert _rel_err(out[real], ref[real]) <= REL_TOL
    with pytest.raises(ChordInputError, match="loads each routing block as consecutive rows of a"):
        plan = indexed.plan(w_indexed, block_m=block_m, capacity=a.shape[0] // block_m)
        indexed.gemm(a, w_indexed, *grouped.contiguous_routing(c.m_indices, block_m), block_m=block_m, top_k=1,
                     config=plan.config.with_tma_rows())


@pytest.mark.parametrize("expected_m", (6, 43, 200))
def test_activation_is_silu_and_mul_of_the_plain_output(expected_m: int) -> None:
    """activation="silu" (fused into the WGMMA epilogue, two steps on the decode kernel) is
    bit for bit ops.silu_and_mul of the plain GEMM on the real rows, in both modes; the fused
    epilogue leaves the other rows as they are."""
    gen = torch.Generator(device="cuda").manual_seed(100 + expected_m)
    g, n, k, max_m = 6, 512, 1024, 224
    packed, scales = _weights(g, n, k, gen)
    w = chord_kernels.pack("masked", packed, scales, profile="h200_ep8")
    masked_m = torch.randint(0, max_m + 1, (g,), generator=gen, device="cuda", dtype=torch.int32)
    a = torch.randn(g, max_m, k, generator=gen, device="cuda").to(torch.bfloat16)
    fused = torch.full((g, max_m, n // 2), float("nan"), dtype=torch.bfloat16, device="cuda")
    grouped.masked(a, w, masked_m, expected_m, out=fused, activation="silu")
    plain = grouped.masked(a, w, masked_m, expected_m)
    real = torch.arange(max_m, device="cuda").unsqueeze(0) < masked_m.unsqueeze(1)
    assert torch.equal(fused[real], silu_and_mul(plain[real]))
    if grouped.masked_block_m(w, expected_m) >= 24:  # the WGMMA kernel: fused
        assert fused[~real].isnan().all()

    w = chord_kernels.pack("contiguous", packed, scales, profile="h200_ep8")
    c = routing.contiguous_layout(_ids(g, 4 * expected_m, 2, "uniform", gen), g)
    hidden = torch.randn(4 * expected_m, k, generator=gen, device="cuda").to(torch.bfloat16)
    a = c.gather(hidden)
    fused = grouped.contiguous(a, w, c.m_indices, activation="silu")
    plain = grouped.contiguous(a, w, c.m_indices)
    rows = c.m_indices >= 0
    assert torch.equal(fused[rows], silu_and_mul(plain[rows]))


CONTIGUOUS_WIDE = [  # name, experts, N, K, mean rows per expert, routing (16-row blocks to 142, 32-row beyond)
    ("ep8_gate_up", 48, 4096, 7168, 135, "uniform"),  # dynamic schedule, SiLU-and-mul fused
    ("ep8_gate_up_32", 48, 4096, 7168, 148, "uniform"),
    ("ep8_down", 48, 7168, 2048, 128, "uniform"),
    ("odd_nk", 5, 72, 1056, 140, "uniform"),  # one tile per warpgroup, partial N tile, short last K stage, strided
    ("hot_expert", 8, 256, 512, 130, "hot"),  # every row on one expert: items across its segments, the rest empty
]


@pytest.mark.parametrize("case", CONTIGUOUS_WIDE, ids=[c[0] for c in CONTIGUOUS_WIDE])
def test_contiguous_wide_items_are_the_planned_bits(case: tuple) -> None:
    """With ``expected_m`` of 121-150 rows per expert and experts past one 128-row segment the
    contiguous mode runs wide items of 16- or 32-row blocks: on the real rows bit for bit the default plan
    (64 x 2 items), the reference within its bound, repeated runs identical, padding rows untouched,
    the activation fused or not ``silu_and_mul`` of the plain rows, and a captured graph replaying
    new rows and new experts (the kernels read ``m_indices`` on the device)."""
    name, e, n, k, mean, kind = case
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(name.encode()) + 43)
    packed, scales = _weights(e, n, k, gen)
    w = chord_kernels.pack("contiguous", packed, scales, profile="h200_ep8")
    c = routing.contiguous_layout(_ids(e, e * mean, 1, kind, gen), e)
    m = c.m_indices.numel()
    assert grouped.contiguous_config(w, m, mean, "sm_90a") is not None, "the case must take the wide items"
    a = torch.randn(m, k, generator=gen, device="cuda").to(torch.bfloat16)
    real = c.m_indices >= 0
    grouped.prepare(w, expected_m=mean, activation="silu")
    outs = []
    for _ in range(2):
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        grouped.contiguous(a, w, c.m_indices, out=out, expected_m=mean)
        outs.append(out)
    plan = grouped.contiguous(a, w, c.m_indices)
    forced = grouped.contiguous(a, w, c.m_indices, config=grouped.contiguous_config(w, m, mean, "sm_90a"))
    torch.cuda.synchronize()
    ref = reference.grouped_contiguous(a, (packed, scales), c.m_indices)
    assert outs[0][~real].isnan().all(), "padding rows were written"
    assert torch.equal(outs[0][real], plan[real])
    assert torch.equal(forced[real], plan[real]), "the wide items (the pair may have run the 64 x 2 items)"
    assert torch.equal(outs[0][real], outs[1][real]), "repeated runs differ"
    assert _rel_err(outs[0][real], ref[real]) <= REL_TOL
    fused = grouped.contiguous(a, w, c.m_indices, expected_m=mean, activation="silu")
    assert torch.equal(fused[real], silu_and_mul(plan[real]))

    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        grouped.contiguous(a, w, c.m_indices, out=out, expected_m=mean)
    a.copy_(torch.randn(m, k, generator=gen, device="cuda").to(torch.bfloat16))
    relabel = torch.randperm(e, generator=gen, device="cuda").to(torch.int32)
    c.m_indices.copy_(torch.where(real, relabel[c.m_indices.clamp(min=0)], -1))
    graph.replay()
    plan = grouped.contiguous(a, w, c.m_indices)
    torch.cuda.synchronize()
    assert torch.equal(out[real], plan[real])


def _rows_of(counts: list[int]) -> torch.Tensor:
    """m_indices of a contiguous layout with these rows per expert (each expert's segments in order)."""
    ids = torch.arange(len(counts), device="cuda").repeat_interleave(torch.tensor(counts, device="cuda"))
    return routing.contiguous_layout(ids.view(-1, 1), len(counts)).m_indices


def test_contiguous_pair_runs_the_launch_the_rows_choose() -> None:
    """Where ``contiguous_config`` offers wide items, ``contiguous`` launches them and the 64 x 2 items
    and each kernel decides from ``m_indices`` whether it runs: exactly one writes (poisoned outputs),
    the one ``grouped.wide_items_pay`` predicts — the wide items where many experts hold 129-160 rows,
    the 64 x 2 items where one hot expert alone passes a segment — and the pair gives the bits of
    the default plan, also in a captured graph replayed after ``m_indices`` switched between the two
    layouts of the same row count, with and without the fused SiLU-and-mul."""
    from chord_kernels.indexed.api import ContiguousRows, run_gemm

    gen = torch.Generator(device="cuda").manual_seed(57)
    e, n, k, mean = 16, 512, 1056, 125
    packed, scales = _weights(e, n, k, gen)
    w = chord_kernels.pack("contiguous", packed, scales, profile="h200_ep8")
    layouts = {  # both 24 segments of 128 rows
        "wide": _rows_of([150] * 8 + [100] * 8),  # 8 of 16 experts at 129-160 rows
        "hot": _rows_of([10 * 128] + [90] * 13 + [0] + [128]),  # one expert past one segment, by 9
    }
    m = 24 * 128
    assert all(rows.numel() == m for rows in layouts.values())
    wide = grouped.contiguous_config(w, m, mean, "sm_90a")
    assert wide is not None, "the case must offer the wide items"
    wide_rows = wide.block_m * wide.items
    a = torch.randn(m, k, generator=gen, device="cuda").to(torch.bfloat16)
    for name, rows in layouts.items():
        assert grouped.wide_items_pay(rows, e, wide_rows) == (name == "wide")
        real = rows >= 0
        plan = grouped.contiguous(a, w, rows)
        for member, config in (("wide", wide), ("hot", None)):
            out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
            run_gemm(a, w, ContiguousRows(rows, choice_rows=wide_rows, choice_wide=member == "wide"),
                     block_m=config.block_m if config else 64, top_k=1, out=out, block_rows=True, config=config)
            torch.cuda.synchronize()
            if member == name:
                assert torch.equal(out[real], plan[real]), f"{member} ran on the {name} layout: other bits"
                assert out[~real].isnan().all(), "padding rows were written"
            else:
                assert out.isnan().all(), f"the {member} launch ran on the {name} layout"
        pair = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        grouped.contiguous(a, w, rows, out=pair, expected_m=mean)
        torch.cuda.synchronize()
        assert torch.equal(pair[real], plan[real]) and pair[~real].isnan().all()
        ref = reference.grouped_contiguous(a, (packed, scales), rows)
        assert _rel_err(pair[real], ref[real]) <= REL_TOL

    m_indices = layouts["wide"].clone()
    for activation in (None, "silu"):
        width = n // 2 if activation else n
        grouped.prepare(w, expected_m=mean, activation=activation)
        out = torch.full((m, width), float("nan"), dtype=torch.bfloat16, device="cuda")
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            grouped.contiguous(a, w, m_indices, out=out, expected_m=mean, activation=activation)
        for name in ("hot", "wide", "hot"):
            m_indices.copy_(layouts[name])
            out.fill_(float("nan"))
            graph.replay()
            plan = grouped.contiguous(a, w, layouts[name], activation=activation)
            torch.cuda.synchronize()
            real = layouts[name] >= 0
            assert torch.equal(out[real], plan[real]), f"graph replay on the {name} layout ({activation})"
            assert out[~real].isnan().all()


def test_contiguous_names_a_bad_expected_m() -> None:
    gen = torch.Generator(device="cuda").manual_seed(13)
    packed, scales = _weights(4, 64, 64, gen)
    w = chord_kernels.pack("contiguous", packed, scales, profile="h200_ep8")
    a = torch.zeros(128, 64, dtype=torch.bfloat16, device="cuda")
    m_indices = torch.zeros(128, dtype=torch.int32, device="cuda")
    for bad in (-1, 130.5, True):
        with pytest.raises(ChordInputError, match=r"expected_m: expected a non-negative integer or None"):
            grouped.contiguous(a, w, m_indices, expected_m=bad)
    assert grouped.contiguous(a[:0], w, m_indices[:0], expected_m=130).shape == (0, 64)


def test_masked_graph_capture_replays_new_counts() -> None:
    gen = torch.Generator(device="cuda").manual_seed(5)
    g, n, k, max_m = 8, 512, 1024, 64
    packed, scales = _weights(g, n, k, gen)
    w = chord_kernels.pack("masked", packed, scales, profile="h200_ep8")
    a = torch.randn(g, max_m, k, generator=gen, device="cuda").to(torch.bfloat16)
    masked_m = torch.full((g,), 5, dtype=torch.int32, device="cuda")
    out = torch.empty(g, max_m, n, dtype=torch.bfloat16, device="cuda")
    grouped.prepare(w, expected_m=16)
    grouped.masked(a, w, masked_m, 16, out=out)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        grouped.masked(a, w, masked_m, 16, out=out)
    masked_m.copy_(torch.randint(0, max_m + 1, (g,), generator=gen, device="cuda", dtype=torch.int32))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    real = torch.arange(max_m, device="cuda").unsqueeze(0) < masked_m.unsqueeze(1)
    ref = reference.grouped_masked(a, (packed, scales), masked_m).view(g, max_m, n)
    assert not out[real].isnan().any()
    assert _rel_err(out[real], ref[real]) <= REL_TOL


def test_each_mode_refuses_the_others_weight() -> None:
    gen = torch.Generator(device="cuda").manual_seed(3)
    packed, scales = _weights(4, 64, 64, gen)
    masked_w = chord_kernels.pack("masked", packed, scales, profile="h200_ep8")
    contiguous_w = chord_kernels.pack("contiguous", packed, scales, profile="h200_ep8")
    a = torch.zeros(128, 64, dtype=torch.bfloat16, device="cuda")
    m_indices = torch.zeros(128, dtype=torch.int32, device="cuda")
    with pytest.raises(ChordLayoutError, match=r"grouped.contiguous needs a weight packed with mode in \['contiguous'\]"):
        grouped.contiguous(a, masked_w, m_indices)
    with pytest.raises(ChordLayoutError, match=r"mode in \['masked'\].*mode=contiguous"):
        grouped.masked(a.view(4, 32, 64), contiguous_w, torch.zeros(4, dtype=torch.int32, device="cuda"), 8)
    with pytest.raises(ChordInputError, match="multiple of 128 rows"):
        grouped.contiguous(a[:100], contiguous_w, m_indices[:100])


def test_gemm_masked_names_bad_rows() -> None:
    gen = torch.Generator(device="cuda").manual_seed(11)
    packed, scales = _weights(4, 64, 128, gen)
    w = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    a = torch.randn(4 * 8, 128, generator=gen, device="cuda").to(torch.bfloat16)
    counts = torch.full((4,), 3, dtype=torch.int32, device="cuda")
    with pytest.raises(ChordInputError, match=r"a: expected 4 groups x max_m=7 rows, got 32"):
        indexed.gemm_masked(a, w, indexed.MaskedRows(counts, 7), block_m=8)
    with pytest.raises(ChordInputError, match=r"masked_m: expected dtype torch.int32, got torch.int64"):
        indexed.gemm_masked(a, w, indexed.MaskedRows(counts.long(), 8), block_m=8)
    with pytest.raises(ChordInputError, match=r"masked_m: expected shape \[4\], got \[3\]"):
        indexed.gemm_masked(a, w, indexed.MaskedRows(counts[:3], 8), block_m=8)
    with pytest.raises(ChordInputError, match="expected_m"):  # 24: one block per item or several
        indexed.gemm_masked(a, w, indexed.MaskedRows(counts, 8), block_m=24)
    out = indexed.gemm_masked(a, w, indexed.MaskedRows(counts, 8), block_m=8)
    assert out.shape == (32, 64)


def test_contiguous_plan_cuts_a_sparse_last_round_into_blocks() -> None:
    """Where ``contiguous_tail_config`` cuts (EP32's 12 experts at 128 rows each: 192 gate_up items on
    132 SMs), the plan's launch, plain and with the fused SiLU-and-mul, gives the bits of the uncut
    64 x 2 items; padding rows untouched (poisoned); the reference within its bound."""
    from chord_kernels import hardware

    gen = torch.Generator(device="cuda").manual_seed(56)
    e, n, k = 12, 4096, 7168
    packed, scales = _weights(e, n, k, gen)
    w = chord_kernels.pack("contiguous", packed, scales, profile="h200_ep8")
    ids = torch.arange(e, device="cuda").repeat_interleave(128)[torch.randperm(128 * e, generator=gen, device="cuda")]
    c = routing.contiguous_layout(ids.view(-1, 1), e)
    a = torch.randn(c.m_indices.numel(), k, generator=gen, device="cuda").to(torch.bfloat16)
    m, sms = a.shape[0], hardware.num_sms(torch.cuda.current_device())
    cut = grouped.contiguous_tail_config(w, m, "sm_90a", sms)
    if cut is None:
        pytest.skip(f"no sparse last round of {m // 128} segments' items on {sms} SMs")
    plain = dataclasses.replace(cut, tail_parts=0, tail_blocks=False)
    real = c.m_indices >= 0
    for activation in (None, "silu"):
        outs = []
        for config in (None, plain):
            out = torch.full((m, n // 2 if activation else n), float("nan"), dtype=torch.bfloat16, device="cuda")
            grouped.contiguous(a, w, c.m_indices, out=out, activation=activation, config=config)
            outs.append(out)
        torch.cuda.synchronize()
        assert torch.equal(outs[0][real], outs[1][real]), f"the cut's bits differ from the uncut items' ({activation})"
        assert outs[0][~real].isnan().all(), "padding rows were written"
    ref = reference.grouped_contiguous(a, (packed, scales), c.m_indices)
    assert _rel_err(outs[1][real], silu_and_mul(ref[real])) <= REL_TOL
