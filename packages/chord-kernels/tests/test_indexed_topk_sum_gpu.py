"""``gemm_topk_sum`` on an H200: the down GEMM with the weighted top-k sum, by its default two
steps (the GEMM skipping non-local rows, then ``ops.local_topk_sum``) and by the opt-in WGMMA
epilogue sum (a token's one local row goes straight to its output row; otherwise the last tile of a
token's channels to finish sums its rows in ascending choice order), both bit-identical to the
plain GEMM's rows summed in the contract's order (also from rows in routing order), and against the
reference; poisoned outputs, expert_map (tokens without a local expert), hot and empty experts,
M = 0 and 1, repeated runs, graph replay, typed errors."""

from __future__ import annotations

import dataclasses
import zlib

import pytest
import torch
from test_indexed_gpu import Case, _rel_err, _routing, _weights

import chord_kernels
from chord_kernels import reference
from chord_kernels.errors import ChordInputError
from chord_kernels.indexed import gemm, gemm_topk_sum, plan, routing_capacity
from chord_kernels.indexed.wgmma import WgmmaConfig, choose_wgmma_config
from chord_kernels.ops import topk_sum
from chord_kernels.routing import align_block_size

pytestmark = pytest.mark.gpu
REL_TOL = 5e-3


@dataclasses.dataclass(frozen=True)
class TCase:
    case: Case  # n, k: the down GEMM's; rows: tokens; top_k: choices per token
    fused: bool  # whether the planned kernel has an epilogue-sum twin (the WGMMA kernel, N % 8 = 0)
    config: WgmmaConfig | None = None  # None: the planner's
    routing_order: bool = False  # also from rows in routing order (both paths, tensor copies)


