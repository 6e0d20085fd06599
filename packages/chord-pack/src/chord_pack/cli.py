"""The ``chord-pack`` command line: convert, verify, inspect, upload, demo.

Messages go to stderr and results to stdout. A path is always printed whole: no console
wrapping or ellipsis (``soft_wrap``), whatever the terminal width, so it can be copied.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from chord_pack.errors import ChordPackError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Convert Kimi K2.x INT4 checkpoints into Chord kernel-ready layouts.")


def _console(stderr: bool = True) -> Console:
    """A console that never wraps or shortens a line (made per command: COLUMNS is read then)."""
    return Console(stderr=stderr, soft_wrap=True)


def _say(label: str, message: str, style: str = "green") -> None:
    _console().print(f"[{style}]{label}[/] {escape(message)}")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that a half-written shard is removed on the way out."""


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class RichProgress:
    """Bytes, speed and ETA, one bar per phase; notes are printed above the bar. The bar appears
    with the first phase, so a command that fails before any leaves no empty bar behind."""

    def __init__(self) -> None:
        self._console = _console()
        self._bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(),
            TransferSpeedColumn(), TimeRemainingColumn(), console=self._console, transient=False,
        )
        self._task = None

    def __enter__(self) -> RichProgress:
        return self

    def __exit__(self, *exc) -> None:
        if self._task is not None:
            self._bar.__exit__(*exc)

    def start(self, description: str, total_bytes: int) -> None:
        if self._task is None:
            self._bar.__enter__()
        else:
            self._bar.update(self._task, completed=self._bar.tasks[-1].total)
        self._task = self._bar.add_task(description, total=total_bytes)

    def advance(self, nbytes: int) -> None:
        if self._task is not None:
            self._bar.advance(self._task, nbytes)

    def note(self, message: str) -> None:
        self._console.print(f"[dim]{escape(message)}")

    def shard_done(self, name: str) -> None:
        pass


def _options(values: list[str]) -> dict:
    out: dict = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--option")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def _fail(exc: Exception, code: int = 1) -> None:
    _say("error:", str(exc), "bold red")
    raise typer.Exit(code)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1000
    return str(n)


def _user_error(exc: Exception) -> bool:
    """An error meant for the user (ours, or a chord-kernels refusal), not a bug's traceback."""
    return isinstance(exc, ChordPackError) or type(exc).__module__.startswith("chord_kernels")


def _ranges(plan) -> str:
    if plan.expert_ranges is None:
        return ""
    return f", {len(plan.expert_ranges)} expert ranges of {len(plan.expert_ranges[0])}"


@app.command()
def convert(
    src: Annotated[str, typer.Argument(help="Local checkpoint directory or Hub repo id.")],
    layout: Annotated[str, typer.Option(
        help="chord-kernels layout: indexed, contiguous or masked (served by chord-vllm), or reference.")],
    profile: Annotated[str | None, typer.Option(help="Layout profile (default: the layout's first).")] = None,
    output: Annotated[Path | None, typer.Option(
        help="Output directory (default: <name>-chord-<layout> next to a local SRC, else here).")] = None,
    option: Annotated[list[str], typer.Option(help="Layout option KEY=VALUE (repeatable).")] = [],  # noqa: B006
    push_to: Annotated[str | None, typer.Option(help="Upload the result to this Hub repo.")] = None,
    private: Annotated[bool, typer.Option(help="Create the --push-to repo as private.")] = False,
    revision: Annotated[str | None, typer.Option(help="Source revision to download (Hub SRC only).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue an interrupted conversion.")] = False,
    shard_size: Annotated[int, typer.Option(min=1, help="Target shard size in bytes.")] = 5 * 10**9,
    experts_per_tensor: Annotated[int | None, typer.Option(min=1, help=(
        "Cut each packed projection into tensors of this many experts, so an expert-parallel rank "
        "reads only its own (default: E/gcd(E, 64) for the layouts chord-vllm serves, all experts "
        "otherwise)."))] = None,
) -> None:
    """Convert SRC into a pre-permuted checkpoint for chord-kernels LAYOUT (SRC is only read)."""
    from chord_pack.convert import convert as run_convert
    from chord_pack.convert import default_output, kept_summary
    from chord_pack.upload import upload

    out = output or default_output(src, layout)
    try:
        with _sigterm_raises(), RichProgress() as bar:
            result = run_convert(src, out, layout, profile, _options(option), revision=revision,
                                 resume=resume, max_shard_bytes=shard_size,
                                 experts_per_tensor=experts_per_tensor, progress=bar)
    except KeyboardInterrupt as exc:
        what = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        _say(f"{what}:", f"converting {src} into {out} stopped. {kept_summary(out)}.", "yellow")
        raise typer.Exit(143 if isinstance(exc, Terminated) else 130) from None
    except Exception as exc:
        if _user_error(exc):
            _fail(exc)
        raise
    plan = result.plan
    _say("wrote", (
        f"{result.output} ({len(result.shards)} shards, {_size(plan.total_bytes)}; "
        f"{plan.info.family}, {len(plan.info.moe_layers)} MoE layers x {plan.info.num_experts} experts, "
        f"layout {plan.layout}/{plan.profile}{_ranges(plan)}; memory bound {_size(plan.memory_bound)})"
    ))
    if push_to:
        try:
            with _sigterm_raises(), RichProgress() as bar:
                url = upload(result.output, push_to, private=private, progress=bar)
        except ChordPackError as exc:
            _fail(exc)
        _say("uploaded", url)
    typer.echo(str(result.output))


