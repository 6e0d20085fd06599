"""Fused kernel and runtime on 2 GPUs (NCCL). Marked gpu: skipped without CUDA."""

from __future__ import annotations

import pytest
import torch

from chord_tokenweave.distributed import launch

pytestmark = pytest.mark.gpu

WORLD = 2


def _need_gpus() -> None:
    if torch.cuda.device_count() < WORLD:
        pytest.skip(f"needs {WORLD} GPUs, found {torch.cuda.device_count()}")
    pytest.importorskip("triton")


@pytest.mark.parametrize("hidden", [4096, 5120, 6144, 8192])
def test_fused_matches_nccl_and_reference(hidden: int) -> None:
    _need_gpus()
    from _gpu_workers import fused_vs_nccl

    cases = [(t, hidden) for t in (1, 2, 3, 127, 1000, 4097)]
    if hidden == 8192:
        cases += [(32768, hidden), (32767, hidden)]
    # Defaults (default_config: 2 rows, 16 warps, 3 stages at these sizes); no pipelining;
    # other pipelined variants.
    configs = [(None, None, None), (None, None, 1), (2, 16, 2), (1, 8, 3)]
    errs = launch(fused_vs_nccl, WORLD, cases, ["sharded", "replicated", "one_shot"], configs,
                  backend="nccl", timeout_s=300)
    assert len(errs[0]) == len(cases) * 3 * len(configs)


def test_cuda_graph_and_back_to_back() -> None:
    _need_gpus()
    from _gpu_workers import graph_and_back_to_back

    res = launch(graph_and_back_to_back, WORLD, 1027, 8192, backend="nccl", timeout_s=180)
    assert len(res[0]["graph_errs"]) == 3


def test_barrier_timeout_reports_instead_of_hanging() -> None:
    _need_gpus()
    from _gpu_workers import timeout_raises

    res = launch(timeout_raises, WORLD, backend="nccl", timeout_s=120)
    assert "timed out" in res[0] and "ranks [1]" in res[0]


def test_model_variants_agree_on_gpus() -> None:
    _need_gpus()
    from _gpu_workers import model_variants

    res = launch(model_variants, WORLD, 777, backend="nccl", timeout_s=240)
    assert len(res[0]) == 5, res[0]
    print(res[0])
