"""The indexed WGMMA kernel against the reference on an H200: fresh random data, poisoned outputs,
ragged routing, every configuration axis (token tile, tiles per warpgroup, stage K, stages,
consumer warpgroups) and the edges of the packed layout."""

from __future__ import annotations

import dataclasses
import zlib

import pytest
import torch
from test_indexed_gpu import Case, _rel_err, _routing, _shuffled_blocks, _weights

import chord_kernels
from chord_kernels import reference
from chord_kernels.errors import ChordInputError
from chord_kernels.indexed import gemm, new_workspace, plan, routing_capacity
from chord_kernels.indexed.wgmma import (
    PREFILL_ROW_WIDTHS,
    RUN_FOUR_CONSUMER_TILES,
    RUN_TILES,
    WgmmaConfig,
    choose_wgmma_config,
    wide16_config,
)
from chord_kernels.routing import align_block_size

pytestmark = pytest.mark.gpu
REL_TOL = 5e-3


@dataclasses.dataclass(frozen=True)
class WCase:
    case: Case
    config: WgmmaConfig | None = None  # None: choose_wgmma_config


WCASES = [
    WCase(Case("ep8_gate_up_bm24", 48, 4096, 7168, 768, 1, block_m=24)),
    # 24-token blocks at up to 120 rows per expert (planned at 9-16): gate_up in items of up to two
    # blocks on four warpgroups (an expert past 24 rows is one item), the down one block per item.
    WCase(Case("ep8_gate_up_bm24_pairs", 48, 4096, 7168, 768, 1, block_m=24),
          choose_wgmma_config(4096, 7168, 24, 16.0)),
    WCase(Case("tp8_gate_up_bm24_pairs", 384, 512, 7168, 6144, 8, block_m=24),
          choose_wgmma_config(512, 7168, 24, 16.0)),
    WCase(Case("ep8_down_bm24_one_block_weighted", 48, 7168, 2048, 768, 1, block_m=24, weighted=True),
          choose_wgmma_config(7168, 2048, 24, 16.0)),
    WCase(Case("tp8_down_bm24_one_block_weighted", 384, 7168, 256, 512, 8, block_m=24, weighted=True),
          choose_wgmma_config(7168, 256, 24, 10.7)),
    WCase(Case("ep8_down_bm48_weighted", 48, 7168, 2048, 2064, 1, block_m=48, weighted=True)),
    WCase(Case("ep8_gate_up_bm128", 48, 4096, 7168, 6144, 1, block_m=128)),
    WCase(Case("tp8_gate_up_bm176", 384, 512, 7168, 2048, 8, block_m=176)),
    WCase(Case("tp8_down_bm128_weighted", 384, 7168, 256, 8192, 1, block_m=128, weighted=True)),
    # The planned 96-token items (151-176 rows per expert) at ~85 rows: every compiled count (80, 88,
    # 96), gate_up dynamic, down in runs of N tiles.
    WCase(Case("tp8_gate_up_bm96", 384, 512, 7168, 4096, 8, block_m=96)),
    WCase(Case("tp8_down_bm96_runs_weighted", 384, 7168, 256, 4096, 8, block_m=96, weighted=True)),
    WCase(Case("ep8_gate_up_bm104_tok90", 48, 4096, 7168, 48 * 90, 1, block_m=104)),
    WCase(Case("ep8_down_bm104_mapped_weighted", 48, 7168, 2048, 48 * 90, 1, block_m=104, routing="mapped",
               weighted=True)),
    WCase(Case("tp8_down_bm104_runs_hot", 384, 7168, 256, 4096, 8, block_m=104, routing="hot", weighted=True)),
    # The wide prefill items (24-token blocks, up to seven per item, 128-wide stages).
    WCase(Case("ep8_gate_up_wide_tok128", 48, 4096, 7168, 6144, 1, block_m=24)),
    WCase(Case("tp8_gate_up_wide_tok85", 384, 512, 7168, 4096, 8, block_m=24)),
    WCase(Case("wide_hot_expert_weighted", 4, 200, 512, 500, 1, block_m=24, routing="hot", weighted=True)),
    WCase(Case("tp8_down_wide_tok128_weighted", 384, 7168, 256, 6144, 8, block_m=24, weighted=True)),
    # The wide items on 16-token blocks (up to ten per item, K loops at 8, 9, 10 blocks): the Kimi EP8
    # GEMMs at 128 and 150 rows per expert (runs past ten blocks split, their rest at width 8); a hot
    # expert, and experts of 1-4 blocks under an expert map (run at width 8), with a partial last N
    # tile and an odd K; TP8's down (K = 256: two 128-K stages).
    WCase(Case("ep8_gate_up_wide16_tok128", 48, 4096, 7168, 6144, 1, block_m=16), wide16_config(4096, 7168)),
    WCase(Case("ep8_down_wide16_tok150_weighted", 48, 7168, 2048, 48 * 150, 1, block_m=16, weighted=True),
          wide16_config(7168, 2048)),
    WCase(Case("wide16_hot_expert_edges", 16, 200, 1056, 600, 2, block_m=16, routing="hot", weighted=True),
          wide16_config(200, 1056)),
    WCase(Case("wide16_mapped_edges", 16, 200, 1056, 1200, 2, block_m=16, routing="mapped"),
          wide16_config(200, 1056)),
    WCase(Case("tp8_down_wide16_weighted", 384, 7168, 256, 6144, 8, block_m=16, weighted=True),
          wide16_config(7168, 256)),
    # Odd K groups (3: the tail group, half a 64-K tile), N not a multiple of 64 / 16 / 8.
    WCase(Case("odd_bm8", 5, 40, 96, 7, 3, block_m=8)),
    WCase(Case("odd_bm24_weighted", 5, 72, 160, 11, 2, block_m=24, weighted=True)),
    WCase(Case("n_not_multiple_of_8", 5, 44, 96, 30, 3, block_m=16, weighted=True)),
    # Partial last N block (N16 = 17: one atom row) and a one-group last K tile (K / 32 = 33).
    WCase(Case("edges_bk256", 6, 264, 1056, 40, 2, block_m=32, weighted=True), WgmmaConfig(32, 2, 256, 3)),
    WCase(Case("edges_bk128", 6, 264, 1056, 40, 2, block_m=32, weighted=True), WgmmaConfig(32, 1, 128, 4)),
    WCase(Case("edges_one_consumer", 6, 264, 1056, 40, 2, block_m=40), WgmmaConfig(40, 2, 256, 3, consumers=1)),
    # Four consumer warpgroups of two tiles (512-channel N tiles, planned for gate_up's 24-48-token
    # one-block items): the planned EP8 and TP8 gate_up; a partial last N tile whose last two
    # warpgroups hold no channels, with a one-group last K tile; an expert map, a hot expert, empty
    # experts under the dynamic schedule, M = 1.
    WCase(Case("four_ep8_gate_up_bm40_tok24", 48, 4096, 7168, 48 * 24, 1, block_m=40)),
    WCase(Case("four_tp8_gate_up_bm32", 384, 512, 7168, 1024, 8, block_m=32)),
    WCase(Case("four_edges_weighted", 6, 264, 4128, 40, 2, block_m=32, weighted=True),
          WgmmaConfig(32, 2, 256, 2, consumers=4, consumer_regs=104)),
    WCase(Case("four_expert_map_weighted", 16, 704, 4096, 200, 4, block_m=24, routing="mapped", weighted=True),
          WgmmaConfig(24, 2, 256, 2, consumers=4, consumer_regs=104)),
    WCase(Case("four_hot_expert", 4, 1024, 4096, 300, 1, block_m=40, routing="hot"),
          WgmmaConfig(40, 2, 256, 2, consumers=4, consumer_regs=104)),
    WCase(Case("four_empty_experts_dynamic", 8, 520, 4096, 90, 2, block_m=24, routing="sparse"),
          WgmmaConfig(24, 2, 256, 2, consumers=4, consumer_regs=104, dynamic=True)),
    WCase(Case("four_m1", 6, 512, 4096, 1, 2, block_m=32), WgmmaConfig(32, 2, 256, 2, consumers=4, consumer_regs=104)),
    # Items of up to two 24-token blocks on four warpgroups: a hot expert (runs of two blocks and a
    # rest), a partial last N tile with a one-group last K tile under an expert map, M = 1.
    WCase(Case("four_pairs_hot_expert", 4, 1024, 4096, 300, 1, block_m=24, routing="hot"),
          WgmmaConfig(24, 2, 256, 2, consumers=4, items=2, consumer_regs=104, dynamic=True)),
    WCase(Case("four_pairs_edges_mapped_weighted", 16, 264, 4128, 200, 4, block_m=24, routing="mapped", weighted=True),
          WgmmaConfig(24, 2, 256, 2, consumers=4, items=2, consumer_regs=104)),
    WCase(Case("four_pairs_m1", 6, 512, 4096, 1, 2, block_m=24),
          WgmmaConfig(24, 2, 256, 2, consumers=4, items=2, consumer_regs=104)),
    # 48-token items: the epilogue in 16-token passes (planned: EP8 at 32 rows per expert; edges).
    WCase(Case("four_ep8_gate_up_bm48_tok32", 48, 4096, 7168, 48 * 32, 1, block_m=48)),
    # Three consumer warpgroups of two tiles (384-channel N tiles, planned for the down's 24- and
    # 32-token one-block items): the planned EP8 down (19 N tiles, the last two thirds full), at 32
    # tokens under an expert map; one N tile whose third warpgroup holds a partial block and one past
    # N, a hot expert; empty experts with a short last K stage (dynamic); M = 1.
    WCase(Case("three_ep8_down_bm24_weighted", 48, 7168, 2048, 48 * 12, 1, block_m=24, weighted=True),
          choose_wgmma_config(7168, 2048, 24, 12.0)),
    WCase(Case("three_ep8_down_bm32_mapped_weighted", 48, 7168, 2048, 48 * 20, 1, block_m=32, routing="mapped",
               weighted=True), choose_wgmma_config(7168, 2048, 32, 20.0)),
    WCase(Case("three_edges_hot_weighted", 6, 264, 1056, 300, 2, block_m=24, routing="hot", weighted=True),
          WgmmaConfig(24, 2, 256, 3, consumers=3, consumer_regs=128)),
    WCase(Case("three_empty_experts_dynamic", 8, 1000, 2080, 90, 2, block_m=32, routing="sparse"),
          WgmmaConfig(32, 2, 256, 2, consumers=3, consumer_regs=128, dynamic=True, row_widths=(24,))),
    WCase(Case("three_m1", 6, 512, 2048, 1, 2, block_m=24),
          WgmmaConfig(24, 2, 256, 3, consumers=3, consumer_regs=128, whole_stages=True)),
    WCase(Case("four_bm48_edges_hot_weighted", 6, 264, 4128, 300, 2, block_m=48, routing="hot", weighted=True),
          WgmmaConfig(48, 2, 256, 2, consumers=4, consumer_regs=104)),
    WCase(Case("m1", 6, 16, 32, 1, 2, block_m=8)),
    WCase(Case("one_hot_expert_bm64", 4, 200, 512, 300, 1, block_m=64, routing="hot")),
    WCase(Case("empty_experts_bm56", 8, 136, 448, 90, 2, block_m=56, routing="sparse")),
    WCase(Case("expert_map_bm96", 16, 192, 640, 200, 4, block_m=96, routing="mapped", weighted=True)),
    WCase(Case("bm256", 4, 128, 256, 600, 1, block_m=256), WgmmaConfig(256, 1, 128, 2)),
    WCase(Case("bm128_mt2", 6, 512, 1024, 700, 1, block_m=128), WgmmaConfig(128, 2, 128, 3)),
    WCase(Case("bm200_stages2", 6, 320, 768, 900, 1, block_m=200, weighted=True), WgmmaConfig(200, 1, 128, 2)),
    # Items of several routing blocks: runs of 1 .. > items blocks, each width's instantiation.
    WCase(Case("items4_ep8_gate_up", 48, 4096, 7168, 6144, 1, block_m=32), WgmmaConfig(32, 2, 256, 2, items=4)),
    WCase(Case("items8_tp8_down_weighted", 384, 7168, 256, 8192, 1, block_m=16, weighted=True),
          WgmmaConfig(16, 2, 256, 2, items=8)),
    WCase(Case("items3_edges_weighted", 6, 264, 1056, 40, 2, block_m=8, weighted=True),
          WgmmaConfig(8, 2, 256, 3, items=3)),
    WCase(Case("items4_hot_expert", 4, 200, 512, 300, 1, block_m=16, routing="hot"), WgmmaConfig(16, 2, 256, 2, items=4)),
    WCase(Case("items4_empty_experts", 8, 136, 448, 90, 2, block_m=16, routing="sparse"),
          WgmmaConfig(16, 2, 256, 3, items=4)),
    WCase(Case("items4_expert_map", 16, 192, 640, 200, 4, block_m=16, routing="mapped", weighted=True),
          WgmmaConfig(16, 2, 256, 3, items=4)),
    WCase(Case("items2_bm128_mt1", 6, 320, 768, 900, 1, block_m=128), WgmmaConfig(128, 1, 128, 2, items=2)),
    # 160- and 176-token items (two tiles per warpgroup, 128-wide stages).
    WCase(Case("items2_bm80_tile160_weighted", 6, 264, 1056, 700, 2, block_m=80, weighted=True),
          WgmmaConfig(80, 2, 128, 3, items=2)),
    WCase(Case("items2_bm88_tile176_hot", 4, 200, 512, 500, 1, block_m=88, routing="hot"),
          WgmmaConfig(88, 2, 128, 3, items=2)),
    WCase(Case("items5_bm32_tile160_mapped", 16, 192, 640, 600, 4, block_m=32, routing="mapped", weighted=True),
          WgmmaConfig(32, 2, 128, 3, items=5)),
    # The weights in their own ring of 256-K tiles under 128-K stages: wide items, an odd stage
    # count with a one-group last tile (K / 32 = 33) and a partial last N block, one tile per
    # warpgroup, K = 256 (one weight tile per item).
    WCase(Case("ring_wide_tok128", 48, 4096, 7168, 6144, 1, block_m=24),
          WgmmaConfig(24, 2, 128, 3, items=7, weight_ring=True)),
    WCase(Case("ring_edges_weighted", 6, 264, 1056, 300, 2, block_m=32, weighted=True),
          WgmmaConfig(32, 2, 128, 3, items=5, weight_ring=True)),
    WCase(Case("ring_hot_expert_one_tile", 4, 200, 512, 500, 1, block_m=24, routing="hot"),
          WgmmaConfig(24, 1, 128, 3, items=7, weight_ring=True)),
    WCase(Case("ring_tp8_down_weighted", 384, 7168, 256, 8192, 1, block_m=24, weighted=True),
          WgmmaConfig(24, 2, 128, 3, items=7, weight_ring=True)),
    # 64-row items with a short last K tile (K / 32 = 33 groups).
    WCase(Case("items2_short_k_tile_weighted", 6, 264, 1056, 300, 2, block_m=64, weighted=True),
          WgmmaConfig(64, 2, 256, 2, items=2)),
    # The dynamic schedule (items from a global counter, reset by the last CTA): one-stage items
    # (K = 256), an expert map, M = 1 (more CTAs than items: most never take one), the wide ring.
    WCase(Case("dynamic_tp8_down_weighted", 384, 7168, 256, 8192, 1, block_m=64, weighted=True),
          WgmmaConfig(64, 2, 256, 2, items=2, dynamic=True)),
    WCase(Case("dynamic_items4_expert_map", 16, 192, 640, 200, 4, block_m=16, routing="mapped", weighted=True),
          WgmmaConfig(16, 2, 256, 3, items=4, dynamic=True)),
    WCase(Case("dynamic_m1", 6, 16, 32, 1, 2, block_m=8), WgmmaConfig(8, 1, 256, 4, dynamic=True)),
    WCase(Case("dynamic_ring_hot_expert", 4, 200, 512, 500, 1, block_m=24, routing="hot"),
          WgmmaConfig(24, 2, 128, 3, items=7, weight_ring=True, dynamic=True)),
    # Items compiled at some widths only (the down GEMMs' wide items: 1, 3, 5 and 6 blocks): runs of
    # 2 and 4 blocks run at the next width, runs past six blocks split; the Kimi EP8 down at 150 rows
    # per expert (most experts two items), a hot expert, one tile per warpgroup with an odd K.
    WCase(Case("widths_ep8_down_tok150", 48, 7168, 2048, 48 * 150, 1, block_m=24, weighted=True)),
    WCase(Case("widths_hot_expert_mapped", 16, 192, 640, 600, 2, block_m=24, routing="hot"),
          WgmmaConfig(24, 2, 128, 3, items=6, weight_ring=True, widths=(1, 3, 5, 6))),
    WCase(Case("widths_one_tile_edges", 6, 72, 1056, 300, 2, block_m=24, routing="mapped", weighted=True),
          WgmmaConfig(24, 1, 128, 3, items=6, weight_ring=True, widths=(2, 6))),
    # The seven-block items at widths 6 and 7 with 224 consumer registers (gate_up's: K > 2048):
    # the Kimi EP8 gate_up at 150 rows per expert (runs past seven blocks split, their rest at
    # width 6), a hot expert under an expert map, one tile per warpgroup with an odd K.
    WCase(Case("widths67_ep8_gate_up_tok150", 48, 4096, 7168, 48 * 150, 1, block_m=24)),
    WCase(Case("widths67_hot_expert_mapped", 16, 192, 640, 600, 2, block_m=24, routing="hot"),
          WgmmaConfig(24, 2, 128, 3, items=7, weight_ring=True, widths=(6, 7), consumer_regs=224)),
    WCase(Case("widths67_one_tile_edges", 6, 72, 1056, 300, 2, block_m=24, routing="mapped", weighted=True),
          WgmmaConfig(24, 1, 128, 3, items=7, weight_ring=True, widths=(6, 7), consumer_regs=224)),
    # Row widths (an item at the narrowest compiled token count holding its last real row): the
    # planned 80-token blocks (64 and 72) at 60 rows per expert and 64 x 2 items (96 and 112) at 85;
    # a hot expert under an expert map; every count from 8 tokens in one- and two-block items with
    # an odd K and a partial last N block.
    WCase(Case("rows_ep8_gate_up_bm80_tok60", 48, 4096, 7168, 48 * 60, 1, block_m=80)),
    WCase(Case("rows_ep8_down_bm64_tok85_weighted", 48, 7168, 2048, 48 * 85, 1, block_m=64, weighted=True)),
    WCase(Case("rows_hot_expert_mapped", 16, 192, 640, 600, 2, block_m=72, routing="hot"),
          WgmmaConfig(72, 2, 256, 2, row_widths=(56, 64))),
    WCase(Case("rows_every_count_edges", 6, 264, 1056, 300, 2, block_m=40, routing="mapped", weighted=True),
          WgmmaConfig(40, 2, 256, 2, row_widths=(8, 16, 24, 32))),
    # The one-block items of 32-56 tokens with row widths and per-K-group commits (planned since
    # session 37): TP8's gate_up at 1024 tokens (24 of 32), EP8's down at 43 rows per expert (40 and
    # 48 of 56), a hot expert under an expert map with an odd K (a short last stage) at 48.
    WCase(Case("rows_tp8_gate_up_bm32_tok21", 384, 512, 7168, 1024, 8, block_m=32)),
    WCase(Case("rows_ep8_down_bm56_tok43_weighted", 48, 7168, 2048, 48 * 43, 1, block_m=56, weighted=True)),
    WCase(Case("rows_bm48_hot_mapped_edges", 16, 264, 1056, 600, 2, block_m=48, routing="hot", weighted=True),
          WgmmaConfig(48, 2, 256, 3, dynamic=True, row_widths=(32, 40))),
    WCase(Case("rows_items2_every_count", 6, 264, 1056, 700, 2, block_m=64, weighted=True),
          WgmmaConfig(64, 2, 256, 2, items=2, row_widths=(8, 40, 72, 96, 120))),
    # Runs of N tiles over a resident activation tile, the consumers in turns (K <= 256: one stage
    # per item): the planned TP8 down on 64 x 2 items; runs not dividing the N tiles with a partial
    # last tile, a short K and an expert map; a hot expert under the dynamic schedule; M = 1 with
    # one tile per warpgroup; row widths without the turns.
    WCase(Case("runs_tp8_down_bm64_weighted", 384, 7168, 256, 384 * 100, 1, block_m=64, weighted=True)),
    WCase(Case("runs_edges_mapped_weighted", 16, 1800, 224, 300, 4, block_m=40, routing="mapped", weighted=True),
          WgmmaConfig(40, 2, 256, 3, n_run=3, pingpong=True)),
    WCase(Case("runs_dynamic_hot_expert", 4, 1800, 96, 500, 1, block_m=24, routing="hot"),
          WgmmaConfig(24, 2, 256, 3, items=2, n_run=5, pingpong=True, dynamic=True)),
    WCase(Case("runs_m1", 6, 264, 32, 1, 2, block_m=8), WgmmaConfig(8, 1, 256, 3, n_run=2, pingpong=True)),
    WCase(Case("runs_row_widths_no_turns", 48, 7168, 256, 48 * 60, 1, block_m=80),
          WgmmaConfig(80, 2, 256, 3, n_run=4, row_widths=(64, 72))),
    # Runs with row widths at 40-56 tokens, the consumers in turns (planned since session 38): TP8's
    # down at 1536 tokens (40 of 48, 208 consumer registers); a hot expert under an expert map with
    # runs not dividing the N tiles, a partial last tile and a short K at 40 (32 of 40).
    WCase(Case("runs_rows_tp8_down_bm48_tok32_weighted", 384, 7168, 256, 1536, 8, block_m=48, weighted=True)),
    WCase(Case("runs_rows_bm40_hot_mapped_edges", 16, 1800, 224, 600, 2, block_m=40, routing="hot", weighted=True),
          WgmmaConfig(40, 2, 256, 3, n_run=3, pingpong=True, row_widths=(32,))),
]


