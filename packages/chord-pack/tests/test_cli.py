"""The typer CLI: convert, verify, inspect and the errors a user sees."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from chord_pack.cli import app

runner = CliRunner()


def test_convert_verify_inspect(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "converted"
    res = runner.invoke(app, ["convert", str(tiny), "--layout", "test-reversed", "--profile", "test_a",
                              "--output", str(out), "--shard-size", "250000"])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip().splitlines()[-1] == str(out)
    assert "memory bound" in res.output and "kimi-k2-thinking" in res.output

    res = runner.invoke(app, ["verify", str(out)])
    assert res.exit_code == 0, res.output
    assert "24 experts" in res.output and f"source {tiny}" in res.output

    res = runner.invoke(app, ["inspect", str(tiny), "--json"])
    assert res.exit_code == 0, res.output
    facts = json.loads(res.stdout)
    assert facts["family"] == "kimi-k2-thinking" and facts["experts"] == 4
    assert facts["expert_shapes [N, K]"]["down_proj"] == [256, 128]

    res = runner.invoke(app, ["inspect", str(out), "--json"])
    assert json.loads(res.stdout)["layout"] == "test-reversed"


def test_user_errors_are_one_clean_line(tiny: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["convert", str(tiny), "--layout", "masked", "--output", str(tmp_path / "o")])
    assert res.exit_code == 1
    assert "not yet supported by chord-kernels" in res.output and "Traceback" not in res.output

    res = runner.invoke(app, ["convert", str(tiny), "--layout", "test-reversed", "--profile", "h200_ep8",
                              "--output", str(tmp_path / "o")])
    assert res.exit_code == 1 and "test_a" in res.output

    res = runner.invoke(app, ["verify", str(tiny)])
    assert res.exit_code == 1 and "no chord_pack block" in res.output

    res = runner.invoke(app, ["convert", str(tmp_path / "nothing-here"), "--layout", "test-reversed"])
    assert res.exit_code == 1 and "neither an existing directory nor a Hub repo id" in res.output
