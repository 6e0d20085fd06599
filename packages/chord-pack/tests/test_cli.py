"""The typer CLI: convert, verify, inspect and the errors a user sees."""

from __future__ import annotations

import errno
import json
import os
import signal
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
    res = runner.invoke(app, ["convert", str(tiny), "--layout", "masked", "--profile", "test_a",
                              "--output", str(tmp_path / "o")])
    assert res.exit_code == 1
    assert "layout 'masked' has no profile 'test_a'" in res.output and "Traceback" not in res.output

    res = runner.invoke(app, ["convert", str(tiny), "--layout", "test-reversed", "--profile", "h200_ep8",
                              "--output", str(tmp_path / "o")])
    assert res.exit_code == 1 and "test_a" in res.output

    res = runner.invoke(app, ["verify", str(tiny)])
    assert res.exit_code == 1 and "no chord_pack block" in res.output

    res = runner.invoke(app, ["convert", str(tmp_path / "nothing-here"), "--layout", "test-reversed"])
    assert res.exit_code == 1 and "neither an existing directory nor a Hub repo id" in res.output


def _long_dir(tmp_path: Path) -> Path:
    """A directory whose path is far longer than a 40-column terminal."""
    return tmp_path.joinpath(*["a-rather-long-directory-name-to-overflow-a-terminal"] * 4)


def _lines_with(output: str, text: str) -> list[str]:
    return [line for line in output.splitlines() if text in line]


def test_paths_are_never_wrapped_or_shortened(tmp_path: Path) -> None:
    """At 40 columns and with a 230-character path, every path the CLI reports is whole, on one line."""
    from chord_pack.demo import write_tiny_kimi_checkpoint

    base = _long_dir(tmp_path)
    src = write_tiny_kimi_checkpoint(base / "src", seed=3)
    out = base / "converted"
    env = {"COLUMNS": "40"}
    res = runner.invoke(app, ["convert", str(src), "--layout", "test-reversed", "--output", str(out)], env=env)
    assert res.exit_code == 0, res.output
    assert _lines_with(res.output, f"wrote {out} (")
    res = runner.invoke(app, ["verify", str(out)], env=env)
    assert res.exit_code == 0, res.output
    assert _lines_with(res.output, f"ok {out}:") and _lines_with(res.output, f"the source {src}:")
    res = runner.invoke(app, ["inspect", str(out)], env=env)
    assert res.exit_code == 0 and _lines_with(res.stdout, str(out))
    res = runner.invoke(app, ["verify", str(src)], env=env)
    assert res.exit_code == 1 and _lines_with(res.output, f"{src} failed verification")
    assert "…" not in res.output


def test_default_output_is_beside_the_source_never_inside(tiny: Path, monkeypatch) -> None:
    """`cd ckpt && chord-pack convert . --layout X` writes ../<name>-chord-X; the source is only read."""
    before = sorted(p.relative_to(tiny) for p in tiny.rglob("*"))
    monkeypatch.chdir(tiny)
    res = runner.invoke(app, ["convert", ".", "--layout", "test-reversed"])
    assert res.exit_code == 0, res.output
    want = tiny.parent / "src-chord-test-reversed"
    assert res.stdout.strip().splitlines()[-1] == str(want)
    assert (want / "config.json").is_file()
    assert sorted(p.relative_to(tiny) for p in tiny.rglob("*")) == before
    assert not [p for p in tiny.parent.iterdir() if p.name.startswith("-")]

    res = runner.invoke(app, ["convert", ".", "--layout", "test-reversed", "--output", "inside"])
    assert res.exit_code == 1 and "inside the source checkpoint" in res.output
    assert sorted(p.relative_to(tiny) for p in tiny.rglob("*")) == before


def _error_line(output: str) -> str:
    lines = _lines_with(output, "error:")
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


