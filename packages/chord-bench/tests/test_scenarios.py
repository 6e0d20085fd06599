"""Scenario registry, routing draws, bytes/FLOPs and floors of the benchmark harness (CPU)."""

from __future__ import annotations

import pytest
import torch

from chord_bench import scenarios as S
from chord_kernels import ChordInputError

# The indexed scenarios (docs/benchmarking.md) and their floors at the nominal H200 ceilings.
INDEXED = {
    "ep8_decode": (48, 160, 1, 3.3, 270),
    "ep8_tok16": (48, 768, 1, 16, 286),
    "ep8_tok43": (48, 2064, 1, 43, 298),
    "ep8_tok128": (48, 6144, 1, 128, 685),
    "ep8_tok341": (48, 16368, 1, 341, 1825),
    "tp8_decode160": (384, 160, 8, 3.3, 274),
    "tp8_1024": (384, 1024, 8, 21, 312),
    "tp8_8192": (384, 8192, 8, 171, 930),
}


def test_registry_has_every_indexed_scenario_with_its_shapes():
    indexed = [s for s in S.SCENARIOS.values() if s.family == "indexed"]
    assert [s.id for s in indexed] == list(INDEXED)
    for s in indexed:
        experts, rows, top_k, tok_e, _ = INDEXED[s.id]
        assert (s.num_experts, s.tokens, s.top_k) == (experts, rows, top_k)
        assert s.tok_e == pytest.approx(tok_e, rel=0.02)
        if s.id.startswith("ep8"):
            assert (s.gate_up.n, s.gate_up.k, s.down.n, s.down.k) == (4096, 7168, 7168, 2048)
        else:
            assert (s.gate_up.n, s.gate_up.k, s.down.n, s.down.k) == (512, 7168, 7168, 256)


def test_registry_has_every_grouped_scenario():
    contig = [s for s in S.SCENARIOS.values() if s.family == "contiguous"]
    masked = [s for s in S.SCENARIOS.values() if s.family == "masked"]
    assert {(s.num_experts, s.rows_per_expert) for s in contig} == {
        (e, r) for e in (48, 24, 12) for r in (128, 256, 512)
    }
    for s in contig:
        assert s.tokens == s.num_experts * s.rows_per_expert and s.tok_e == s.rows_per_expert
        assert s.id == f"ep{384 // s.num_experts}_contig{s.rows_per_expert}" and s.parallel == "ep"
    # ep8_masked{8,16,32,64}: 48 experts, 48 x m rows uniform over experts, 256-row buffers.
    assert [s.id for s in masked] == ["ep8_masked8", "ep8_masked16", "ep8_masked32", "ep8_masked64"]
    for s, m in zip(masked, (8, 16, 32, 64), strict=True):
        assert (s.num_experts, s.tokens, s.top_k, s.expert_max_tokens) == (48, 48 * m, 1, 256)
        assert (s.gate_up.n, s.gate_up.k, s.down.n, s.down.k) == (4096, 7168, 7168, 2048)
    assert len(S.SCENARIOS) == 8 + 4 + 9
    assert {s.parallel for s in S.SCENARIOS.values() if s.series == "tp8"} == {"tp"}
    assert {s.profile for s in S.SCENARIOS.values() if s.parallel == "ep"} == {S.EP_PROFILE}


def test_masked_floors_match_the_peer_of_record_table():
    for sid, floor in (("ep8_masked8", 282), ("ep8_masked16", 285), ("ep8_masked32", 293), ("ep8_masked64", 343)):
        assert S.expected_floor_us(S.SCENARIOS[sid]) == pytest.approx(floor, rel=0.01), sid


@pytest.mark.parametrize("sid", list(INDEXED))
def test_expected_floor_matches_benchmarks_md(sid):
    floor = S.expected_floor_us(S.SCENARIOS[sid])
    assert floor == pytest.approx(INDEXED[sid][4], rel=0.01)


@pytest.mark.parametrize("sid", list(INDEXED))
def test_drawn_floor_is_close_to_benchmarks_md(sid):
    s = S.SCENARIOS[sid]
    draw = S.draw_routing(s, "uniform", seed=0)
    floor = S.layer_floor_us(S.gemm_costs(s, draw.counts))
    assert floor == pytest.approx(INDEXED[sid][4], rel=0.03)


