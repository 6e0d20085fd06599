"""The one-fma dequantization (``PackedWeight.small_scales``: every scale below 2^-5) on an H200: the
bits of the two-instruction form for every kind of K loop of both kernels (the nibble pairs at bit 4
read in place, or shifted first where the planner keeps that), the fused epilogues, the
grouped modes and the whole layer; weights with a larger scale keep the two-instruction form."""

from __future__ import annotations

import dataclasses
import zlib

import pytest
import torch
from test_indexed_gpu import Case, _rel_err, _routing, _weights

import chord_kernels
from chord_kernels import grouped, reference
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import fused_moe, gemm, plan, routing_capacity
from chord_kernels.routing import align_block_size

pytestmark = pytest.mark.gpu

# (case, expected rows per expert for the planner, activation): one of each planned K loop.
CASES = [
    (Case("decode_bm8_ep8_down", 48, 7168, 2048, 96, 1, block_m=8, weighted=True), None, None),
    (Case("decode_bm16_tp8_down_short_k", 384, 7168, 256, 400, 8, block_m=16, weighted=True), None, None),
    (Case("pairs_bm24_four_consumers_gate_up", 48, 4096, 7168, 768, 1, block_m=24), 16.0, "silu"),
    (Case("one_block_bm24_down_whole_stages", 48, 7168, 2048, 768, 1, block_m=24, routing="mapped", weighted=True),
     16.0, None),
    (Case("bm56_down_whole_stages", 48, 7168, 2048, 48 * 43, 1, block_m=56, weighted=True), None, None),
    (Case("shifted_pairs_bm80_row_widths_gate_up", 48, 4096, 7168, 48 * 64, 1, block_m=80), None, "silu"),
    (Case("items2_bm64_row_widths_gate_up", 48, 4096, 7168, 48 * 100, 1, block_m=64), None, "silu"),
    (Case("wide_bm24_ring_gate_up", 48, 4096, 7168, 6144, 1, block_m=24), 128.0, None),
    (Case("runs_bm96_tp8_down", 384, 7168, 256, 4096, 8, block_m=96, routing="hot", weighted=True), None, None),
]


def _pair(case: Case, gen: torch.Generator) -> tuple[chord_kernels.PackedWeight, chord_kernels.PackedWeight]:
    packed, scales = _weights(case.experts, case.n, case.k, gen)
    small = chord_kernels.pack("indexed", packed, scales, profile="h200_tp8" if case.experts == 384 else "h200_ep8")
    assert small.small_scales  # random scales are below 0.03
    return small, dataclasses.replace(small, small_scales=False)