def test_unwritable_output_is_one_line(tiny: Path, tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    res = runner.invoke(app, ["convert", str(tiny), "--layout", "test-reversed", "--output", str(blocker / "out")])
    assert res.exit_code == 1
    line = _error_line(res.output)
    assert f"cannot create {blocker}/.out.chord-pack-partial" in line and "Nothing was kept" in line

    def refuse(self, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    res = runner.invoke(app, ["convert", str(tiny), "--layout", "test-reversed", "--output", str(tmp_path / "o")])
    line = _error_line(res.output)
    assert res.exit_code == 1 and "Permission denied" in line and "make it writable, then rerun" in line


def test_disk_full_says_what_was_kept_and_how_to_resume(tiny: Path, tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "out"
    real_fsync, calls = os.fsync, []

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".incomplete"):  # shards only (journals are synced too)
            calls.append(fd)
        if len(calls) == 2:  # the second shard hits a full disk
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    args = ["convert", str(tiny), "--layout", "test-reversed", "--output", str(out), "--shard-size", "300000"]
    res = runner.invoke(app, args)
    assert res.exit_code == 1
    line = _error_line(res.output)
    partial = tmp_path / ".out.chord-pack-partial"
    assert f"cannot write {partial}/model-00002-of-" in line and ".incomplete: No space left on device" in line
    assert f"Kept 1 finished shard in {partial}; free disk space, then rerun the same command with --resume" in line
    assert not list(partial.glob("*.incomplete"))
    monkeypatch.setattr(os, "fsync", real_fsync)
    res = runner.invoke(app, [*args, "--resume"])
    assert res.exit_code == 0, res.output


def test_sigterm_says_what_was_kept(tiny: Path, tmp_path: Path, monkeypatch) -> None:
    from chord_pack.cli import RichProgress

    monkeypatch.setattr(RichProgress, "shard_done", lambda self, name: os.kill(os.getpid(), signal.SIGTERM))
    before = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "out"
    args = ["convert", str(tiny), "--layout", "test-reversed", "--output", str(out), "--shard-size", "300000"]
    res = runner.invoke(app, args)
    assert res.exit_code == 143, res.output
    partial = tmp_path / ".out.chord-pack-partial"
    lines = _lines_with(res.output, "terminated (SIGTERM)")
    assert len(lines) == 1 and f"Kept 1 finished shard in {partial}" in lines[0] and "--resume" in lines[0]
    assert signal.getsignal(signal.SIGTERM) is before  # the CLI's handler lives only while it converts
    monkeypatch.undo()
    res = runner.invoke(app, [*args, "--resume"])
    assert res.exit_code == 0, res.output


def test_inspect_fails_on_damaged_checkpoints(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["convert", str(tiny), "--layout", "test-reversed", "--output", str(out)]).exit_code == 0
    shard = sorted(out.glob("*.safetensors"))[0]
    shard.write_bytes(shard.read_bytes()[:-8])
    res = runner.invoke(app, ["inspect", str(out)])
    assert res.exit_code == 1 and shard.name in _error_line(res.output)

    first, last = sorted(tiny.glob("*.safetensors"))
    last.write_bytes(last.read_bytes()[:-1000])
    res = runner.invoke(app, ["inspect", str(tiny)])
    assert res.exit_code == 1 and f"{last} is truncated" in _error_line(res.output)
    first.unlink()
    res = runner.invoke(app, ["inspect", str(tiny)])
    assert res.exit_code == 1 and f"{first}: listed in model.safetensors.index.json but missing" in res.output


def test_layout_and_shard_size_refusals(tiny: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["convert", str(tiny), "--layout", "bogus", "--output", str(tmp_path / "o")])
    line = _error_line(res.output)
    assert res.exit_code == 1 and "unknown layout 'bogus'; valid layouts: " in line
    assert "test-reversed" in line and "contiguous, indexed, masked" in line and "not yet" not in line

    res = runner.invoke(app, ["convert", str(tiny), "--layout", "test-reversed", "--experts-per-tensor", "2",
                              "--output", str(tmp_path / "o")])
    line = _error_line(res.output)
    assert res.exit_code == 1 and "does not pack experts independently" in line and "4 experts per tensor" in line

    res = runner.invoke(app, ["convert", str(tiny), "--layout", "test-reversed", "--shard-size", "0",
                              "--output", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--shard-size" in res.output
    assert list(tmp_path.iterdir()) == [tiny]


def test_verify_against_another_checkpoint_is_one_message(tiny: Path, tmp_path: Path) -> None:
    from chord_pack.demo import write_tiny_kimi_checkpoint

    out = tmp_path / "out"
    assert runner.invoke(app, ["convert", str(tiny), "--layout", "test-reversed", "--output", str(out)]).exit_code == 0
    other = write_tiny_kimi_checkpoint(tmp_path / "other", "k2.5", layers=3, experts=6, hidden=64, intermediate=32)
    res = runner.invoke(app, ["verify", str(out), "--source", str(other)])
    assert res.exit_code == 1
    problems = [line for line in res.output.splitlines() if line.startswith("  - ")]
    assert len(problems) == 1 and f"{other} is not the checkpoint {out} was converted from" in problems[0]

    same_shape = write_tiny_kimi_checkpoint(tmp_path / "same-shape", seed=99)
    res = runner.invoke(app, ["verify", str(out), "--source", str(same_shape)])
    problems = [line for line in res.output.splitlines() if line.startswith("  - ")]
    assert len(problems) == 1 and "none of its 6 expert projections match" in problems[0]


def test_demo_tells_a_newcomer_what_happened_and_what_next(tmp_path: Path) -> None:
    workdir = _long_dir(tmp_path) / "demo"
    res = runner.invoke(app, ["demo", str(workdir)], env={"COLUMNS": "40"})
    assert res.exit_code == 0, res.output
    out = workdir / "tiny-kimi-k2-thinking-chord-indexed"
    assert (out / "config.json").is_file()
    text = res.stdout
    assert "'indexed / h200_ep8' is the layout and the profile" in text and "8-way expert" in text
    assert "The converted checkpoint is kept in\n" in text and _lines_with(text, f"  {out}")
    for command in ("chord-pack convert moonshotai/Kimi-K2-Thinking --layout indexed", "chord-pack verify",
                    "nox -s tests"):
        assert command in text
    res = runner.invoke(app, ["demo", str(workdir)])
    assert res.exit_code == 1 and "is not empty" in _error_line(res.output)