TCASES = [
    # Kimi down: EP8 (48 of 192 global experts, so many tokens have no or one local choice) on
    # seven-block wide items (24-token blocks, weight ring), and on the planned six-block ones at 125
    # rows per expert (whose accumulators leave no registers for the sum: two steps); TP8 top-8 on
    # 48-token blocks; 64 x 2.
    TCase(Case("ep8_down_wide_mapped", 48, 7168, 2048, 1536, 8, block_m=24, routing="mapped"), True,
          WgmmaConfig(24, 2, 128, 3, items=7, weight_ring=True, dynamic=True)),
    TCase(Case("ep8_down_wide_planned", 48, 7168, 2048, 3000, 8, block_m=24, routing="mapped"), False),
    # From 134 rows per expert gemm_topk_sum plans the down's seven-block items (widths 6 and 7,
    # 224 consumer registers): 150 rows, experts past 168 rows in two items.
    TCase(Case("ep8_down_wide_tok150_planned", 48, 7168, 2048, 48 * 150, 1, block_m=24), False),
    # TP8's down at 48-token blocks: runs of N tiles on four consumer warpgroups since session 47,
    # whose registers leave the sum none (two steps; the two-warpgroup runs' twin: runs_mapped_bm40).
    TCase(Case("tp8_down_bm48", 384, 7168, 256, 2048, 8, block_m=48), False),
    # The down's 24- and 32-token one-block items on three consumer warpgroups (EP8 at 12 and 20 rows
    # per expert), in routing order too.
    TCase(Case("ep8_down_bm24_three_mapped", 48, 7168, 2048, 48 * 12 // 8 * 4, 8, block_m=24, routing="mapped"), True,
          choose_wgmma_config(7168, 2048, 24, 12.0), routing_order=True),
    TCase(Case("ep8_down_bm32_three", 48, 7168, 2048, 48 * 20 // 8, 8, block_m=32), True,
          choose_wgmma_config(7168, 2048, 32, 20.0)),
    # EP8's down at 16-token blocks: the decode kernel's wide tiles with row widths (blocks of 1-16 rows).
    TCase(Case("ep8_down_bm16_row_widths", 48, 7168, 2048, 300, 8, block_m=16, routing="mapped"), False),
    # Runs of N tiles over a resident activation tile (K <= 256; their epilogue-sum twin takes items
    # of one N tile): TP8's down on 64 x 2 items on two warpgroups in turns (planned on four of one
    # tile, without a twin, since session 48), and runs of three over two N tiles (N = 264) under an
    # expert map, both in routing order too (the resident tile by tensor copies).
    TCase(Case("tp8_down_runs_bm64", 384, 7168, 256, 4096, 8, block_m=64), True,
          WgmmaConfig(64, 2, 256, 3, items=2, n_run=7, pingpong=True), routing_order=True),
    TCase(Case("tp8_down_runs_bm64_planned", 384, 7168, 256, 4096, 8, block_m=64), False),
    TCase(Case("runs_mapped_bm40", 16, 264, 256, 300, 4, block_m=40, routing="mapped"), True,
          WgmmaConfig(40, 2, 256, 3, n_run=3, pingpong=True), routing_order=True),
    TCase(Case("down_bm64_items2", 16, 1024, 512, 3000, 2, block_m=64), True, routing_order=True),
    # The 80-token blocks keep their row widths (64 and 72 tokens) next to the sum.
    TCase(Case("ep8_down_bm80_row_widths", 48, 7168, 2048, 48 * 60, 1, block_m=80), True),
    # N = 264: three 128-channel units, so the last N tile's second warpgroup has no channels (it
    # used to count an arrival on the next token's first unit: sums never written, session 18).
    TCase(Case("odd_unit_count_bm80", 4, 264, 512, 300, 2, block_m=80), True, routing_order=True),
    # N = 200: the second 128-channel unit of a row is partial; expert_map; middle blocks (from
    # K = 2048: below, 32-token blocks run on the decode kernel).
    TCase(Case("odd_units_mapped_bm32", 16, 200, 2080, 300, 4, block_m=32, routing="mapped"), True,
          routing_order=True),
    # Every choice of every token on one expert (a token's rows in one item), empty experts + short K tile.
    TCase(Case("hot_expert_wide", 4, 256, 512, 400, 2, block_m=24, routing="hot"), True,
          WgmmaConfig(24, 2, 128, 3, items=7, weight_ring=True)),
    TCase(Case("empty_experts_short_k_tile", 8, 256, 1056, 90, 3, block_m=56, routing="sparse"), True),
    TCase(Case("one_consumer_m1", 6, 256, 256, 1, 2, block_m=40), True, WgmmaConfig(40, 2, 256, 3, consumers=1)),
    # 16-token blocks on the WGMMA kernel (planned from K = 2048 where N is below 4096; EP8's down
    # plans the decode kernel, above).
    TCase(Case("wgmma_bm16_mapped", 48, 7168, 2048, 160, 8, block_m=16, routing="mapped"), True,
          choose_wgmma_config(7168, 2048, 16)),
    # N not a multiple of 8 (zeroed rows + topk_sum), and the decode kernel's blocks.
    TCase(Case("n_not_multiple_of_8", 6, 204, 2048, 40, 2, block_m=32), False),
    TCase(Case("decode_bm8_mapped", 48, 7168, 2048, 160, 8, block_m=8, routing="mapped"), False),
    TCase(Case("decode_bm16_tp8_down", 48, 7168, 256, 160, 8, block_m=16, routing="mapped"), False),
    # TP8's 32-token down: the WGMMA kernel's runs on four consumer warpgroups (no epilogue-sum twin).
    TCase(Case("runs4_bm32_tp8_down", 48, 7168, 256, 1000, 8, block_m=32, routing="mapped"), False),
]


def _problem(case: Case, gen: torch.Generator):
    packed, scales = _weights(case.experts, case.n, case.k, gen)
    profile = "h200_tp8" if case.name.startswith("tp8") else "h200_ep8"
    pw = chord_kernels.pack("indexed", packed, scales, profile=profile)
    ids, global_e, expert_map = _routing(case, gen)
    r = align_block_size(ids, case.block_m, global_e, expert_map)
    act = torch.randn(case.rows * case.top_k, case.k, generator=gen, device="cuda").to(torch.bfloat16)
    tw = torch.rand(case.rows, case.top_k, generator=gen, device="cuda")
    tw.view(-1)[::11] = -0.0  # rows of -0 and +0: a token's one local row is its sum from +0, so +0
    return (packed, scales), pw, ids, expert_map, (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded), act, tw


def _sequential_sum(rows: torch.Tensor, tokens: int, top_k: int) -> torch.Tensor:
    """The contract's order: fp32 from +0, choices in ascending order, one rounding."""
    acc = torch.zeros(tokens, rows.shape[1], dtype=torch.float32, device=rows.device)
    for j, part in enumerate(rows.view(tokens, top_k, -1).unbind(1)):
        del j
        acc += part.float()
    return acc.to(torch.bfloat16)


@pytest.mark.parametrize("tcase", TCASES, ids=[t.case.name for t in TCASES])
def test_topk_sum_matches_two_steps_and_reference(tcase: TCase) -> None:
    case = tcase.case
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(case.name.encode()))
    raw, pw, ids, expert_map, args, act, tw = _problem(case, gen)
    launch = plan(pw, block_m=case.block_m, capacity=routing_capacity(args[0], args[1], case.block_m),
                  config=tcase.config)
    twin = launch.config.topk_sum_twin(case.n) if isinstance(launch.config, WgmmaConfig) else None
    assert (twin is not None) == tcase.fused
    results = {}
    for path, config in (("two_steps", tcase.config), ("epilogue", twin)):
        if path == "epilogue" and twin is None:
            continue
        outs = []
        for _ in range(2):
            out = torch.full((case.rows, case.n), float("nan"), dtype=torch.bfloat16, device="cuda")
            gemm_topk_sum(act, pw, *args, tw, ids, block_m=case.block_m, expert_map=expert_map, out=out, config=config)
            outs.append(out)
        torch.cuda.synchronize()
        nan_rows = outs[0].isnan().any(dim=1).nonzero().flatten().tolist()
        assert not nan_rows, f"{path}: {len(nan_rows)} output rows never written, e.g. {nan_rows[:8]}"
        assert torch.equal(outs[0], outs[1]), f"{path}: repeated runs differ"
        results[path] = outs[0]
    rows = gemm(act, pw, *args, block_m=case.block_m, top_k=1, topk_weights=tw, config=tcase.config)
    want = _sequential_sum(rows, case.rows, case.top_k)
    torch.cuda.synchronize()
    ref_rows = reference.indexed_gemm(act, raw, *args, block_m=case.block_m, top_k=1, topk_weights=tw)
    ref = ref_rows.view(case.rows, case.top_k, case.n).float().sum(dim=1).to(torch.bfloat16)
    for path, got in results.items():
        differ = (got != want).sum().item()
        assert differ == 0, f"{path}: {differ} of {want.numel()} outputs differ from gemm + the sequential sum"
        err = _rel_err(got, ref)
        assert err <= REL_TOL, f"{path}: relative error {err:.3e}"
    if case.routing == "mapped":
        local = (expert_map[ids] >= 0).sum(dim=1)
        assert (local == 0).any() and (local == 1).any() and (local > 1).any(), "the case must mix all three"
        assert (results["two_steps"][local == 0] == 0).all(), "tokens without a local expert must sum to zero"
    close = (topk_sum(rows.view(case.rows, case.top_k, case.n)).float() - want.float()).abs().max().item()
    assert close <= 1e-2 * want.float().abs().max().item()  # ops.topk_sum: same sum, torch's order
    if tcase.routing_order:  # the rows at their routing positions (padding NaN, never stored)
        sorted_ids, expert_ids, ntpp = args
        rows_ro = routing_capacity(sorted_ids, expert_ids, case.block_m) * case.block_m
        entries = sorted_ids[:rows_ro].long()
        local = (expert_ids >= 0).repeat_interleave(case.block_m)[: entries.numel()]
        real = (entries < case.rows * case.top_k) & local & (torch.arange(entries.numel(), device="cuda") < ntpp)
        ordered = torch.full((rows_ro, case.k), float("nan"), dtype=torch.bfloat16, device="cuda")
        ordered[real] = act[entries[real]]
        for path, config in (("two_steps", tcase.config), ("epilogue", twin)):
            got = gemm_topk_sum(ordered, pw, *args, tw, ids, block_m=case.block_m, expert_map=expert_map,
                                config=config, routing_order=True)
            assert torch.equal(got, want), f"{path} in routing order: {(got != want).sum().item()} outputs differ"


def test_topk_sum_empty_and_graph_replay_and_errors() -> None:
    gen = torch.Generator(device="cuda").manual_seed(29)
    case = Case("graph_mapped", 16, 512, 1024, 300, 4, block_m=48, routing="mapped")
    raw, pw, ids, expert_map, args, act, tw = _problem(case, gen)
    out = torch.empty(case.rows, case.n, dtype=torch.bfloat16, device="cuda")
    chord_kernels.indexed.prepare(pw, case.block_m, topk_sum=True)
    epilogue = WgmmaConfig(case.block_m, 2, 256, 3, topk_sum=True)
    run = lambda: gemm_topk_sum(act, pw, *args, tw, ids, block_m=case.block_m,  # noqa: E731
                                expert_map=expert_map, out=out, config=epilogue)
    run()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    act.copy_(torch.randn(act.shape, generator=gen, device="cuda").to(torch.bfloat16))
    out.fill_(float("nan"))
    graph.replay()
    graph.replay()  # the epilogue's arrival counters start from zero on every replay
    torch.cuda.synchronize()
    ref_rows = reference.indexed_gemm(act, raw, *args, block_m=case.block_m, top_k=1, topk_weights=tw)
    ref = ref_rows.view(case.rows, case.top_k, case.n).float().sum(dim=1).to(torch.bfloat16)
    assert not out.isnan().any() and _rel_err(out, ref) <= REL_TOL
    # M = 0: no tokens, an empty result.
    empty = align_block_size(ids[:0], case.block_m, expert_map.numel(), expert_map)
    got = gemm_topk_sum(act[:0], pw, empty.sorted_token_ids, empty.expert_ids, empty.num_tokens_post_padded,
                        tw[:0], ids[:0], block_m=case.block_m, expert_map=expert_map)
    assert got.shape == (0, case.n)
    with pytest.raises(ChordInputError, match="one row per slot"):
        gemm_topk_sum(act[:-1], pw, *args, tw, ids, block_m=case.block_m, expert_map=expert_map)
    with pytest.raises(ChordInputError, match="topk_weights"):
        gemm_topk_sum(act, pw, *args, None, ids, block_m=case.block_m, expert_map=expert_map)  # type: ignore[arg-type]
    with pytest.raises(ChordInputError, match="1 to 32 choices"):
        wide = ids.new_zeros(case.rows * case.top_k // 40, 40)
        gemm_topk_sum(act[: wide.numel()], pw, *args, tw, wide, block_m=case.block_m)
    with pytest.raises(ChordInputError, match="sums the top-k"):
        gemm(act, pw, *args, block_m=case.block_m, top_k=1, config=WgmmaConfig(case.block_m, 2, 256, 3, topk_sum=True))
