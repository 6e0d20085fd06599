"""Problems, the output check and the built-in implementations of the harness, on small CPU shapes."""

from __future__ import annotations

import pytest
import torch
from _problems import CPU, SIDS, problems_for, small

from chord_bench.impls import (
    Bf16CeilingImpl,
    ChordGroupedImpl,
    ChordIndexedImpl,
    ReferenceImpl,
    builtin_implementations,
)
from chord_bench.problems import check_output
from chord_kernels import ChordInputError


@pytest.mark.parametrize("sid", SIDS)
@pytest.mark.parametrize("draw", ["uniform", "skewed"])
def test_ceiling_matches_reference(sid, draw):
    for problem in problems_for(sid, draw, seed=2):
        for impl in (Bf16CeilingImpl(), Bf16CeilingImpl(use_grouped_mm=False)):
            (cand,) = list(impl.candidates(problem))
            cand.run()
            assert check_output(cand.result(), problem) is None


@pytest.mark.parametrize("sid", SIDS)
def test_reference_impl_is_exactly_the_reference(sid):
    for problem in problems_for(sid, seed=3):
        (cand,) = list(ReferenceImpl().candidates(problem))
        assert not cand.graphable
        cand.run()
        assert torch.equal(cand.result(), problem.reference())


@pytest.mark.parametrize("sid", SIDS)
def test_sorted_rows_cover_every_valid_row_once(sid):
    for problem in problems_for(sid, "skewed", seed=4):
        rows = problem.sorted_rows()
        valid = problem.valid_rows()
        assert rows.out_rows.numel() == int(valid.sum()) == sum(rows.counts) == problem.cost.rows_out
        assert torch.equal(torch.sort(rows.out_rows).values, torch.nonzero(valid).squeeze(1))
        assert rows.counts == problem.draw.counts.tolist()


def test_down_problem_carries_topk_weights_and_reads_one_row_per_slot():
    up, down = problems_for("tp8_1024")
    assert up.addr_top_k == 8 and down.addr_top_k == 1
    assert up.a.shape == (40, 128) and down.a.shape == (320, 32)
    assert up.topk_weights is None and down.topk_weights.shape == (40, 8)
    assert up.reference().shape == (320, 64) and down.reference().shape == (320, 128)


def test_check_output_rejects_wrong_results():
    problem = problems_for("ep8_tok16", seed=5)[0]
    good = problem.reference().clone()
    assert check_output(good, problem) is None
    # bf16-level noise passes.
    noisy = (good.float() * (1 + 2**-8 * torch.randn(good.shape))).to(torch.bfloat16)
    assert check_output(noisy, problem) is None
    bad = good.clone()
    bad[3] = -bad[3]  # one wrong row
    assert "mismatch" in check_output(bad, problem)
    swapped = good.clone()
    swapped[:, :8] = good[:, 8:16]  # one wrong column tile
    assert "mismatch" in check_output(swapped, problem)
    nan = good.clone()
    nan[0, 0] = float("nan")
    assert "NaN" in check_output(nan, problem)
    assert "elements" in check_output(good[:-1], problem)


def test_wrong_scale_is_caught():
    problem = problems_for("tp8_1024", seed=6)[1]
    assert "mismatch" in check_output((problem.reference().float() * 1.1).to(torch.bfloat16), problem)


def test_masked_rows_past_masked_m_are_ignored():
    problem = problems_for("ep8_masked8", seed=1)[0]
    assert problem.a.shape == (6, 48, 128)  # the scenario's expert_max_tokens, not the largest count
    out = problem.reference().clone()
    out[~problem.valid_rows()] = 1e4  # undefined rows may hold anything
    assert check_output(out, problem) is None


@pytest.mark.parametrize("sid", SIDS)
@pytest.mark.parametrize("block_m", [8, 16, 64])
def test_aligned_routing_through_the_indexed_reference_gives_the_problem_reference(sid, block_m):
    """The routing Chord's indexed kernel (and humming's indexed path) gets: on grouped problems
    it lists the real rows of the grouped buffer only, yet computes exactly the grouped result."""
    from chord_kernels import reference

    for problem in problems_for(sid, "skewed", seed=7):
        r = problem.aligned(block_m)
        assert r.num_slots == problem.output_rows() and r.block_m == block_m
        real = r.sorted_token_ids[r.sorted_token_ids < r.num_slots]
        assert real.numel() == int(problem.valid_rows().sum())  # padding rows are never listed
        out = reference.indexed_gemm(
            problem.a_flat(), problem.weight.dequantized(), r.sorted_token_ids, r.expert_ids,
            r.num_tokens_post_padded, block_m=block_m, top_k=problem.addr_top_k, topk_weights=problem.topk_weights)
        assert check_output(out, problem) is None


def test_weight_cache_redraws_only_for_other_shapes():
    from chord_bench.problems import WeightCache, scenario_problems

    cache = WeightCache(seed=0, device=CPU)
    a, b = small("ep8_tok16"), small("ep8_masked8")  # same shapes: same weights
    _, (up_a, _) = scenario_problems(a, "uniform", 0, cache)
    _, (up_b, _) = scenario_problems(b, "uniform", 0, cache)
    assert up_a.weight is up_b.weight and cache.generation == 1
    _, (up_c, _) = scenario_problems(small("tp8_1024"), "uniform", 0, cache)
    assert cache.generation == 2 and up_c.weight.num_experts == 16
    again = WeightCache(seed=0, device=CPU).get(a)[0]
    assert torch.equal(again.packed, up_a.weight.packed)  # the same draw in every process


def test_chord_indexed_runs_every_family():
    impl = ChordIndexedImpl()
    assert impl.unavailable() is None and impl.role == "chord"
    for sid in SIDS:
        assert impl.unsupported(problems_for(sid)[0]) is None


def test_chord_grouped_runs_grouped_and_expert_parallel_scenarios():
    impl = ChordGroupedImpl()
    for sid in SIDS:  # TP indexed routing is not grouped by vLLM either
        reason = impl.unsupported(problems_for(sid)[0])
        assert (reason is None) == (sid != "tp8_1024"), (sid, reason)


def test_chord_grouped_takes_a_configuration_in_the_contiguous_mode_only():
    from chord_kernels.indexed import WgmmaConfig

    impl = ChordGroupedImpl()
    for sid in ("ep8_masked16", "ep8_tok16"):  # the masked mode, and EP rows it would route itself
        with pytest.raises(ChordInputError, match="contiguous mode only"):
            impl.candidate(problems_for(sid)[0], WgmmaConfig(64, 2, 256, 3))


def test_describe_config_lists_dataclass_fields():
    from chord_bench.impls import describe_config
    from chord_kernels.indexed import DecodeConfig

    text = describe_config(DecodeConfig(block_m=16, stages=5, schedule="balanced"))
    assert text.startswith("decode block_m=16 ") and "stages=5" in text and "schedule=balanced" in text
    assert describe_config("plain") == "plain"


def test_builtin_implementations_by_name():
    assert [i.name for i in builtin_implementations(["bf16-ceiling", "reference"])] == ["bf16-ceiling", "reference"]
    with pytest.raises(ChordInputError, match="unknown implementation"):
        builtin_implementations(["cutlass"])
