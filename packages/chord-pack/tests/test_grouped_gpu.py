"""On a GPU: an EP rank's experts, read from a contiguous/masked chord-pack checkpoint by expert
range, run on chord-kernels' grouped GEMMs and match the reference (skips without CUDA)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from chord_kernels import grouped, reference
from chord_pack.convert import convert
from chord_pack.demo import write_tiny_kimi_checkpoint
from chord_pack.load import read_packed

EXPERTS, HIDDEN, INTERMEDIATE = 8, 512, 256
RANK_EXPERTS = range(4, 8)  # rank 1 of EP2, linear placement
ALIGN = 128  # the contiguous mode's per-expert segment alignment


def _rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-12))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("grouped-gpu")
    src = write_tiny_kimi_checkpoint(root / "src", experts=EXPERTS, hidden=HIDDEN, intermediate=INTERMEDIATE,
                                     layers=1, seed=13)
    return {mode: convert(src, root / mode, mode, "h200_ep8").output for mode in ("contiguous", "masked")}


@pytest.mark.gpu
@pytest.mark.parametrize("proj", ["w13", "w2"])
def test_masked_rank_weights_match_the_reference(checkpoints: dict[str, Path], proj: str) -> None:
    weight = read_packed(checkpoints["masked"], 1, proj, experts=RANK_EXPERTS)
    gpu = weight.to("cuda")
    groups, max_m = len(RANK_EXPERTS), 24
    counts = [0, 1, max_m, 7]  # an empty group, one row, a full group, a ragged one
    g = torch.Generator().manual_seed(1)
    a = (torch.randn(groups, max_m, weight.k, generator=g) * 0.5).to(torch.bfloat16)
    masked_m = torch.tensor(counts, dtype=torch.int32)
    want = reference.grouped_masked(a, weight, masked_m).view(groups, max_m, weight.n)
    poison = torch.full((groups, max_m, weight.n), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = grouped.masked(a.cuda(), gpu, masked_m.cuda(), expected_m=8, out=poison.clone()).cpu()
    again = grouped.masked(a.cuda(), gpu, masked_m.cuda(), expected_m=8, out=poison.clone()).cpu()
    for i, m in enumerate(counts):
        if m:
            assert _rel_err(got[i, :m], want[i, :m]) <= 5e-3, (proj, i)
        assert torch.isnan(got[i, m:].float()).all(), f"group {i}: rows past masked_m were written"
    assert torch.equal(got.nan_to_num(), again.nan_to_num())


@pytest.mark.gpu
@pytest.mark.parametrize("proj", ["w13", "w2"])
def test_contiguous_rank_weights_match_the_reference(checkpoints: dict[str, Path], proj: str) -> None:
    weight = read_packed(checkpoints["contiguous"], 1, proj, experts=RANK_EXPERTS)
    gpu = weight.to("cuda")
    counts = [5, 0, ALIGN, 33]  # rows per local expert: ragged, none, exactly one segment, ragged
    m_indices = torch.cat([
        torch.cat([torch.full((c,), e, dtype=torch.int32), torch.full((-c % ALIGN,), -1, dtype=torch.int32)])
        for e, c in enumerate(counts)])
    g = torch.Generator().manual_seed(2)
    a = (torch.randn(m_indices.numel(), weight.k, generator=g) * 0.5).to(torch.bfloat16)
    want = reference.grouped_contiguous(a, weight, m_indices)
    poison = torch.full((m_indices.numel(), weight.n), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = grouped.contiguous(a.cuda(), gpu, m_indices.cuda(), out=poison.clone()).cpu()
    real = m_indices >= 0
    assert _rel_err(got[real], want[real]) <= 5e-3, proj
    assert torch.isnan(got[~real].float()).all(), "padding rows were written"
    again = grouped.contiguous(a.cuda(), gpu, m_indices.cuda(), out=poison.clone()).cpu()
    assert torch.equal(got[real], again[real])


@pytest.mark.gpu
def test_a_masked_checkpoint_is_refused_by_the_contiguous_kernel(checkpoints: dict[str, Path]) -> None:
    from chord_kernels.errors import ChordLayoutError

    weight = read_packed(checkpoints["masked"], 1, "w2", experts=RANK_EXPERTS).to("cuda")
    a = torch.zeros(ALIGN, weight.k, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ChordLayoutError, match=r"chord_kernels\.grouped\.contiguous needs .*mode=masked"):
        grouped.contiguous(a, weight, torch.zeros(ALIGN, dtype=torch.int32, device="cuda"))