@app.command("verify")
def verify_cmd(
    path: Annotated[Path, typer.Argument(help="A chord-pack output directory.")],
    source: Annotated[str | None, typer.Option(help="Source checkpoint to compare against "
                                               "(default: the recorded one, if on this machine).")] = None,
    no_source: Annotated[bool, typer.Option("--no-source", help=(
        "Do not compare expert by expert: check hashes and the recorded source digests (against the "
        "source too when it is on this machine; nothing is downloaded)."))] = False,
) -> None:
    """Recompute hashes and check every expert unpacks to exactly the source codes and scales."""
    from chord_pack.verify import verify

    try:
        with _sigterm_raises(), RichProgress() as bar:
            report = verify(path, source=source, compare_experts=not no_source, progress=bar)
        report.raise_if_failed()
    except KeyboardInterrupt:
        _say("stopped:", f"verifying {path} was interrupted; nothing was changed", "yellow")
        raise typer.Exit(130) from None
    except ChordPackError as exc:
        _fail(exc)
    if report.source:
        against = (f"checked against the source {report.source.describe()}: {report.experts_compared} "
                   f"experts and {report.tensors_compared} other tensors")
    else:
        against = f"not checked against the source: {report.unchecked}"
    _say("ok", f"{path}: {report.shards_checked} shards hashed, {report.projections_checked} projections "
               f"unpacked to their recorded source digests; {against}")


@app.command()
def inspect(
    src: Annotated[str, typer.Argument(help="Local checkpoint directory or Hub repo id.")],
    revision: Annotated[str | None, typer.Option(help="Hub revision (Hub SRC only).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Say what SRC is: family, quant scheme, experts and their shapes, size (reads headers only).

    Exits non-zero when a local checkpoint is damaged (a shard missing, truncated or short).
    """
    from chord_pack.describe import describe

    try:
        with RichProgress() as bar:
            facts = describe(src, revision, progress=bar)
    except ChordPackError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps(facts, indent=2))
        return
    width = max(len(k) for k in facts)
    for key, value in facts.items():
        typer.echo(f"{key:<{width}}  {value if isinstance(value, str) else json.dumps(value)}")


@app.command("upload")
def upload_cmd(
    path: Annotated[Path, typer.Argument(help="A chord-pack output directory.")],
    repo_id: Annotated[str, typer.Argument(help="Target Hub repo id.")],
    private: Annotated[bool, typer.Option(help="Create the repo as private.")] = False,
    revision: Annotated[str | None, typer.Option(help="Branch to push to.")] = None,
) -> None:
    """Verify PATH, then upload it to REPO_ID (refuses a directory that fails verify)."""
    from chord_pack.upload import upload

    try:
        with _sigterm_raises(), RichProgress() as bar:
            url = upload(path, repo_id, private=private, revision=revision, progress=bar)
    except KeyboardInterrupt:
        _say("stopped:", f"uploading {path} to {repo_id} was interrupted (a Hub commit lands whole or not at "
                         "all); run the same command again to finish it", "yellow")
        raise typer.Exit(130) from None
    except ChordPackError as exc:
        _fail(exc)
    _say("uploaded", url)


@app.command()
def demo(
    workdir: Annotated[Path, typer.Argument(help="New or empty directory to write the demo into (kept).")] = Path(
        "chord-pack-demo"),
    layout: Annotated[str | None, typer.Option(help="Layout (default: indexed if available).")] = None,
    profile: Annotated[str | None, typer.Option(help="Layout profile.")] = None,
    style: Annotated[str, typer.Option(help="k2-thinking or k2.5.")] = "k2-thinking",
) -> None:
    """Convert an embedded tiny Kimi checkpoint, verify it, and compare reference MoE outputs."""
    from chord_pack.demo import explain, run_demo

    try:
        summary = run_demo(workdir, layout, profile, style)  # type: ignore[arg-type]
    except Exception as exc:
        if _user_error(exc):
            _fail(exc)
        raise
    if not summary["moe_output_equal"]:
        _fail(ChordPackError("the MoE output from the converted weights differs from the source"))
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        typer.echo(f"{key:<{width}}  {value}")
    for line in explain(summary, kept=True):
        typer.echo(line)


def main() -> None:  # pragma: no cover - console entry for `python -m chord_pack`
    sys.exit(app())
