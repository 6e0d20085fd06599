"""The whole-layer benchmark (``python -m chord_bench.layer``): selection, report files, errors;
on a GPU with humming-kernels installed, one scenario end to end."""

from __future__ import annotations

import json

import pytest
import torch

from chord_bench import layer
from chord_kernels import ChordInputError


def _result(name: str = "tp8_1024", chord: float = 500.0, humming: float = 550.0) -> layer.LayerResult:
    steps = dict(zip(layer.HUMMING_STEPS["indexed"], (250.0, 6.0, 260.0, 34.0), strict=True))
    return layer.LayerResult(name, layer.LAYER_SCENARIOS[name].tokens, chord, {"indexed": humming},
                             {"indexed": steps}, {"chord": 1e-3, "humming_indexed": 4e-3}, 32)


def test_select_keeps_the_canonical_order_and_names_what_is_known() -> None:
    assert layer.select(None) == list(layer.LAYER_SCENARIOS)
    assert layer.select(["ep8_tok128", "tp8_8192", "tp8_decode160"]) == ["tp8_decode160", "tp8_8192", "ep8_tok128"]
    with pytest.raises(ChordInputError, match="tp8_1024"):
        layer.select(["tp8_1023"])


def test_scenarios_are_one_rank_of_eight() -> None:
    tp, ep = layer.LAYER_SCENARIOS["tp8_1024"], layer.LAYER_SCENARIOS["ep8_tok128"]
    assert (tp.local_experts, tp.intermediate, tp.local_slots, tp.humming_paths) == (384, 256, 8192, ("indexed",))
    assert tp.expert_map(torch.device("cpu")) is None
    assert (ep.local_experts, ep.intermediate, ep.local_slots) == (48, 2048, 6144)  # 128 rows per expert
    assert ep.humming_paths == ("indexed", "grouped_contiguous")
    ll = layer.LAYER_SCENARIOS["ep8_masked16"]
    assert (ll.batched, ll.local_slots, ll.capacity, ll.humming_paths) == (True, 768, 256, ("grouped_masked",))
    assert layer.LAYER_SCENARIOS["ep8_masked16_cap2048"].capacity == 2048
    emap = ep.expert_map(torch.device("cpu"))
    assert emap[:48].tolist() == list(range(48)) and bool((emap[48:] == -1).all())