@pytest.mark.parametrize("wcase", WCASES, ids=[w.case.name for w in WCASES])
def test_wgmma_gemm_matches_reference(wcase: WCase) -> None:
    case = wcase.case
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(case.name.encode()))
    packed, scales = _weights(case.experts, case.n, case.k, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_tp8" if case.name.startswith("tp8") else "h200_ep8")
    ids, global_e, expert_map = _routing(case, gen)
    r = align_block_size(ids, case.block_m, global_e, expert_map)
    a = torch.randn(case.rows, case.k, generator=gen, device="cuda").to(torch.bfloat16)
    tw = torch.rand(case.rows, case.top_k, generator=gen, device="cuda") if case.weighted else None
    config = wcase.config or choose_wgmma_config(case.n, case.k, case.block_m)
    args = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    outs = []
    for _ in range(2):
        out = torch.full((case.rows * case.top_k, case.n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemm(a, pw, *args, block_m=case.block_m, top_k=case.top_k, topk_weights=tw, out=out, config=config)
        outs.append(out)
    torch.cuda.synchronize()
    ref = reference.indexed_gemm(a, (packed, scales), *args, block_m=case.block_m, top_k=case.top_k,
                                 topk_weights=tw)
    nan_rows = outs[0].isnan().any(dim=1).nonzero().flatten().tolist()
    assert not nan_rows, f"{len(nan_rows)} output rows never written, e.g. {nan_rows[:8]}"
    err = _rel_err(outs[0], ref)
    assert err <= REL_TOL, f"relative error {err:.3e} with {config}"
    assert torch.equal(outs[0], outs[1]), "repeated runs differ"
    zero_rows = (ref == 0).all(dim=1)
    if case.routing == "mapped":
        assert zero_rows.any()
        assert (outs[0][zero_rows] == 0).all(), "rows of non-local experts must be zero"


@pytest.mark.parametrize("config", [WgmmaConfig(80, 2, 256, 2, dynamic=True, row_widths=(8, 24, 40, 64, 72)),
                                    WgmmaConfig(64, 2, 256, 2, items=2, row_widths=(8, 48, 96, 112)),
                                    WgmmaConfig(56, 2, 256, 3, dynamic=True, row_widths=(16, 24, 32, 40, 48)),
                                    WgmmaConfig(32, 2, 256, 3, row_widths=(16, 24)),
                                    WgmmaConfig(56, 2, 256, 4, n_run=7, pingpong=True, row_widths=(40, 48),
                                                consumer_regs=208)],
                         ids=["bm80", "bm64_items2", "bm56_per_group", "bm32_per_group", "bm56_runs"])
def test_row_widths_bit_identical_to_full_width(config: WgmmaConfig) -> None:
    """An item computed at a narrower token count than its blocks gives the very bits of the
    full-width item (a wgmma's columns are independent): Poisson rows of 1 .. 2 blocks per expert,
    top-k weights, poisoned outputs; runs of N tiles at K = 256 (one stage per item)."""
    gen = torch.Generator(device="cuda").manual_seed(23 + config.items)
    e, n, k, top_k = 48, 1024, 256 if config.n_run else 2048, 1
    rows = e * config.tile * 2 // 3
    packed, scales = _weights(e, n, k, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    ids = torch.randint(0, e, (rows, top_k), generator=gen, device="cuda")
    r = align_block_size(ids, config.block_m, e)
    a = torch.randn(rows, k, generator=gen, device="cuda").to(torch.bfloat16)
    tw = torch.rand(rows, top_k, generator=gen, device="cuda")
    outs = []
    for cfg in (config, dataclasses.replace(config, row_widths=())):
        out = torch.full((rows * top_k, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemm(a, pw, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=config.block_m, top_k=top_k,
             topk_weights=tw, out=out, config=cfg)
        outs.append(out)
    torch.cuda.synchronize()
    assert not outs[0].isnan().any()
    assert torch.equal(outs[0], outs[1]), "row widths changed the result"


@pytest.mark.parametrize(("dynamic", "runs", "tail_parts", "cta_pair"),
                         [(False, False, 0, False), (True, False, 0, False), (False, True, 0, False),
                          (True, False, 8, False), (True, False, 0, True)],
                         ids=["strided", "dynamic", "runs", "split_tail", "cta_pair"])
def test_wgmma_cuda_graph_capture_and_replay(dynamic: bool, runs: bool, tail_parts: int, cta_pair: bool) -> None:
    """Capture, then two replays on fresh inputs (the dynamic schedule's counters are reset by each
    launch, so every replay takes every item; runs: K = 256, the planned runs of N tiles; split tail:
    its 32-40 items, fewer than half the SMs, each cut into 3 or 4 parts whose arrival counters each
    launch resets; CTA pairs: the first CTA of each pair requests the units, the last pair to finish
    resets the counters)."""
    gen = torch.Generator(device="cuda").manual_seed(11)
    e, n, k, rows, top_k, block_m = 16, 512, 256 if runs else 1024, 300, 2, 48
    packed, scales = _weights(e, n, k, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    ids = torch.rand(rows, e, generator=gen, device="cuda").argsort(dim=1)[:, :top_k]
    r = align_block_size(ids, block_m, e)
    a = torch.randn(rows, k, generator=gen, device="cuda").to(torch.bfloat16)
    out = torch.empty(rows * top_k, n, dtype=torch.bfloat16, device="cuda")
    config = dataclasses.replace(choose_wgmma_config(n, k, block_m), dynamic=dynamic, tail_parts=tail_parts,
                                 cta_pair=cta_pair)
    assert bool(config.n_run) == runs
    ws = new_workspace(plan(pw, block_m=block_m, capacity=r.expert_ids.numel(), config=config).workspace_bytes)
    run = lambda: gemm(a, pw, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded,  # noqa: E731
                       block_m=block_m, top_k=top_k, out=out, config=config, workspace=ws)
    run()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    for _ in range(2):
        a.copy_(torch.randn(rows, k, generator=gen, device="cuda").to(torch.bfloat16))  # fresh inputs, same buffers
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = reference.indexed_gemm(a, (packed, scales), r.sorted_token_ids, r.expert_ids,
                                     r.num_tokens_post_padded, block_m=block_m, top_k=top_k)
        assert not out.isnan().any()
        assert _rel_err(out, ref) <= REL_TOL


@pytest.mark.parametrize("runs", [0, 3], ids=["items", "runs"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["strided", "dynamic"])
@pytest.mark.parametrize("walk", [False, True], ids=["listed", "walked"])
def test_items_over_shuffled_blocks(walk: bool, dynamic: bool, runs: int) -> None:
    """Routing blocks in a random order (an expert's blocks in several runs, as the contract
    allows) with items listed in shared memory, and with more routing blocks than the list holds
    (the kernel walks the blocks and cuts runs at multiples of the item size); items of one N tile
    and runs of N tiles."""
    gen = torch.Generator(device="cuda").manual_seed(17 + walk)
    e, n, k, top_k, block_m = 64, 136 + 256 * runs, 256, 3, 16
    # Runs' weight-only stages leave room for a longer list: three of them, and more blocks to walk.
    rows = (45000 if runs else 8192) if walk else 600
    config = WgmmaConfig(block_m, 2, 256, 3 if runs else 2, items=8, dynamic=dynamic, n_run=runs, pingpong=runs > 0)
    packed, scales = _weights(e, n, k, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    ids = torch.rand(rows, e, generator=gen, device="cuda").argsort(dim=1)[:, :top_k]
    r = align_block_size(ids, block_m, e)
    sorted_ids, expert_ids, used = _shuffled_blocks(r, block_m, gen)
    capacity = routing_capacity(sorted_ids, expert_ids, block_m)
    launch = plan(pw, block_m=block_m, capacity=capacity, config=config)
    assert (launch.list_cap < used) == walk, (launch.list_cap, used)
    a = torch.randn(rows, k, generator=gen, device="cuda").to(torch.bfloat16)
    out = torch.full((rows * top_k, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(a, pw, sorted_ids, expert_ids, r.num_tokens_post_padded, block_m=block_m, top_k=top_k, out=out,
         config=config)
    ref = reference.indexed_gemm(a, (packed, scales), sorted_ids, expert_ids, r.num_tokens_post_padded,
                                 block_m=block_m, top_k=top_k)
    assert not out.isnan().any()
    assert _rel_err(out, ref) <= REL_TOL


@pytest.mark.parametrize(("block_m", "tok_e"), [(56, 42.7), (64, 170.0)], ids=["bm56", "bm64_items2"])
def test_runs_bit_identical_to_items(block_m: int, tok_e: float) -> None:
    """Runs of N tiles over a resident activation tile, the consumers in turns, give the very bits
    of items of one N tile: the same K loop and epilogue per tile (TP8's down, planned configuration
    against the same one without runs; slot-order rows and routing-order rows)."""
    gen = torch.Generator(device="cuda").manual_seed(29 + block_m)
    e, n, k, top_k = 384, 7168, 256, 8
    tokens = int(tok_e * e / top_k)
    packed, scales = _weights(e, n, k, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_tp8")
    ids = torch.rand(tokens, e, generator=gen, device="cuda").argsort(dim=1)[:, :top_k]
    r = align_block_size(ids, block_m, e)
    a = torch.randn(tokens * top_k, k, generator=gen, device="cuda").to(torch.bfloat16)
    tw = torch.rand(tokens * top_k, generator=gen, device="cuda")
    runs = choose_wgmma_config(n, k, block_m, tok_e)
    assert runs.n_run and runs.pingpong == (runs.consumers == 2)
    items = dataclasses.replace(runs, n_run=0, pingpong=False, stages=2)
    outs = []
    for cfg in (runs, items):
        out = torch.full((tokens * top_k, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemm(a, pw, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=block_m, top_k=1,
             topk_weights=tw, out=out, config=cfg)
        outs.append(out)
    torch.cuda.synchronize()
    assert not outs[0].isnan().any()
    assert torch.equal(outs[0], outs[1]), "runs changed the result"


@pytest.mark.parametrize(("block_m", "tok_e"),
                         [(32, 21.3), (40, 26.7), (56, 42.7), (96, 85.0), (104, 100.0), (64, 100.0)],
                         ids=["bm32", "bm40", "bm56", "bm96", "bm104", "bm64x2"])
def test_four_consumer_runs_bit_identical_to_two(block_m: int, tok_e: float) -> None:
    """TP8's down in runs of N tiles on four consumer warpgroups of one tile each (planned at
    40-104-token blocks since session 47, on the 64 x 2 items since session 48, at 32 since session
    71) gives the very bits of two warpgroups of two tiles in turns (the plan before at 40-104): the
    same K loop and epilogue per 64-channel tile. Rows by slot and in routing order (tensor copies),
    top-k weights, poisoned outputs, Poisson rows of one or two blocks per expert; the slot-order
    result also against the reference. The plan's evict-normal weights and streaming output stores
    (``stream_out``, session 69) change no bit either, nor does the order: the plan's runs of four N tiles from the
    global counter (session 73) against strided runs of seven (the plan before)."""
    gen = torch.Generator(device="cuda").manual_seed(31 + block_m)
    e, n, k, top_k = 384, 7168, 256, 8
    tokens = int(tok_e * e / top_k)
    slots = tokens * top_k
    packed, scales = _weights(e, n, k, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_tp8")
    ids = torch.rand(tokens, e, generator=gen, device="cuda").argsort(dim=1)[:, :top_k]
    r = align_block_size(ids, block_m, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    a = torch.randn(slots, k, generator=gen, device="cuda").to(torch.bfloat16)
    tw = torch.rand(slots, generator=gen, device="cuda")
    entries = r.sorted_token_ids[:routing_capacity(r.sorted_token_ids, r.expert_ids, block_m) * block_m].long()
    ordered = a[entries.clamp(max=slots - 1)]  # padding entries: any row, never stored
    four = choose_wgmma_config(n, k, block_m, tok_e)
    assert (four.consumers, four.mt, four.block_n, four.pingpong) == (4, 1, 256, False) and four.n_run
    assert four.stream_out and four.dynamic and four.n_run == RUN_FOUR_CONSUMER_TILES
    two = dataclasses.replace(four, consumers=2, mt=2, pingpong=True, consumer_regs=208, stages=2)
    strided = dataclasses.replace(four, dynamic=False, n_run=RUN_TILES)
    outs = {}
    for name, cfg in (("four", four), ("two", two), ("four_cached", dataclasses.replace(four, stream_out=False)),
                      ("strided", strided)):
        for in_order in (False, True):
            out = torch.full((slots, n), float("nan"), dtype=torch.bfloat16, device="cuda")
            gemm(ordered if in_order else a, pw, *route, block_m=block_m, top_k=1, topk_weights=tw, out=out,
                 config=cfg, routing_order=in_order)
            outs[name, in_order] = out
    torch.cuda.synchronize()
    assert not outs["four", False].isnan().any()
    for key, out in outs.items():
        assert torch.equal(out, outs["four", False]), f"{key} differs from four warpgroups by slot"
    ref = reference.indexed_gemm(a, (packed, scales), *route, block_m=block_m, top_k=1, topk_weights=tw)
    assert _rel_err(outs["four", False], ref) <= REL_TOL


def _mapped_outputs(n: int, k: int, block_m: int, tok_e: float, silu: bool, configs: list[WgmmaConfig],
                    seed: int, routing: str = "mapped") -> tuple[list[torch.Tensor], torch.Tensor]:
    """Each configuration's output (poisoned before) and the reference of one GEMM on 48 experts under an
    expert map keeping a quarter of the global ones, about ``tok_e`` rows on each, with top-k weights (down)
    or SiLU-and-mul fused (gate_up); or, with ``routing`` "hot" / "sparse" (``test_indexed_gpu._routing``), 48 x
    ``tok_e`` rows on one or two of the 48 experts."""
    rows = int(4 * 48 * tok_e) if routing == "mapped" else int(48 * tok_e)
    case = Case(routing, 48, n, k, rows, 1, block_m=block_m, routing=routing, weighted=not silu)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    packed, scales = _weights(case.experts, n, k, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    ids, global_e, expert_map = _routing(case, gen)
    r = align_block_size(ids, block_m, global_e, expert_map)
    a = torch.randn(case.rows, k, generator=gen, device="cuda").to(torch.bfloat16)
    tw = torch.rand(case.rows, 1, generator=gen, device="cuda") if case.weighted else None
    outs = []
    for cfg in configs:
        out = torch.full((case.rows, n // 2 if silu else n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemm(a, pw, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=block_m, top_k=1,
             topk_weights=tw, out=out, config=cfg, activation="silu" if silu else None)
        outs.append(out)
    torch.cuda.synchronize()
    ref = reference.indexed_gemm(a, (packed, scales), r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded,
                                 block_m=block_m, top_k=1, topk_weights=tw)
    return outs, reference.silu_and_mul(ref) if silu else ref


@pytest.mark.parametrize(("n", "k", "block_m", "silu"), [(7168, 2048, 56, False), (4096, 7168, 56, True),
                                                      (7168, 2048, 24, False)],
                         ids=["ep8_down_bm56", "ep8_gate_up_bm56_silu", "ep8_down_bm24"])
def test_whole_stages_bit_identical(n: int, k: int, block_m: int, silu: bool) -> None:
    """The planned K loop without its K bound (whole 256-K stages) gives the bits of the checked loop:
    EP8 at 43 rows per expert under an expert map, poisoned outputs."""
    config = choose_wgmma_config(n, k, block_m, 43.0)
    assert config.whole_stages
    outs, ref = _mapped_outputs(n, k, block_m, 43.0, silu, [config, dataclasses.replace(config, whole_stages=False)],
                                seed=41 + block_m + silu)
    assert not outs[0].isnan().any()
    assert _rel_err(outs[0], ref) <= REL_TOL
    assert torch.equal(outs[0], outs[1]), "whole stages changed the result"


@pytest.mark.parametrize(("n", "k", "block_m", "tok_e", "silu"),
                         [(4096, 7168, 80, 64.0, True), (7168, 2048, 80, 64.0, False), (512, 7168, 96, 85.0, True),
                          (512, 7168, 104, 90.0, True), (4096, 7168, 104, 90.0, False), (7168, 2048, 96, 85.0, False),
                          (4096, 7168, 64, 150.0, True), (7168, 2048, 64, 150.0, False)],
                         ids=["ep8_gate_up_bm80_silu", "ep8_down_bm80", "tp8_gate_up_bm96_silu",
                              "tp8_gate_up_bm104_silu", "ep8_gate_up_bm104", "down_bm96", "ep8_gate_up_64x2_silu",
                              "ep8_down_64x2"])
def test_wide_items_commit_per_k_group_bit_identical(n: int, k: int, block_m: int, tok_e: float, silu: bool) -> None:
    """The 80-104-token one-block items and the 64 x 2 items (without row widths) with whole stages commit
    per K group (planned since session 61 for the 64 x 2 gate_up and the downs to 96 tokens, since session 63
    for the 96- and 104-token gate_up with the pairs shifted) and give the bits of their per-step loop (pairs
    shifted, row widths), the pairs in place or shifted, part-filled blocks included, poisoned outputs."""
    planned = choose_wgmma_config(n, k, block_m, tok_e)
    per_step = dataclasses.replace(planned, whole_stages=False, shift_pairs=planned.items == 1,
                                   row_widths=planned.row_widths or PREFILL_ROW_WIDTHS)
    per_group = dataclasses.replace(planned, whole_stages=True, shift_pairs=False,
                                    row_widths=planned.row_widths if planned.items == 1 else ())
    configs = [per_step, per_group] + [dataclasses.replace(per_group, shift_pairs=True)] * (planned.items == 1)
    assert per_step.commit_per_step and not any(c.commit_per_step for c in configs[1:]) and planned in configs
    outs, ref = _mapped_outputs(n, k, block_m, tok_e, silu, configs, seed=61 + block_m + silu)
    for out in outs[1:]:
        assert not out.isnan().any()
        assert _rel_err(out, ref) <= REL_TOL
        assert torch.equal(outs[0], out), "per-K-group commits changed the result"


@pytest.mark.parametrize(("n", "k", "block_m", "tok_e", "silu"),
                         [(512, 7168, 96, 170.7, True), (512, 7168, 64, 256.0, False), (4096, 7168, 80, 64.0, True),
                          (4096, 7168, 72, 56.0, True), (512, 7168, 72, 53.3, False), (512, 4160, 104, 85.3, True)],
                         ids=["tp8_bm96_silu", "tp8_64x2", "ep8_bm80_silu", "ep8_bm72_silu", "tp8_bm72",
                              "tp8_bm104_short_last_stage"])
def test_prefetched_rows_bit_identical(n: int, k: int, block_m: int, tok_e: float, silu: bool) -> None:
    """The gate_up items on two stages that ask L2 for the next stage's rows (``prefetch_rows``, planned since
    session 67, from 72 tokens since session 68) give the bits of the same items without, and the reference's
    values: a hint that moves no data. K = 4160: a short last stage, the prefetch bounded by K."""
    config = choose_wgmma_config(n, k, block_m, tok_e)
    assert config.prefetch_rows
    outs, ref = _mapped_outputs(n, k, block_m, tok_e, silu, [config, dataclasses.replace(config, prefetch_rows=False)],
                                seed=67 + block_m + silu)
    assert not outs[0].isnan().any()
    assert _rel_err(outs[0], ref) <= REL_TOL
    assert torch.equal(outs[0], outs[1]), "prefetching the rows changed the result"


def test_whole_stages_refuse_a_short_last_stage() -> None:
    gen = torch.Generator(device="cuda").manual_seed(43)
    packed, scales = _weights(4, 256, 2080, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    r = align_block_size(torch.zeros(8, 1, dtype=torch.int64, device="cuda"), 56, 4)
    a = torch.randn(8, 2080, generator=gen, device="cuda").to(torch.bfloat16)
    with pytest.raises(ChordInputError, match="whole K stages"):
        gemm(a, pw, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=56, top_k=1,
             config=WgmmaConfig(56, 2, 256, 3, whole_stages=True))


def test_runs_refuse_k_beyond_one_stage() -> None:
    gen = torch.Generator(device="cuda").manual_seed(31)
    packed, scales = _weights(4, 256, 512, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    ids = torch.randint(0, 4, (40, 1), generator=gen, device="cuda")
    r = align_block_size(ids, 16, 4)
    a = torch.randn(40, 512, generator=gen, device="cuda").to(torch.bfloat16)
    with pytest.raises(ChordInputError, match="K <= 256"):
        gemm(a, pw, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=16, top_k=1,
             config=WgmmaConfig(16, 2, 256, 2, n_run=2, pingpong=True))
