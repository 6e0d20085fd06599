"""Problems, the output check and the built-in implementations of the harness, on small CPU shapes."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from chord_bench import scenarios as S
from chord_bench.impls import (
    Bf16CeilingImpl,
    ChordIndexedImpl,
    ReferenceImpl,
    builtin_implementations,
)
from chord_bench.problems import GemmProblem, WeightSet, build_problems, check_output
from chord_kernels import ChordInputError

CPU = torch.device("cpu")


def small(sid: str) -> S.Scenario:
    """A registry scenario with its family and routing kind but tiny shapes."""
    s = S.SCENARIOS[sid]
    experts = 16 if s.top_k > 1 else 6
    rows = {"contiguous": experts * 128, "masked": experts * 5}.get(s.family, 40)
    return dataclasses.replace(
        s, num_experts=experts, gate_up=S.GemmShape("gate_up", 64, 128), down=S.GemmShape("down", 128, 32),
        tokens=rows, rows_per_expert=128 if s.family == "contiguous" else None,
    )


def problems_for(sid: str, draw: str = "uniform", seed: int = 0) -> tuple[GemmProblem, GemmProblem]:
    s = small(sid)
    weights = tuple(WeightSet.random(s.num_experts, g.n, g.k, seed=seed + 7, device=CPU) for g in s.gemms)
    return build_problems(s, S.draw_routing(s, draw, seed), weights, seed=seed + 11, device=CPU)


SIDS = ["ep8_tok16", "tp8_1024", "grouped_contig_ep8_r128", "grouped_masked_ep16_m8"]


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
    problem = problems_for("grouped_masked_ep16_m8", seed=1)[0]
    out = problem.reference().clone()
    out[~problem.valid_rows()] = 1e4  # undefined rows may hold anything
    assert check_output(out, problem) is None


def test_chord_indexed_reports_why_it_cannot_run_or_declines_grouped():
    impl = ChordIndexedImpl()
    problem = problems_for("grouped_contig_ep8_r128")[0]
    if impl.unavailable() is None:
        assert "indexed kernels only" in impl.unsupported(problem)
    else:
        assert "chord_kernels.indexed" in impl.unavailable()


def test_builtin_implementations_by_name():
    assert [i.name for i in builtin_implementations(["bf16-ceiling", "reference"])] == ["bf16-ceiling", "reference"]
    with pytest.raises(ChordInputError, match="unknown implementation"):
        builtin_implementations(["cutlass"])