@pytest.mark.parametrize(("case", "tok_e", "activation"), CASES, ids=[c[0].name for c in CASES])
def test_one_fma_form_gives_the_same_bits(case: Case, tok_e: float | None, activation: str | None) -> None:
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(case.name.encode()))
    small, plain = _pair(case, gen)
    ids, global_e, expert_map = _routing(case, gen)
    r = align_block_size(ids, case.block_m, global_e, expert_map)
    args = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    capacity = routing_capacity(r.sorted_token_ids, r.expert_ids, case.block_m)
    planned = [plan(w, block_m=case.block_m, capacity=capacity, tok_e=tok_e).config for w in (small, plain)]
    assert planned[0] == dataclasses.replace(planned[1], subnormal=True) and not planned[1].subnormal
    # The one-fma form's pairs at bit 4 in place, or shifted first on the one-block items with row widths.
    assert getattr(planned[0], "shift_pairs", False) == case.name.startswith("shifted_pairs")
    a = torch.randn(case.rows, case.k, generator=gen, device="cuda").to(torch.bfloat16)
    tw = torch.rand(case.rows, case.top_k, generator=gen, device="cuda") if case.weighted else None
    n_out = case.n // 2 if activation else case.n
    outs = []
    for w in (small, plain, small):
        out = torch.full((case.rows * case.top_k, n_out), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemm(a, w, *args, block_m=case.block_m, top_k=case.top_k, topk_weights=tw, out=out, activation=activation,
             tok_e=tok_e)
        outs.append(out)
    torch.cuda.synchronize()
    ref = reference.indexed_gemm(a, chord_kernels.unpack(small), *args, block_m=case.block_m, top_k=case.top_k,
                                 topk_weights=tw)
    if activation:
        ref = reference.silu_and_mul(ref)
    assert not outs[0].isnan().any()
    assert _rel_err(outs[0], ref) <= 5e-3
    assert torch.equal(outs[0], outs[1]), "the one-fma form changed the result"
    assert torch.equal(outs[0], outs[2]), "repeated runs differ"


@pytest.mark.parametrize("mode", ["masked", "contiguous"])
def test_grouped_modes_same_bits(mode: str) -> None:
    gen = torch.Generator(device="cuda").manual_seed(7 if mode == "masked" else 8)
    e, n, k = 8, 1024, 2048
    packed, scales = _weights(e, n, k, gen)
    small = chord_kernels.pack(mode, packed, scales, profile="h200_ep8")
    plain = dataclasses.replace(small, small_scales=False)
    assert small.small_scales
    outs = []
    if mode == "masked":
        max_m = 64
        masked_m = torch.tensor([0, 1, 17, 33, 64, 5, 40, 24], dtype=torch.int32, device="cuda")
        a = torch.randn(e, max_m, k, generator=gen, device="cuda").to(torch.bfloat16)
        for w in (small, plain):
            outs.append(grouped.masked(a, w, masked_m, expected_m=24, activation="silu"))
        valid = torch.arange(max_m, device="cuda")[None, :] < masked_m[:, None]
        outs = [o[valid] for o in outs]
    else:
        m_indices = torch.repeat_interleave(torch.tensor([0, -1, 3, 5, 7], device="cuda"),
                                            torch.tensor([128, 128, 256, 128, 128], device="cuda")).int()
        a = torch.randn(m_indices.numel(), k, generator=gen, device="cuda").to(torch.bfloat16)
        for w in (small, plain):
            outs.append(grouped.contiguous(a, w, m_indices)[m_indices >= 0])
    torch.cuda.synchronize()
    assert not outs[0].isnan().any()
    assert torch.equal(outs[0], outs[1]), "the one-fma form changed the result"


@pytest.mark.parametrize("tokens", [1, 96, 2048])
def test_layer_same_bits(tokens: int) -> None:
    """fused_moe (gate_up with SiLU-and-mul, down with the top-k sum) on weights with and without
    the form, under an expert map."""
    gen = torch.Generator(device="cuda").manual_seed(tokens)
    e, global_e, h, inter, top_k = 16, 64, 1024, 512, 8
    w13 = chord_kernels.pack("indexed", *_weights(e, 2 * inter, h, gen), profile="h200_ep8")
    w2 = chord_kernels.pack("indexed", *_weights(e, h, inter, gen), profile="h200_ep8")
    assert w13.small_scales and w2.small_scales
    hidden = torch.randn(tokens, h, generator=gen, device="cuda").to(torch.bfloat16)
    ids = torch.rand(tokens, global_e, generator=gen, device="cuda").argsort(dim=1)[:, :top_k].int()
    tw = torch.rand(tokens, top_k, generator=gen, device="cuda")
    expert_map = torch.full((global_e,), -1, dtype=torch.int32, device="cuda")
    expert_map[:e] = torch.arange(e, dtype=torch.int32, device="cuda")
    outs = [fused_moe(hidden, a, b, tw, ids, global_num_experts=global_e, expert_map=expert_map)
            for a, b in ((w13, w2), tuple(dataclasses.replace(w, small_scales=False) for w in (w13, w2)))]
    torch.cuda.synchronize()
    assert torch.equal(outs[0], outs[1]), "the one-fma form changed the layer"


def test_larger_scales_keep_the_two_instruction_form() -> None:
    """Scales up to 0.15 (beyond 2^-5): not small, planned without the form, still exact."""
    gen = torch.Generator(device="cuda").manual_seed(5)
    case = Case("large_scales", 16, 1024, 2048, 512, 1, block_m=32, weighted=True)
    packed, scales = random_quantized(case.experts, case.n, case.k, generator=gen, device="cuda", scale=0.1)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    assert not pw.small_scales
    ids, global_e, _ = _routing(case, gen)
    r = align_block_size(ids, case.block_m, global_e)
    args = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    assert not plan(pw, block_m=32, capacity=routing_capacity(args[0], args[1], 32)).config.subnormal
    a = torch.randn(case.rows, case.k, generator=gen, device="cuda").to(torch.bfloat16) * 0.1
    out = gemm(a, pw, *args, block_m=32, top_k=1)
    ref = reference.indexed_gemm(a, (packed, scales), *args, block_m=32, top_k=1)
    assert torch.isfinite(out).all() and _rel_err(out, ref) <= 5e-3
