"""The benchmark's bookkeeping (floor, best config, fewest CTAs within 10%) on made-up numbers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from chord_tokenweave.bench import _summarise


def test_summary_floor_and_fewest_ctas() -> None:
    row = {
        "tokens": 8192, "nccl_norm_us": 714.4, "two_shot_norm_us": 577.8,
        "fused_sweep_us": {"ctas8_rows1_warps8": 700.0, "ctas16_rows1_warps8": 470.0,
                           "ctas32_rows2_warps16": 440.0, "ctas64_rows1_warps8": 450.0},
        "oneshot_sweep_us": {"ctas16": 900.0, "ctas32": 800.0},
    }
    bw = {"pull": {4: 51.0, 132: 325.0}, "push": {4: 65.0, 132: 354.0}}
    _summarise(row, bw, 8192, 8192, 2)
    assert row["fused_best_us"] == 440.0 and row["fused_best_config"] == "ctas32_rows2_warps16"
    # 16 CTAs at 470 us is within 10% of 440 us and uses the fewest SMs.
    assert row["fused_fewest_ctas_within_10pct"]["ctas"] == 16
    # 4096 rows x 8192 x 2 bytes pulled at 325 GB/s and pushed at 354 GB/s: ~396 us.
    assert row["floor_us"] == pytest.approx(396, rel=0.02)
    assert row["speedup_vs_nccl_norm"] == pytest.approx(714.4 / 440.0)
    assert row["oneshot_best_config"] == "ctas32"


def test_summary_printer_handles_partial_reports(capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(__file__).resolve().parents[1] / "bench" / "tokenweave_check.py"
    spec = importlib.util.spec_from_file_location("tokenweave_check", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    row = {"tokens": 1024, "fused_sweep_us": {"ctas8_rows1_warps8": 80.0}, "errors": {"x": "y"}}
    _summarise(row, None, 1024, 8192, 2)
    report = {
        "world_size": 2, "gpus": ["GPU A", "GPU B"],
        "stages": {"kernel": {"ok": True}, "layer_llama-3.3-70b": {"skipped": "budget"}},
        "kernel": {"p2p_gbps": {"pull": {8: 100.0}, "push": {8: 128.0}}, "rows": [row]},
        "layer_mixtral-8x22b": {"num_layers": 2, "rows": [{"tokens": 1024, "sequential_us": 5.0}]},
    }
    mod._print_summary(report)
    out = capsys.readouterr().out
    assert "TP2" in out and "1024" in out and "80.0" in out and "8CTA pull 100" in out


def test_pipeline_smem_matches_what_triton_allocates() -> None:
    from chord_tokenweave.launch import SMEM_LIMIT, pipeline_smem

    # Triton 3.6 and 3.9 report 49240 / 98400 / 196800 / 147736 bytes for these (sm_90, D=8192).
    assert abs(pipeline_smem(2, 8192, 1, 2) - 49240) < 1024
    assert abs(pipeline_smem(2, 8192, 1, 3) - 98400) < 1024
    assert abs(pipeline_smem(2, 8192, 2, 3) - 196800) < 1024
    assert abs(pipeline_smem(8, 8192, 1, 2) - 147736) < 1024
    assert pipeline_smem(8, 8192, 2, 2) > SMEM_LIMIT and pipeline_smem(2, 8192, 1, 1) == 0


def test_default_kernel_config_fits_shared_memory() -> None:
    from chord_tokenweave.launch import SMEM_LIMIT, default_config, pipeline_smem

    # The fastest configuration of the H200 TP2 sweep, where it fits.
    assert default_config(2, 8192) == (2, 16, 3)
    assert default_config(2, 6144) == (2, 16, 3)
    assert default_config(4, 8192) == (1, 8, 3)
    assert default_config(8, 8192) == (2, 16, 1)
    for world in (2, 4, 8):
        for hidden in (1024, 4096, 5120, 6144, 8192):
            rows, _warps, stages = default_config(world, hidden)
            assert pipeline_smem(world, hidden, rows, stages) <= SMEM_LIMIT
    assert default_config(2, 1024) == (4, 8, 1)
