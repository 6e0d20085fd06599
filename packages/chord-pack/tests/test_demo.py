"""The demo the README runs: tiny checkpoint -> convert -> verify -> same MoE output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chord_pack.demo import run_demo, write_tiny_kimi_checkpoint


def test_run_demo(tmp_path: Path) -> None:
    summary = run_demo(tmp_path, style="k2.5")
    assert summary["moe_output_equal"] is True and summary["moe_output_max_abs"] > 0
    assert summary["family"] == "kimi-k2.5" and summary["verified_experts"] == 2 * 3 * 8
    assert Path(summary["output"], "config.json").is_file()


def test_tiny_checkpoint_is_literal_kimi(tmp_path: Path) -> None:
    src = write_tiny_kimi_checkpoint(tmp_path / "k2", layers=3, experts=5, hidden=64, intermediate=32, seed=1)
    config = json.loads((src / "config.json").read_text())
    assert config["num_hidden_layers"] == 4 and config["first_k_dense_replace"] == 1
    assert config["quantization_config"]["format"] == "pack-quantized"
    assert config["quantization_config"]["ignore"][1] == "re:.*self_attn.*"
    weight_map = json.loads((src / "model.safetensors.index.json").read_text())["weight_map"]
    assert "model.layers.3.mlp.experts.4.down_proj.weight_shape" in weight_map
    assert "model.layers.0.mlp.gate_proj.weight" in weight_map  # dense layer 0 stays bf16
    with pytest.raises(ValueError, match="multiple of 32"):
        write_tiny_kimi_checkpoint(tmp_path / "bad", hidden=48)
