"""MoE experts: grouped GEMMs (sync-free) against the per-expert loop; routing record/replay."""

from __future__ import annotations

import pytest
import torch

from chord_tokenweave.errors import TokenWeaveInputError
from chord_tokenweave.model import TINY_MOE, TPModel
from chord_tokenweave.table import Decision
from chord_tokenweave.verify import RoutingLog


def test_grouped_experts_match_the_loop() -> None:
    if not hasattr(torch, "_grouped_mm"):
        pytest.skip("torch without _grouped_mm")
    model = TPModel(TINY_MOE, seed=2)
    g = torch.Generator().manual_seed(3)
    for tokens in (1, 5, 64):
        h = torch.randn(tokens, TINY_MOE.hidden, generator=g).to(torch.bfloat16)
        model._bounds = [0, tokens]
        topi, topw = model._route(0, 0, h)
        loop = model._experts(model.layers[0], h, topi, topw, impl="loop")
        grouped = model._experts(model.layers[0], h, topi, topw, impl="grouped")
        assert model._grouped_ok
        torch.testing.assert_close(grouped, loop, atol=1e-2, rtol=1e-2)
    # Unused experts (every token routed to the same two) are empty groups.
    topi = torch.tensor([[1, 3]] * 4)
    topw = torch.full((4, 2), 0.5)
    h = torch.randn(4, TINY_MOE.hidden, generator=g).to(torch.bfloat16)
    torch.testing.assert_close(
        model._experts(model.layers[0], h, topi, topw, impl="grouped"),
        model._experts(model.layers[0], h, topi, topw, impl="loop"), atol=1e-2, rtol=1e-2)


def test_routing_replay_reproduces_the_recorded_choice() -> None:
    model = TPModel(TINY_MOE, seed=4)
    x = torch.randn(12, TINY_MOE.hidden, generator=torch.Generator().manual_seed(5))
    x = x.to(torch.bfloat16)
    log = RoutingLog()
    ref = model.forward(x, "sequential", routing=log)
    assert sorted(log.topi) == [0, 1] and log.topi[0].shape == (12, TINY_MOE.top_k)
    # Replayed through two splits: the same experts, so the same output up to GEMM blocking.
    woven = model.forward(x, "tokenweave", decision=Decision(12, True, 5, 4, None),
                          routing=log.frozen())
    torch.testing.assert_close(woven.float(), ref.float(), atol=3e-2, rtol=3e-2)
    again = RoutingLog()
    model.forward(x, "sequential", routing=again)
    assert log.flips(again) == 0
    # A forged log with other experts changes the output: replay is really used.
    forged = log.frozen()
    forged.topi = {k: (v + 1) % TINY_MOE.num_experts for k, v in log.topi.items()}
    other = model.forward(x, "sequential", routing=forged)
    assert (other.float() - ref.float()).abs().max() > 0.1
    assert log.flips(forged) == 12 * 2
    with pytest.raises(TokenWeaveInputError, match=r"recorded for \[12\] tokens, this batch has 7"):
        model.forward(x[:7], "sequential", routing=log.frozen())


def test_library_decision_runs_the_sequential_path() -> None:
    model = TPModel(TINY_MOE, seed=4)
    x = torch.randn(9, TINY_MOE.hidden, generator=torch.Generator().manual_seed(6))
    x = x.to(torch.bfloat16)
    trace: list = []
    y = model.forward(x, "tokenweave", decision=Decision(9, False, None, 4, None, library=True),
                      trace=trace)
    assert torch.equal(y, model.forward(x, "sequential"))
    assert {e.split for e in trace} == {0}  # one split: no weave


def test_a_decision_for_another_batch_is_refused() -> None:
    model = TPModel(TINY_MOE, num_layers=1, seed=2)
    x = torch.randn(100, TINY_MOE.hidden).to(torch.bfloat16)
    with pytest.raises(TokenWeaveInputError, match="decision is for 300 tokens, this batch has 100"):
        model.forward(x, "tokenweave", decision=Decision(300, True, 150, 4, None))
    for split in (0, 100, 200, -5, None):
        with pytest.raises(TokenWeaveInputError, match=r"needs a split in \(0, 100\)"):
            model.forward(x, "tokenweave", decision=Decision(100, True, split, 4, None))
