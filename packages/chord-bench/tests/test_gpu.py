"""The harness end to end on a GPU, on small shapes (skipped without CUDA)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from chord_bench import report, runner, timing
from chord_bench import scenarios as S
from chord_bench.impls import Bf16CeilingImpl, ChordGroupedImpl, ChordIndexedImpl, ReferenceImpl


@pytest.mark.gpu
def test_graph_timing_measures_a_copy():
    src = torch.randn(64 << 20, device="cuda")
    dst = torch.empty_like(src)
    t_events = timing.bench(lambda: dst.copy_(src), method="events", rep_ms=5)
    t_auto = timing.bench(lambda: dst.copy_(src), rep_ms=5)
    tbps = 2 * src.numel() * 4 / (t_events.us * 1e-6) / 1e12
    assert 0.2 < tbps < 10.0
    assert t_auto.us == pytest.approx(t_events.us, rel=0.3)


@pytest.mark.gpu
def test_interleaved_timing_orders_one_and_two_copies():
    src = torch.randn(32 << 20, device="cuda")
    dst = torch.empty_like(src)

    def twice() -> None:
        dst.copy_(src)
        dst.copy_(src)

    timers = timing.interleaved({"once": lambda: dst.copy_(src), "twice": twice}, rounds=3, reps=2)
    assert all(len(t.samples) == 6 for t in timers.values())
    assert timers["twice"].median_us() == pytest.approx(2 * timers["once"].median_us(), rel=0.25)


@pytest.mark.gpu
def test_graph_timer_keeps_captured_inputs_alive():
    """Timers are built first and replayed later (interleaved rounds): the tensors a graph reads
    must outlive the caller's references, or their memory is reused and the replays read junk."""

    def make() -> tuple[timing.GraphTimer, torch.Tensor]:
        x = torch.full((1 << 20,), 3.0, device="cuda")
        y = torch.zeros_like(x)
        return timing.GraphTimer(lambda: y.copy_(x), launches=2), y

    timer, y = make()
    y.zero_()
    junk = [torch.full((1 << 20,), -1.0, device="cuda") for _ in range(8)]  # would take x's freed block
    timer.run(reps=1)
    torch.cuda.synchronize()
    assert bool((y == 3.0).all()) and len(junk) == 8


@pytest.mark.gpu
def test_graph_timer_calls_before_replay_and_records_every_replay():
    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)
    calls = []
    timer = timing.GraphTimer(lambda: y.copy_(x), launches=4, device=x.device, capture_error_mode="thread_local")
    timer.run(3, before_replay=lambda: calls.append(len(timer.samples)))
    assert calls == [0, 1, 2] and len(timer.samples) == 3 and timer.launches == 4
    assert timer.median_us() > 0 and timer.median_mhz() is None


def _small(sid: str) -> S.Scenario:
    s = S.SCENARIOS[sid]
    experts = 32 if s.parallel == "tp" else 8
    rows = {"contiguous": experts * 128, "masked": experts * 6}.get(s.family, 64)
    return dataclasses.replace(
        s, num_experts=experts, gate_up=S.GemmShape("gate_up", 256, 512), down=S.GemmShape("down", 512, 128),
        tokens=rows, rows_per_expert=128 if s.family == "contiguous" else None,
        expert_max_tokens=32 if s.family == "masked" else None)