def test_byte_and_flop_counts_by_hand():
    s = S.SCENARIOS["ep8_tok16"]
    counts = [16] * 48
    up, down = S.gemm_costs(s, counts)
    assert up.weight_bytes == 0.5625 * 4096 * 7168 * 48
    assert up.act_bytes == 768 * 7168 * 2 and up.out_bytes == 768 * 4096 * 2
    assert down.act_bytes == 768 * 2048 * 2 and down.out_bytes == 768 * 7168 * 2
    assert up.flops == 2 * 768 * 4096 * 7168 and down.flops == 2 * 768 * 7168 * 2048
    # Experts without rows cost no weight bytes.
    up2, _ = S.gemm_costs(s, [32] * 24 + [0] * 24)
    assert up2.experts_used == 24 and up2.weight_bytes == up.weight_bytes / 2


def test_tp_gate_up_reads_each_token_once():
    s = S.SCENARIOS["tp8_1024"]
    up, down = S.gemm_costs(s, S.draw_routing(s).counts)
    assert up.rows_in == 1024 and up.rows_out == 8192
    assert down.rows_in == 8192 and down.rows_out == 8192


def test_floor_is_the_max_of_memory_and_compute():
    c = S.Ceilings(4.0, 800.0, "test")
    s = S.SCENARIOS["ep8_tok341"]
    up, down = S.gemm_costs(s, S.draw_routing(s).counts)
    for g in (up, down):
        assert g.floor_us(c) == max(g.bytes / 4.0e12, g.flops / 800e12) * 1e6
    assert up.bound() == "compute"
    decode = S.SCENARIOS["ep8_decode"]
    assert all(g.bound() == "memory" for g in S.gemm_costs(decode, S.draw_routing(decode).counts))
    # Halving the bandwidth doubles a memory-bound floor exactly.
    g = S.gemm_costs(decode, S.draw_routing(decode).counts)[0]
    assert g.floor_us(S.Ceilings(2.135, 790.0, "half")) == pytest.approx(2 * g.floor_us())


def test_gemm_costs_checks_the_expert_count():
    with pytest.raises(ChordInputError, match="expected 48 experts"):
        S.gemm_costs(S.SCENARIOS["ep8_decode"], [1, 2, 3])


@pytest.mark.parametrize("sid", ["ep8_decode", "ep8_tok43", "tp8_decode160", "tp8_1024",
                                 "ep16_contig256", "ep8_masked32"])
def test_uniform_draw_shape_counts_and_determinism(sid):
    s = S.SCENARIOS[sid]
    d = S.draw_routing(s, "uniform", seed=3)
    assert d.topk_ids.shape == (s.tokens, s.top_k) and d.topk_ids.dtype == torch.int32
    assert int(d.counts.sum()) == s.num_slots
    assert 0 <= int(d.topk_ids.min()) and int(d.topk_ids.max()) < s.num_experts
    assert torch.equal(d.topk_ids, S.draw_routing(s, "uniform", seed=3).topk_ids)
    assert not torch.equal(d.topk_ids, S.draw_routing(s, "uniform", seed=4).topk_ids)
    assert (d.topk_weights > 0).all()
    if s.top_k > 1:
        # top-k experts of a token are distinct and the weights of a token sum to one.
        assert (d.topk_ids.sort(dim=1).values.diff(dim=1) > 0).all()
        assert torch.allclose(d.topk_weights.sum(1), torch.ones(s.tokens))
    if s.family == "contiguous":
        assert (d.counts == s.rows_per_expert).all()


@pytest.mark.parametrize("sid", ["ep8_decode", "ep8_tok128", "tp8_1024", "tp8_8192", "ep8_masked16"])
def test_skewed_draw_gives_one_expert_eight_times_the_average(sid):
    s = S.SCENARIOS[sid]
    d = S.draw_routing(s, "skewed", seed=1)
    assert d.hot_expert is not None
    hot = int(d.counts[d.hot_expert])
    assert hot == round(8 * s.num_slots / s.num_experts)
    others = torch.cat([d.counts[: d.hot_expert], d.counts[d.hot_expert + 1:]])
    assert int(others.max()) < hot
    assert int(d.counts.sum()) == s.num_slots


def test_skewed_masked_draw_fits_the_buffer():
    s = S.SCENARIOS["ep8_masked64"]  # 8 x 64 rows would overflow the 256-row buffer
    d = S.draw_routing(s, "skewed", seed=2)
    assert int(d.counts[d.hot_expert]) == s.expert_max_tokens == int(d.counts.max())
    assert int(d.counts.sum()) == s.num_slots


