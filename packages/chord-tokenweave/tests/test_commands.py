from __future__ import annotations

from pathlib import Path

import pytest

from chord_tokenweave.cli import main
from chord_tokenweave.table import SplitTable


def test_split_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["split", "--model", "llama-3.3-70b", "--world-size", "2", "--tokens", "8192"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1].split()
    assert line[0] == "8192" and int(line[1]) % 128 == 0 and int(line[-1]) >= 0


def test_profile_command_writes_a_loadable_table(tmp_path: Path) -> None:
    out = tmp_path / "table.json"
    rc = main(["profile", "--device", "cpu", "--scale", "tiny", "--world-size", "2",
               "--tokens", "64,256", "--layers", "1", "--output", str(out), "--timeout", "120"])
    assert rc == 0
    table = SplitTable.load(out, world_size=2, hidden=64)
    assert sorted(table.entries) == [64, 256]
    assert table.entries[256].split == 128  # the only aligned split of 256 tokens
    assert table.entries[64].split is None and not table.entries[64].weave
    assert all(e.times_us["fused_only"] > 0 for e in table.entries.values())


def test_bad_token_list_is_refused() -> None:
    with pytest.raises(SystemExit):
        main(["split", "--tokens", "12,abc"])


@pytest.mark.parametrize("command", [["profile", "--output", "t.json"], ["bench", "kernel"], ["bench", "layer"]])
def test_gpu_commands_refuse_too_few_gpus_before_starting(command: list[str], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--world-size", "2"])
    assert exit_.value.code == 2
    assert "--world-size 2 needs 2 CUDA GPUs, found 1" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written (bench's --out included)


def test_layer_benchmark_code_path_on_cpu(tmp_path: Path) -> None:
    """The layer benchmark's code (four variants, table decisions, errors) on 2 gloo ranks."""
    from chord_tokenweave.bench import layer_worker
    from chord_tokenweave.distributed import launch
    from chord_tokenweave.table import SplitTable, TableEntry

    table = SplitTable(entries={256: TableEntry(split=128, num_ctas=8, weave=True)},
                       threshold=256, world_size=2, hidden=64, model="tiny-dense")
    path = table.save(tmp_path / "t.json")
    res = launch(layer_worker, 2, "llama-3.3-70b", [256], 1, 8, str(path), "cpu", "tiny",
                 timeout_s=120)[0]
    row = res["rows"][0]
    assert "errors" not in row, row.get("errors")
    assert row["split"] == 128 and row["table_decision"] == {"weave": True, "split": 128,
                                                             "num_ctas": 8}
    for key in ("sequential_us", "fused_us", "tokenweave_us", "nocomm_us", "table_us"):
        assert row[key] > 0
    assert row["fused_max_err"] < 0.1 and row["tokenweave_max_err"] < 0.1
    assert row["check_ok"] and row["x_same_on_ranks"] and row["sequential_same_on_ranks"]
    assert row["boundary_fused_bad"] == [] and row["boundary_tokenweave_bad"] == []
    assert row["boundary_tokenweave_max_y_err"] < 0.05


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["split", "--num-sms", "0"], "--num-sms: expected a positive integer, got '0'"),
        (["split", "--world-size", "0"], "--world-size: expected a positive integer, got '0'"),
        (["split", "--world-size", "3"], "num_heads=64 is not divisible by world size 3"),
        (["profile", "--device", "cpu", "--scale", "tiny", "--world-size", "0", "--output",
          "t.json"], "--world-size: expected a positive integer"),
        (["profile", "--device", "cpu", "--scale", "tiny", "--world-size", "3", "--output",
          "t.json"], "tiny-dense: num_heads=8 is not divisible by world size 3"),
        (["profile", "--device", "cpu", "--scale", "tiny", "--layers", "0", "--output",
          "t.json"], "--layers: expected a positive integer"),
        (["profile", "--device", "cpu", "--scale", "tiny", "--timeout", "-1", "--output",
          "t.json"], "--timeout: expected a positive number"),
        (["bench", "layer", "--table", "bad.json"], "'weave' must be bool, found 'false'"),
        (["bench", "layer", "--table", "missing.json"], "no split table at missing.json"),
    ],
)
def test_bad_values_are_usage_errors(argv: list[str], message: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Refused with exit status 2 and a message before any process starts (these used to be
    ZeroDivisionError / IndexError tracebacks, or splits printed for an impossible TP size)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text(
        '{"format": "chord-tokenweave-table", "version": 1, "world_size": 2, "hidden": 8192, '
        '"threshold": null, "entries": {"256": {"split": 128, "num_ctas": 8, "weave": "false"}}}'
    )
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]
