"""The runtime on 2, 4 and 8 gloo processes with the torch fallback of the fused op."""

from __future__ import annotations

import time
from functools import cache
from typing import Any

import pytest
import torch
from _workers import (
    FUSED_CASES,
    checks_worker,
    fused_worker,
    model_worker,
    plane_plumbing_worker,
    rank_input,
    shared_inputs,
    sleepy_worker,
)

from chord_tokenweave.distributed import launch
from chord_tokenweave.errors import TokenWeaveError
from chord_tokenweave.model import TINY_DENSE, TINY_MOE, TPModel
from chord_tokenweave.numerics import shard_range
from chord_tokenweave.overlap import weave_order

SEED = 1234


@cache
def _fused_results(world_size: int) -> list[list[dict[str, Any]]]:
    return launch(fused_worker, world_size, SEED, timeout_s=120)


def _reference(world_size: int, case: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Independent float64 reference of AllReduce + add + RMSNorm."""
    tokens, hidden = FUSED_CASES[case]
    xs = [rank_input(SEED + case, r, tokens, hidden) for r in range(world_size)]
    residual, weight = shared_inputs(SEED + case, tokens, hidden)
    h = sum(x.double() for x in xs) + residual.double()
    h = h.to(torch.bfloat16).double()
    y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.double()
    return y.to(torch.bfloat16), h.to(torch.bfloat16)


@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_fused_fallback_matches_reference(world_size: int) -> None:
    results = _fused_results(world_size)
    for case, (tokens, _) in enumerate(FUSED_CASES):
        y_ref, h_ref = _reference(world_size, case)
        y0 = results[0][case]["y_sharded"]
        for rank in range(world_size):
            got = results[rank][case]
            # Every rank ends with bit-identical outputs (one owner per row).
            assert torch.equal(got["y_sharded"], y0)
            assert torch.equal(got["y_rep"], y0)
            torch.testing.assert_close(got["y_sharded"].float(), y_ref.float(),
                                       atol=2e-2, rtol=2e-2)
            lo, hi = shard_range(tokens, world_size, rank)
            assert got["res_sharded"].shape[0] == hi - lo
            torch.testing.assert_close(got["res_sharded"].float(), h_ref[lo:hi].float(),
                                       atol=2e-2, rtol=2e-2)
            torch.testing.assert_close(got["res_rep"].float(), h_ref.float(), atol=2e-2, rtol=2e-2)
            # The sequential baseline (library all-reduce) agrees to bf16 tolerance.
            torch.testing.assert_close(got["y_seq"].float(), y_ref.float(), atol=3e-2, rtol=3e-2)
            torch.testing.assert_close(got["res_seq"].float(), h_ref.float(), atol=3e-2, rtol=3e-2)


def _check_model(world_size: int, model: str, tokens: int, split: int) -> None:
    cfg = {"tiny-dense": TINY_DENSE, "tiny-moe": TINY_MOE}[model]
    results = launch(model_worker, world_size, model, tokens, split, SEED, timeout_s=150)
    x = results[0]["x"]
    reference = TPModel(cfg, seed=SEED).forward(x, "sequential")  # unsharded, one process
    scale = reference.float().abs().mean().item()
    for rank, res in enumerate(results):
        outs = res["outs"]
        for name in ("sequential", "fused", "tokenweave", "fused_only_decision"):
            err = (outs[name].float() - reference.float()).abs()
            assert err.max().item() < 0.08 * max(1.0, scale) + 0.05, (rank, name, err.max())
            assert err.mean().item() < 0.01 * max(1.0, scale) + 0.005, (rank, name, err.mean())
            assert torch.equal(outs[name], results[0]["outs"][name]), (rank, name)
        # The weave reorders work, never the math of the fused op: fused vs tokenweave agree
        # as closely as two GEMM blockings can.
        torch.testing.assert_close(outs["tokenweave"].float(), outs["fused"].float(),
                                   atol=3e-2, rtol=3e-2)
        # No-communication bound = this rank's shard computed alone.
        alone = TPModel(cfg, seed=SEED, shard=(world_size, rank)).forward(x, "nocomm")
        torch.testing.assert_close(outs["nocomm"].float(), alone.float(), atol=1e-2, rtol=1e-2)
        assert (outs["nocomm"].float() - reference.float()).abs().mean() > 0.05
        assert "disagree" in res["mismatch"]
        stages = [(s, layer) for layer in range(cfg.num_layers) for s in ("attn", "mlp")]
        assert res["trace"] == weave_order(stages, 2)


def test_model_two_ranks_dense() -> None:
    _check_model(2, "tiny-dense", 13, 6)


def test_model_two_ranks_moe() -> None:
    _check_model(2, "tiny-moe", 12, 7)


def test_model_four_ranks() -> None:
    _check_model(4, "tiny-dense", 10, 3)


def test_model_eight_ranks() -> None:
    _check_model(8, "tiny-moe", 11, 5)


def test_launch_times_out_instead_of_hanging() -> None:
    start = time.monotonic()
    with pytest.raises(TokenWeaveError, match="did not finish"):
        launch(sleepy_worker, 2, timeout_s=4)
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("model", ["tiny-dense", "tiny-moe"])
def test_boundary_checks_pass_and_outputs_agree_with_replayed_routing(model: str) -> None:
    results = launch(checks_worker, 2, model, 13, 6, None, timeout_s=120)
    for res in results:
        for variant, splits in (("fused", 1), ("tokenweave", 2)):
            checks = res[variant]["checks"]
            assert len(checks) == 2 * TINY_DENSE.num_layers * splits
            assert all(c["bad"] == 0 and c["first_bad_row"] == -1 for c in checks), checks
            assert all(c["y_err"] <= 0.05 for c in checks)
            assert res[variant]["err"] < 0.1


def test_boundary_checks_catch_a_planted_bug() -> None:
    res = launch(checks_worker, 2, "tiny-dense", 13, 6, 1, timeout_s=120)
    fused = res[0]["fused"]["checks"]
    assert all(c["bad"] > 0 and c["first_bad_row"] == 1 for c in fused), fused
    # Row 1 of 13 belongs to rank 0 (rows 0..5): an own row, not a stale partial.
    assert all(c["bad_own_rows"] == 1 and c["bad_peer_rows"] == 0 and c["stale_rows"] == 0
               for c in fused), fused
    # Tokenweave: split 0 has 6 rows (row 1 is corrupted), split 1 has 7 (row 1 likewise).
    assert all(c["first_bad_row"] == 1 for c in res[0]["tokenweave"]["checks"])
    assert all(c["bad"] == 0 for c in res[1]["fused"]["checks"])  # rank 1 runs the real op


@pytest.mark.parametrize("model", ["tiny-dense", "tiny-moe"])
def test_gpu_path_plumbing_with_an_emulated_kernel(model: str) -> None:
    for res in launch(plane_plumbing_worker, 2, model, 13, 6, timeout_s=120):
        assert res["fused"] < 0.1 and res["tokenweave"] < 0.1, res  # NaN fails too


def test_ranks_that_disagree_get_a_typed_error_on_every_rank() -> None:
    from _workers import mismatch_worker

    start = time.monotonic()
    results = launch(mismatch_worker, 2, timeout_s=60)
    assert time.monotonic() - start < 30
    for rank, res in enumerate(results):
        for case, want in (("tokens", "rank 0: [4, 8] bfloat16, rank 1: [5, 8] bfloat16"),
                           ("hidden", "rank 0: [4, 8] bfloat16, rank 1: [4, 9] bfloat16"),
                           ("dtype", "rank 0: [4, 8] bfloat16, rank 1: [4, 8] float16"),
                           ("sequential_tokens", "rank 1: [5, 8]")):
            assert res[case].startswith("TokenWeaveInputError"), (rank, case, res[case])
            assert want in res[case], (rank, case, res[case])
        for case in ("one_rank_bad_residual", "sequential_bad_residual"):
            assert res[case].startswith("TokenWeaveInputError"), (rank, case, res[case])
            # The rank with the bad residual names it; its peer says who stopped it.
            want = "residual (" if rank == 1 else "rank(s) [1] of 2 rejected"
            assert want in res[case], (rank, case, res[case])
        assert res["same"] == "ok [4, 8] torch.bfloat16"


def test_launch_refuses_an_empty_world() -> None:
    from chord_tokenweave.errors import TokenWeaveInputError

    with pytest.raises(TokenWeaveInputError, match="world_size must be a positive int, got 0"):
        launch(sleepy_worker, 0, timeout_s=5)
