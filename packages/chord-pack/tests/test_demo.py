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


CI_DEMO = Path(__file__).resolve().parents[3] / "ci" / "demo.py"


@pytest.mark.skipif(not CI_DEMO.is_file(), reason="ci/demo.py is not next to this checkout of the tests")
@pytest.mark.parametrize("keep", [False, True])
def test_ci_demo_says_where_the_checkpoint_went_and_what_next(tmp_path: Path, keep: bool, monkeypatch,
                                                             capsys) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("ci_demo", CI_DEMO)
    ci_demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ci_demo)
    workdir = tmp_path.joinpath(*["a-long-directory-name-for-a-narrow-terminal"] * 3, "demo")
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setattr("sys.argv", ["demo.py", *(["--workdir", str(workdir)] if keep else [])])
    assert ci_demo.main() == 0
    text = capsys.readouterr().out
    assert "is the layout and the profile of the conversion" in text
    assert "chord-pack convert moonshotai/Kimi-K2-Thinking" in text and "chord-pack verify" in text
    assert "--profile h200_ep8 \\\n" in text  # one backslash: the command pastes into a shell as printed
    if keep:
        out = workdir / "tiny-kimi-k2-thinking-chord-indexed"
        assert f"The converted checkpoint is kept in\n  {out}\n" in text and (out / "config.json").is_file()
    else:
        prose = " ".join(text.split())
        assert "written to a temporary directory, now deleted; to keep them, run `nox -s demo -- --workdir DIR`" in prose


@pytest.mark.parametrize(("args", "message"), [
    (["--style", "k3"], "unknown demo style 'k3'; valid styles: k2-thinking, k2.5"),
    (["--layout", "bogus"], "unknown layout 'bogus'; valid layouts: "),
    (["--profile", "nope"], "layout 'indexed' has no profile 'nope'"),
])
def test_demo_refuses_a_bad_choice_before_writing_anything(tmp_path: Path, args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from chord_pack.cli import app

    workdir = tmp_path / "demo"
    res = CliRunner().invoke(app, ["demo", str(workdir), *args])
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), (res.output, res.exception)
    assert message in " ".join(res.output.split())
    assert not workdir.exists()  # so the corrected command runs in the same directory