def test_draws_differ_per_scenario_and_kind():
    s = S.SCENARIOS["ep8_tok16"]
    assert S.draw_seed(0, s.id, "uniform") != S.draw_seed(0, s.id, "skewed")
    assert S.draw_seed(0, "ep8_tok16", "uniform") != S.draw_seed(0, "ep8_tok43", "uniform")
    with pytest.raises(ChordInputError, match="draw"):
        S.draw_routing(s, "zipf")


def test_select_ids_globs_series_and_families():
    assert [s.id for s in S.select(["ep8_decode"])] == ["ep8_decode"]
    assert [s.id for s in S.select(["tp8"])] == ["tp8_decode160", "tp8_1024", "tp8_8192"]
    assert len(S.select(["ep8_tok*"])) == 4 and len(S.select(["ep8_*"])) == 5 + 4 + 3
    assert len(S.select(["indexed"])) == 8 and len(S.select(["grouped"])) == 13
    assert [s.id for s in S.select(["indexed", "masked"])][-4:] == [f"ep8_masked{m}" for m in (8, 16, 32, 64)]
    assert len(S.select(["contiguous"])) == 9
    assert [s.id for s in S.select(["ep8_masked"])] == [f"ep8_masked{m}" for m in (8, 16, 32, 64)]
    assert [s.id for s in S.select(["tp8_8192,ep8_decode"])] == ["ep8_decode", "tp8_8192"]
    assert len(S.select(None)) == len(S.SCENARIOS)
    with pytest.raises(ChordInputError, match="matches nothing"):
        S.select(["ep9_decode"])


def test_describe_mentions_floor():
    line = S.describe(S.SCENARIOS["tp8_8192"])
    assert "tp8_8192" in line and "floor~" in line


def _floor_by_hand(sid: str, experts_hit: int) -> float:
    """A scenario's floor at the nominal ceilings from its name alone (Kimi K2: H 7168, I 2048;
    TP8 splits I; int4 + a bf16 scale per 32 weights; bf16 rows in and out, one per slot)."""
    h, i = 7168, 2048
    if sid.startswith("tp8_"):
        tokens, top_k, i = int(sid.removeprefix("tp8_").removeprefix("decode")), 8, i // 8
    elif "_contig" in sid:
        tokens, top_k = 384 // int(sid[2:sid.index("_")]) * int(sid.split("contig")[1]), 1
    elif "_masked" in sid:
        tokens, top_k = 48 * int(sid.split("masked")[1]), 1
    else:
        tokens, top_k = {"ep8_decode": 160, "ep8_tok16": 768, "ep8_tok43": 2064, "ep8_tok128": 6144,
                         "ep8_tok341": 16368}[sid], 1
    slots, total = tokens * top_k, 0.0
    for n, k, rows_in in ((2 * i, h, tokens), (h, i, slots)):
        moved = (0.5 + 2 / 32) * n * k * experts_hit + 2 * rows_in * k + 2 * slots * n
        total += max(moved / 4.27e12, 2 * slots * n * k / 790e12) * 1e6
    return total


@pytest.mark.parametrize("draw", S.DRAWS)
@pytest.mark.parametrize("sid", list(S.SCENARIOS))
def test_every_floor_by_hand(sid, draw):
    s = S.SCENARIOS[sid]
    routing = S.draw_routing(s, draw)
    hit = int(routing.topk_ids.unique().numel())  # the experts this draw reached, not an expectation
    assert S.layer_floor_us(S.gemm_costs(s, routing.counts)) == pytest.approx(_floor_by_hand(sid, hit), rel=1e-12)


def test_drawn_floors_where_experts_stay_idle_match_benchmarking_md():
    # docs/benchmarking.md, "Scenarios": a run counts the experts its draw reached (seed 0)
    for sid, draw, experts, floor in (("ep8_decode", "uniform", 47, 274.2), ("ep8_decode", "skewed", 44, 256.8),
                                      ("tp8_decode160", "uniform", 375, 277.2),
                                      ("tp8_decode160", "skewed", 366, 270.7), ("ep8_masked8", "uniform", 48, 282.2)):
        s = S.SCENARIOS[sid]
        routing = S.draw_routing(s, draw, seed=0)
        assert routing.experts_used == experts
        assert S.layer_floor_us(S.gemm_costs(s, routing.counts)) == pytest.approx(floor, abs=0.05)
