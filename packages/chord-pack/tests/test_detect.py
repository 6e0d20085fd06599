"""Model family / quant scheme detection and refusal of anything but int4 g32 symmetric pack-quantized."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from chord_pack.convert import convert, partial_dir
from chord_pack.demo import KIMI_INT4_QUANTIZATION_CONFIG, kimi_config, write_tiny_kimi_checkpoint
from chord_pack.describe import describe
from chord_pack.detect import detect
from chord_pack.errors import UnsupportedCheckpointError


def _weights(qc: dict) -> dict:
    return qc["config_groups"]["group_0"]["weights"]


MUTATIONS = {
    "8-bit": (lambda qc: _weights(qc).update(num_bits=8), "'num_bits': 8"),
    "group-128": (lambda qc: _weights(qc).update(group_size=128), "'group_size': 128"),
    "asymmetric": (lambda qc: _weights(qc).update(symmetric=False), "'symmetric': False"),
    "channel": (lambda qc: _weights(qc).update(strategy="channel"), "'strategy': 'channel'"),
    "fp4": (lambda qc: _weights(qc).update(type="float"), "'type': 'float'"),
    "naive-quantized": (lambda qc: qc.update(format="naive-quantized"), "found 'naive-quantized'"),
    "fp8-method": (lambda qc: qc.update(quant_method="fp8"), "found 'fp8'"),
    "w4a8": (lambda qc: qc["config_groups"]["group_0"].update(
        input_activations={"num_bits": 8, "type": "int"}), "weight-only"),
    "actorder": (lambda qc: _weights(qc).update(actorder="group"), "actorder"),
    "frozen": (lambda qc: qc.update(quantization_status="frozen"), "found 'frozen'"),
}


@pytest.mark.parametrize("style", ["k2-thinking", "k2.5"])
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_wrong_scheme_is_refused_naming_what_was_found(style: str, mutation: str) -> None:
    config = kimi_config(style, layers=1, experts=2, hidden=64, intermediate=32)
    qc = config["text_config"]["quantization_config"] if style == "k2.5" else config["quantization_config"]
    change, found = MUTATIONS[mutation]
    change(qc)
    with pytest.raises(UnsupportedCheckpointError) as err:
        detect(config, {})
    assert found in str(err.value)
    where = "text_config.quantization_config" if style == "k2.5" else "quantization_config"
    assert where in str(err.value)


def test_unquantized_and_already_converted_are_refused() -> None:
    config = kimi_config("k2-thinking", layers=1, experts=2, hidden=64, intermediate=32)
    del config["quantization_config"]
    with pytest.raises(UnsupportedCheckpointError, match="no quantization_config"):
        detect(config, {})
    config["quantization_config"] = copy.deepcopy(KIMI_INT4_QUANTIZATION_CONFIG)
    config["quantization_config"]["format"] = "chord-packed"
    with pytest.raises(UnsupportedCheckpointError, match="already converted"):
        detect(config, {})


def test_wrong_scheme_fails_before_writing(tmp_path: Path) -> None:
    src = write_tiny_kimi_checkpoint(tmp_path / "src", "k2.5", layers=1, experts=2, hidden=64, intermediate=32)
    config = json.loads((src / "config.json").read_text())
    config["text_config"]["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = 64
    (src / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedCheckpointError, match="'group_size': 64"):
        convert(str(src), tmp_path / "out", "test-reversed", "test_a")
    assert not (tmp_path / "out").exists() and not partial_dir(tmp_path / "out").exists()


def test_k25_prefix_and_family(tmp_path: Path) -> None:
    src = write_tiny_kimi_checkpoint(tmp_path / "src", "k2.5", layers=3, experts=6, hidden=96, intermediate=64)
    weight_map = json.loads((src / "model.safetensors.index.json").read_text())["weight_map"]
    info = detect(json.loads((src / "config.json").read_text()), weight_map)
    assert (info.family, info.prefix, info.moe_layers, info.num_experts) == ("kimi-k2.5", "language_model.", (1, 2, 3), 6)
    assert info.quant_config_path == ("text_config", "quantization_config")
    facts = describe(str(src))
    assert facts["family"] == "kimi-k2.5" and facts["tensor_prefix"] == "language_model."
    assert facts["expert_shapes [N, K]"] == {"gate_proj": [64, 96], "up_proj": [64, 96], "down_proj": [96, 64]}
    # The vision tower is copied, not treated as experts.
    assert "vision_tower.patch_embed.proj.weight" in weight_map


def test_k2_thinking_family(tiny: Path) -> None:
    weight_map = json.loads((tiny / "model.safetensors.index.json").read_text())["weight_map"]
    info = detect(json.loads((tiny / "config.json").read_text()), weight_map)
    assert (info.family, info.prefix, info.quant_config_path) == ("kimi-k2-thinking", "", ("quantization_config",))


def test_zero_point_tensors_are_refused(tiny: Path) -> None:
    weight_map = json.loads((tiny / "model.safetensors.index.json").read_text())["weight_map"]
    weight_map["model.layers.1.mlp.experts.0.gate_proj.weight_zero_point"] = "model-00001-of-00002.safetensors"
    with pytest.raises(UnsupportedCheckpointError, match="weight_zero_point"):
        detect(json.loads((tiny / "config.json").read_text()), weight_map)


def test_fp8_kimi_k2_is_refused_naming_the_int4_checkpoints_chord_serves() -> None:
    config = kimi_config("k2-thinking", layers=1, experts=2, hidden=64, intermediate=32)
    # Kimi-K2-Instruct's quantization_config, verbatim: block-wise FP8, not compressed-tensors INT4.
    config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                     "weight_block_size": [128, 128]}
    with pytest.raises(UnsupportedCheckpointError) as err:
        detect(config, {})
    message = str(err.value)
    assert "quant_method: expected 'compressed-tensors', found 'fp8'" in message
    assert "FP8 checkpoint" in message
    for served in ("moonshotai/Kimi-K2-Thinking", "moonshotai/Kimi-K2.5", "moonshotai/Kimi-K2.6"):
        assert served in message


def _rewrite(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    path.write_text(json.dumps(change(doc)))


NOT_OBJECTS = {
    "config is a list": ("config.json", lambda d: [d], r"config\.json: expected a JSON object, found a list"),
    "index is a list": ("model.safetensors.index.json", lambda d: [d],
                        r"model\.safetensors\.index\.json: expected a JSON object, found a list"),
    "weight_map is a list": ("model.safetensors.index.json", lambda d: {"weight_map": list(d["weight_map"])},
                             r"weight_map must map tensor names to file names"),
    "config_groups is a list": ("config.json", lambda d: {**d, "quantization_config": {
        **d["quantization_config"], "config_groups": [d["quantization_config"]["config_groups"]["group_0"]]}},
        r"quantization_config\.config_groups: expected an object of groups, found \["),
    "group is a string": ("config.json", lambda d: {**d, "quantization_config": {
        **d["quantization_config"], "config_groups": {"group_0": "int4"}}},
        r"quantization_config\.config_groups\.group_0: expected an object"),
    "hidden_size is a string": ("config.json", lambda d: {**d, "hidden_size": "256"},
                                r"config\.json hidden_size: expected a positive integer, found '256'"),
}


@pytest.mark.parametrize("case", sorted(NOT_OBJECTS))
def test_malformed_json_is_one_clean_line(tiny: Path, tmp_path: Path, case: str) -> None:
    from typer.testing import CliRunner

    from chord_pack.cli import app

    fname, change, message = NOT_OBJECTS[case]
    _rewrite(tiny / fname, change)
    for command in (["inspect", str(tiny)],
                    ["convert", str(tiny), "--layout", "test-reversed", "--output", str(tmp_path / "out")]):
        res = CliRunner().invoke(app, command)
        assert res.exit_code == 1 and isinstance(res.exception, SystemExit), (res.output, res.exception)
        assert re.search(message, " ".join(res.output.split())), res.output
    assert not (tmp_path / "out").exists() and not partial_dir(tmp_path / "out").exists()


def test_verify_of_a_file_is_one_clean_line(tiny: Path) -> None:
    from typer.testing import CliRunner

    from chord_pack.cli import app

    res = CliRunner().invoke(app, ["verify", str(tiny / "config.json")])
    assert res.exit_code == 1 and "not a directory" in res.output and "Traceback" not in res.output


def test_a_kimi_format_checkpoint_of_another_model_type_is_not_called_kimi(tiny: Path, tmp_path: Path) -> None:
    _rewrite(tiny / "config.json", lambda d: {**d, "model_type": "llama"})
    result = convert(tiny, tmp_path / "out", "test-reversed", "test_a")
    assert result.plan.info.family == "model_type=llama"
    card = (result.output / "README.md").read_text()
    assert "Kimi K2-Thinking" not in card
    assert "a Kimi-format checkpoint of model_type 'llama' (top-level quantization_config)" in card


def test_revision_with_a_local_source_is_refused(tiny: Path, tmp_path: Path) -> None:
    from chord_pack.errors import SourceError

    with pytest.raises(SourceError, match=rf"--revision abc applies to a Hub SRC, but {tiny} is a local directory"):
        convert(tiny, tmp_path / "out", "test-reversed", "test_a", revision="abc")
    assert not (tmp_path / "out").exists() and not partial_dir(tmp_path / "out").exists()
    with pytest.raises(SourceError, match="applies to a Hub SRC"):
        describe(str(tiny), "abc")