def _ep_routing(tokens: int = 37, experts: int = 12, local: int = 3, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    topk_ids = torch.stack([torch.randperm(experts, generator=gen)[:4] for _ in range(tokens)]).to(torch.int32)
    topk_ids[0] = torch.tensor([0, 1, 2, 3])  # a token on every local expert and one beyond
    emap = torch.full((experts,), -1, dtype=torch.int32)
    emap[:local] = torch.arange(local, dtype=torch.int32)
    return topk_ids, emap


def test_local_routing_keeps_only_local_slots_before_its_end() -> None:
    topk_ids, emap = _ep_routing()
    block_m, local = 8, emap[topk_ids.long()].reshape(-1)
    r = layer.local_routing(topk_ids, block_m, emap, 3)
    end = int(r.num_tokens_post_padded.item())
    used = r.sorted_token_ids[:end]
    real = used[used < topk_ids.numel()].long()
    assert sorted(real.tolist()) == sorted((local >= 0).nonzero().reshape(-1).tolist())  # every local slot, once
    counts = torch.bincount(local[local >= 0].long(), minlength=3)
    assert end == int(((counts + block_m - 1) // block_m * block_m).sum()) and end % block_m == 0
    blocks = r.expert_ids[: end // block_m].long()
    assert bool((local[real] == blocks.repeat_interleave(block_m)[used < topk_ids.numel()]).all())


def test_permutation_orders_local_slots_by_expert_without_padding() -> None:
    topk_ids, emap = _ep_routing(seed=1)
    src, offsets, positions = layer.permutation(topk_ids, emap, 3)
    local = emap[topk_ids.long()].reshape(-1)
    assert offsets.tolist() == [0, *torch.bincount(local[local >= 0].long(), minlength=3).cumsum(0).tolist()]
    assert bool((positions[local < 0] == -1).all()) and src.numel() == int((local >= 0).sum())
    for slot in (local >= 0).nonzero().reshape(-1).tolist():
        row = int(positions[slot])
        assert src[row] == slot // 4  # the permuted row holds the slot's token
        assert offsets[local[slot]] <= row < offsets[local[slot] + 1]  # inside its expert's segment
    rows = positions[positions >= 0]
    assert sorted(rows.tolist()) == list(range(src.numel()))
    # slot order inside an expert
    for e in range(3):
        slots = (local == e).nonzero().reshape(-1)
        assert positions[slots].tolist() == sorted(positions[slots].tolist())


def test_uniform_draw_is_the_plain_top_k_of_the_softmax() -> None:
    weights, ids = layer.draw_topk(50, 48, "uniform", torch.Generator().manual_seed(3))
    probs = torch.softmax(torch.randn(50, layer.GLOBAL_EXPERTS, generator=torch.Generator().manual_seed(3)), dim=-1)
    want_w, want_ids = probs.topk(layer.TOP_K, dim=-1)
    assert torch.equal(ids, want_ids.to(torch.int32)) and torch.equal(weights, want_w)
    assert ids.dtype == torch.int32 and weights.dtype == torch.float32


@pytest.mark.parametrize("tokens", [16, 2064, 6144])
def test_skewed_draw_puts_one_local_expert_in_eight_times_its_share_of_top_ks(tokens: int) -> None:
    weights, ids = layer.draw_topk(tokens, 48, "skewed", torch.Generator().manual_seed(tokens))
    counts = torch.bincount(ids.reshape(-1).long(), minlength=layer.GLOBAL_EXPERTS)
    hot = int(counts.argmax())
    assert hot < 48  # one of the rank's experts
    assert int(counts[hot]) == min(tokens, round(8 * tokens * layer.TOP_K / layer.GLOBAL_EXPERTS))
    assert all(len(set(row)) == layer.TOP_K for row in ids.tolist())  # distinct experts per token
    assert bool((weights > 0).all()) and bool((weights < 1).all())  # softmax probabilities, as vLLM's


def test_skewed_counts_give_one_expert_eight_times_the_average_within_the_capacity() -> None:
    uniform = layer.draw_counts(768, 48, 256, "uniform", torch.Generator().manual_seed(0))
    assert uniform.dtype == torch.int32 and int(uniform.sum()) == 768
    skewed = layer.draw_counts(768, 48, 256, "skewed", torch.Generator().manual_seed(0))
    assert int(skewed.max()) == 128 and int((skewed == 128).sum()) == 1 and int(skewed.sum()) == 768
    capped = layer.draw_counts(48 * 64, 48, 256, "skewed", torch.Generator().manual_seed(1))
    assert int(capped.max()) == 256  # 8 x 64 rows, held to the buffer's 256


def test_bound_puts_only_the_small_steps_at_the_copy_floor() -> None:
    h = layer._HummingLayer.__new__(layer._HummingLayer)
    h.small_bytes = {"silu_and_mul": 4_270_000, "unpermute": 8_540_000}  # 1 and 2 µs at 4.27 TB/s
    steps = {"permute": 50.0, "gate_up": 600.0, "silu_and_mul": 9.0, "down": 300.0, "unpermute": 7.0}
    h.small_bytes["permute"] = 0
    assert h.bound_us(steps) == pytest.approx(600.0 + 1.0 + 300.0 + 2.0)


def test_report_files_hold_every_result_and_the_ratio(tmp_path) -> None:
    ep = _result("ep8_tok128", chord=1000.0, humming=1200.0)
    ep.humming_us["grouped_contiguous"] = 1100.0
    ep.humming_steps_us["grouped_contiguous"] = {"permute": 60.0, "gate_up": 600.0, "silu_and_mul": 20.0,
                                                 "down": 380.0, "unpermute": 40.0}
    ep.humming_bound_us = {"indexed": 1150.0, "grouped_contiguous": 1050.0}
    results = [_result(), _result("tp8_8192", chord=2200.0, humming=2156.0), ep]
    files = layer.write(results, tmp_path / "out", {"gpu": "test"})
    payload = json.loads(files["json"].read_text())
    assert [r["scenario"] for r in payload["results"]] == ["tp8_1024", "tp8_8192", "ep8_tok128"]
    assert payload["results"][0]["ratio"] == pytest.approx(1.1)
    assert payload["results"][2]["best_path"] == "grouped_contiguous"
    assert payload["results"][2]["ratio"] == pytest.approx(1.1)  # against the faster path
    assert payload["results"][2]["bound_ratio"] == pytest.approx(1.05)
    assert payload["results"][0]["bound_ratio"] == pytest.approx(1.1)  # no bound: the measured ratio
    assert payload["environment"] == {"gpu": "test"} and payload["tolerance"] == layer.TOLERANCE
    table = files["table"].read_text()
    assert ("| tp8_1024 | 1024 | 500.0 (32) | indexed | 550.0 | gate_up 250.0 / silu_and_mul 6.0 / down 260.0 / "
            "mul_sum 34.0 | 1.10× |") in table
    assert "0.98×" in table
    assert "| ep8_tok128 | 6144 | 1000.0 (32) | grouped_contiguous (faster) | 1100.0 |" in table
    assert "| ep8_tok128 | 6144 | 1000.0 (32) | indexed | 1200.0 |" in table
    assert "| 1.10× | 1050.0 (1.05×) |" in table and "| 1.10× | – |" in table
    assert not list((tmp_path / "out").glob("*.tmp"))
    skewed = _result()
    skewed.draw = "skewed"
    payload = json.loads(layer.write([skewed], tmp_path / "skewed", {})["json"].read_text())
    assert payload["results"][0]["draw"] == "skewed"
    assert "| tp8_1024 (skewed) | 1024 |" in layer.format_table([skewed])


def test_main_refuses_unknown_scenarios_and_missing_gpu(capsys) -> None:
    assert layer.main(["--scenarios", "ep8_tok16"]) == 2  # a GEMM scenario, not a layer one
    assert "unknown layer scenario" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        layer.main(["--draw", "zipf"])
    assert "invalid choice: 'zipf'" in capsys.readouterr().err
    with pytest.raises(ChordInputError, match="draw: expected one of"):
        layer.run(["tp8_1024"], draw="zipf")
    if not torch.cuda.is_available():
        assert layer.main(["--scenarios", "tp8_decode160"]) == 2
        assert "needs a CUDA GPU" in capsys.readouterr().err


@pytest.mark.gpu
def test_one_layer_end_to_end_against_humming() -> None:
    pytest.importorskip("humming")
    (r,) = layer.run(["tp8_decode160"], rounds=1, log=lambda m: None)
    assert r.chord_us > 0 and r.humming_us["indexed"] > 0
    assert all(0 <= e < layer.TOLERANCE for e in r.rel_err.values())
    assert set(r.humming_steps_us["indexed"]) == set(layer.HUMMING_STEPS["indexed"])


@pytest.mark.gpu
def test_expert_parallel_layer_against_both_humming_paths() -> None:
    pytest.importorskip("humming")
    (r,) = layer.run(["ep8_tok43"], rounds=1, log=lambda m: None)
    assert set(r.rel_err) == {"chord", "humming_indexed", "humming_grouped_contiguous"}
    assert all(0 <= e < layer.TOLERANCE for e in r.rel_err.values())
    assert set(r.humming_us) == {"indexed", "grouped_contiguous"} and r.ratio > 0


@pytest.mark.gpu
def test_deepep_low_latency_layer_against_humming_grouped_masked() -> None:
    pytest.importorskip("humming")
    (r,) = layer.run(["ep8_masked8"], rounds=1, log=lambda m: None)
    assert set(r.rel_err) == {"chord", "humming_grouped_masked"}
    assert all(0 <= e < layer.TOLERANCE for e in r.rel_err.values())
    assert set(r.humming_steps_us["grouped_masked"]) == set(layer.HUMMING_STEPS["grouped_masked"])


@pytest.mark.gpu
@pytest.mark.parametrize("scenario", ["ep8_tok12", "ep8_masked8"])
def test_a_skewed_layer_is_checked_against_the_reference(scenario: str) -> None:
    pytest.importorskip("humming")
    (r,) = layer.run([scenario], rounds=1, log=lambda m: None, draw="skewed")
    assert r.draw == "skewed" and r.chord_us > 0
    assert all(0 <= e < layer.TOLERANCE for e in r.rel_err.values())
