"""The ``chord-pack`` command line: convert, verify, inspect, upload."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from chord_pack.errors import ChordPackError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Convert Kimi K2.x INT4 checkpoints into Chord kernel-ready layouts.")
console = Console(stderr=True)


class RichProgress:
    """Bytes, speed and ETA, one bar per phase."""

    def __init__(self) -> None:
        self._bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(),
            TransferSpeedColumn(), TimeRemainingColumn(), console=console, transient=False,
        )
        self._task = None

    def __enter__(self) -> RichProgress:
        self._bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._bar.__exit__(*exc)

    def start(self, description: str, total_bytes: int) -> None:
        if self._task is not None:
            self._bar.update(self._task, completed=self._bar.tasks[-1].total)
        self._task = self._bar.add_task(description, total=total_bytes)

    def advance(self, nbytes: int) -> None:
        if self._task is not None:
            self._bar.advance(self._task, nbytes)

    def note(self, message: str) -> None:
        self._bar.console.print(f"[dim]{message}")

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


def _fail(exc: Exception) -> None:
    console.print(f"[bold red]error:[/] {exc}")
    raise typer.Exit(1)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1000
    return str(n)


@app.command()
def convert(
    src: Annotated[str, typer.Argument(help="Local checkpoint directory or Hub repo id.")],
    layout: Annotated[str, typer.Option(help="chord-kernels layout: indexed, contiguous, masked.")],
    profile: Annotated[str | None, typer.Option(help="Layout profile (default: the layout's first).")] = None,
    output: Annotated[Path | None, typer.Option(help="Output directory (default: <name>-chord-<layout>).")] = None,
    option: Annotated[list[str], typer.Option(help="Layout option KEY=VALUE (repeatable).")] = [],  # noqa: B006
    push_to: Annotated[str | None, typer.Option(help="Upload the result to this Hub repo.")] = None,
    private: Annotated[bool, typer.Option(help="Create the --push-to repo as private.")] = False,
    revision: Annotated[str | None, typer.Option(help="Source revision to download (Hub SRC only).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue an interrupted conversion.")] = False,
    shard_size: Annotated[int, typer.Option(help="Target shard size in bytes.")] = 5 * 10**9,
) -> None:
    """Convert SRC into a pre-permuted checkpoint for chord-kernels LAYOUT."""
    from chord_pack.convert import convert as run_convert
    from chord_pack.convert import partial_dir
    from chord_pack.upload import upload

    name = Path(src.rstrip("/")).name
    out = output or Path(f"{name}-chord-{layout}")
    try:
        with RichProgress() as bar:
            result = run_convert(src, out, layout, profile, _options(option), revision=revision,
                                 resume=resume, max_shard_bytes=shard_size, progress=bar)
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted[/]; finished shards are kept in {partial_dir(out)} — "
                      "rerun with --resume to continue")
        raise typer.Exit(130) from None
    except ChordPackError as exc:
        _fail(exc)
    except Exception as exc:
        if type(exc).__module__.startswith("chord_kernels"):
            _fail(exc)
        raise
    plan = result.plan
    console.print(
        f"[green]wrote[/] {result.output} ({len(result.shards)} shards, {_size(plan.total_bytes)}; "
        f"{plan.info.family}, {len(plan.info.moe_layers)} MoE layers x {plan.info.num_experts} experts, "
        f"layout {plan.layout}/{plan.profile}; memory bound {_size(plan.memory_bound)})"
    )
    if push_to:
        try:
            url = upload(result.output, push_to, private=private)
        except ChordPackError as exc:
            _fail(exc)
        console.print(f"[green]uploaded[/] {url}")
    typer.echo(str(result.output))


@app.command("verify")
def verify_cmd(
    path: Annotated[Path, typer.Argument(help="A chord-pack output directory.")],
    source: Annotated[str | None, typer.Option(help="Source checkpoint to compare against "
                                               "(default: the recorded one, if on disk).")] = None,
    no_source: Annotated[bool, typer.Option("--no-source", help="Only hashes and recorded digests.")] = False,
) -> None:
    """Recompute hashes and check every expert unpacks to exactly the source codes and scales."""
    from chord_pack.verify import verify

    try:
        with RichProgress() as bar:
            report = verify(path, source=source, use_recorded_source=not no_source, progress=bar)
        report.raise_if_failed()
    except ChordPackError as exc:
        _fail(exc)
    against = f"source {report.source.describe()}" if report.source else "recorded source digests only"
    console.print(
        f"[green]ok[/] {path}: {report.shards_checked} shards hashed, {report.projections_checked} "
        f"projections unpacked, {report.experts_compared} experts and {report.tensors_compared} "
        f"other tensors compared ({against})"
    )


@app.command()
def inspect(
    src: Annotated[str, typer.Argument(help="Local checkpoint directory or Hub repo id.")],
    revision: Annotated[str | None, typer.Option(help="Hub revision.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Say what SRC is: family, quant scheme, experts and their shapes, size (reads headers only)."""
    from chord_pack.describe import describe

    try:
        facts = describe(src, revision)
    except ChordPackError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps(facts, indent=2))
        return
    table = Table(show_header=False, box=None)
    for key, value in facts.items():
        table.add_row(f"[bold]{key}", value if isinstance(value, str) else json.dumps(value))
    Console().print(table)


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
        url = upload(path, repo_id, private=private, revision=revision)
    except ChordPackError as exc:
        _fail(exc)
    console.print(f"[green]uploaded[/] {url}")


@app.command()
def demo(
    workdir: Annotated[Path, typer.Argument(help="Empty directory to write the demo into.")] = Path("chord-pack-demo"),
    layout: Annotated[str | None, typer.Option(help="Layout (default: indexed if available).")] = None,
    profile: Annotated[str | None, typer.Option(help="Layout profile.")] = None,
    style: Annotated[str, typer.Option(help="k2-thinking or k2.5.")] = "k2-thinking",
) -> None:
    """Convert an embedded tiny Kimi checkpoint, verify it, and compare reference MoE outputs."""
    from chord_pack.demo import run_demo

    try:
        summary = run_demo(workdir, layout, profile, style)  # type: ignore[arg-type]
    except ChordPackError as exc:
        _fail(exc)
    table = Table(show_header=False, box=None)
    for key, value in summary.items():
        table.add_row(f"[bold]{key}", str(value))
    Console().print(table)
    if not summary["moe_output_equal"]:
        _fail(ChordPackError("the MoE output from the converted weights differs from the source"))


def main() -> None:  # pragma: no cover - console entry for `python -m chord_pack`
    sys.exit(app())