@pytest.mark.gpu
def test_runner_small_scenarios(tmp_path):
    small = [_small(sid) for sid in ("ep8_tok16", "tp8_1024", "ep8_masked16", "ep8_contig128")]
    result = runner.run(small, [ReferenceImpl(), Bf16CeilingImpl(), ChordIndexedImpl()], draws=("uniform", "skewed"),
                        measure_ceilings=False, rep_ms=2.0, log=lambda _: None)
    assert len(result.scenarios) == 8
    for s in result.scenarios:
        for name in ("reference", "bf16-ceiling", "chord-indexed"):
            r = s.impls[name]
            assert r.status == "ok", (s.scenario, name, r.reason)
            assert r.total_us and r.total_us > 0
        # The graphable winners were re-timed side by side; the eager reference was not.
        for name in ("bf16-ceiling", "chord-indexed"):
            for g in s.impls[name].gemms.values():
                assert g.us_sweep is not None and g.method.startswith("interleaved"), g
        assert all(g.us_sweep is None for g in s.impls["reference"].gemms.values())
        chord = s.impls["chord-indexed"].gemms["gate_up"]
        assert chord.detail["block_m"] in (8, 16, 24, 32, 48, 64)
        assert ("indexed API over the" in chord.config) == (s.family != "indexed")
    files = report.write_all(result, tmp_path)
    assert (tmp_path / "results.json").exists() and "side_by_side_uniform" in files


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [64, 8 * 135])
def test_chord_grouped_routes_expert_parallel_rows_contiguously(rows):
    """chord-grouped on an EP indexed scenario: rows routed into 128-row segments outside the
    timed call, the down GEMM's top-k weights applied after it; both GEMMs pass the harness check.
    At 135 rows per expert the contiguous mode plans its wide items from the layout's expected_m."""
    from chord_bench.problems import WeightCache, scenario_problems

    scenario = dataclasses.replace(_small("ep8_tok16"), tokens=rows)
    _, problems = scenario_problems(scenario, "uniform", 0, WeightCache(0, torch.device("cuda")))
    impl = ChordGroupedImpl()
    for problem in problems:
        cand = impl.candidate(problem)
        assert "routed contiguously" in cand.config
        assert ("weight_ring=True" in cand.config) == (rows > 64), cand.config  # the wide items
        assert cand.check(problem) is None, problem.name


@pytest.mark.gpu
@pytest.mark.parametrize("sid", ["ep8_tok16", "tp8_1024", "ep8_masked16"])
def test_the_launch_config_is_the_one_gemm_plans(sid):
    """The configuration the harness names (indexed.plan) is the one gemm launches by itself."""
    from chord_bench.problems import WeightCache, scenario_problems
    from chord_kernels import indexed

    _, problems = scenario_problems(_small(sid), "uniform", 0, WeightCache(0, torch.device("cuda")))
    impl = ChordIndexedImpl()
    for problem in problems:
        cand = impl.candidate(problem)
        cand.run()
        block_m = cand.detail["block_m"]
        r = problem.aligned(block_m)
        tw = None if problem.topk_weights is None else problem.topk_weights.reshape(-1)
        out = torch.full_like(cand.result(), float("nan"))
        indexed.gemm(problem.a_flat(), impl._pack(problem), r.sorted_token_ids, r.expert_ids,
                     r.num_tokens_post_padded, block_m=block_m, top_k=problem.addr_top_k, topk_weights=tw, out=out)
        valid = problem.valid_rows()
        assert torch.equal(out[valid], cand.result()[valid])



def _by_slot(impl: ChordIndexedImpl, problem, block_m: int) -> torch.Tensor:
    """``problem``'s GEMM by slot (rows gathered, output by slot) at ``block_m``."""
    from chord_kernels import indexed

    r = problem.aligned(block_m)
    tw = None if problem.topk_weights is None else problem.topk_weights.reshape(-1)
    return indexed.gemm(problem.a_flat(), impl._pack(problem), r.sorted_token_ids, r.expert_ids,
                        r.num_tokens_post_padded, block_m=block_m, top_k=problem.addr_top_k, topk_weights=tw)


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [8 * 45, 8 * 100])
def test_chord_indexed_runs_each_gemm_as_the_layer_does(rows):
    """Where both GEMMs run on the WGMMA kernel, chord-indexed runs gate_up with its output in
    routing order and down from rows in routing order (tensor copies), as indexed.moe_experts does:
    the harness check passes and the outputs are bit for bit the slot-order GEMMs', also replayed
    from a CUDA graph (gate_up on new activations, down into a poisoned output)."""
    from chord_bench.problems import WeightCache, scenario_problems

    scenario = dataclasses.replace(_small("ep8_tok16"), tokens=rows)
    _, problems = scenario_problems(scenario, "uniform", 0, WeightCache(0, torch.device("cuda")))
    impl = ChordIndexedImpl()
    for problem in problems:
        cand = impl.candidate(problem)
        assert "routing order" in cand.config and cand.detail["tma_rows"] == problem.is_down, cand.config
        assert cand.check(problem) is None, problem.name
        block_m = cand.detail["block_m"]
        assert torch.equal(cand.result(), _by_slot(impl, problem, block_m))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            cand.run()
        if problem.is_down:
            cand.result().fill_(float("nan"))  # the down's result is its output buffer
        else:
            problem.a.copy_(torch.randn(problem.a.shape, device="cuda").to(torch.bfloat16))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(cand.result(), _by_slot(impl, problem, block_m))
