"""The whole-layer benchmark (``python -m chord_bench.layer``): selection, report files, errors;
on a GPU with humming-kernels installed, one scenario end to end."""

from __future__ import annotations

import json

import pytest
import torch

from chord_bench import layer
from chord_kernels import ChordInputError


def _result(name: str = "tp8_1024", chord: float = 500.0, humming: float = 550.0) -> layer.LayerResult:
    steps = dict(zip(layer.HUMMING_STEPS, (250.0, 6.0, 260.0, 34.0), strict=True))
    return layer.LayerResult(name, layer.LAYER_SCENARIOS[name], chord, humming, steps,
                             {"chord": 1e-3, "humming": 4e-3}, 32, (32, 64))


def test_select_keeps_the_canonical_order_and_names_what_is_known() -> None:
    assert layer.select(None) == list(layer.LAYER_SCENARIOS)
    assert layer.select(["tp8_8192", "tp8_decode160"]) == ["tp8_decode160", "tp8_8192"]
    with pytest.raises(ChordInputError, match="tp8_1024"):
        layer.select(["tp8_1023"])


def test_report_files_hold_every_result_and_the_ratio(tmp_path) -> None:
    results = [_result(), _result("tp8_8192", chord=2200.0, humming=2156.0)]
    files = layer.write(results, tmp_path / "out", {"gpu": "test"})
    payload = json.loads(files["json"].read_text())
    assert [r["scenario"] for r in payload["results"]] == ["tp8_1024", "tp8_8192"]
    assert payload["results"][0]["ratio"] == pytest.approx(1.1)
    assert payload["environment"] == {"gpu": "test"} and payload["tolerance"] == layer.TOLERANCE
    table = files["table"].read_text()
    assert "| tp8_1024 | 1024 | 500.0 (32) | 550.0 | 250.0 / 6.0 / 260.0 / 34.0 | 1.10× |" in table
    assert "0.98×" in table
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_main_refuses_unknown_scenarios_and_missing_gpu(capsys) -> None:
    assert layer.main(["--scenarios", "ep8_tok16"]) == 2
    assert "unknown layer scenario" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert layer.main(["--scenarios", "tp8_decode160"]) == 2
        assert "needs a CUDA GPU" in capsys.readouterr().err


@pytest.mark.gpu
def test_one_layer_end_to_end_against_humming() -> None:
    pytest.importorskip("humming")
    (r,) = layer.run(["tp8_decode160"], rounds=1, log=lambda m: None)
    assert r.chord_us > 0 and r.humming_us > 0
    assert all(0 <= e < layer.TOLERANCE for e in r.rel_err.values())
    assert set(r.humming_steps_us) == set(layer.HUMMING_STEPS)
