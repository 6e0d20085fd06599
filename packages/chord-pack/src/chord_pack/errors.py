"""Exceptions raised by chord-pack. Every message names the file and tensor involved."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class ChordPackError(Exception):
    """Base class of every error chord-pack raises on purpose (the CLI prints these cleanly).

    ``kept`` says what a failed conversion left behind and how to go on; it is appended to the
    message, so that one line says what failed, where, what was kept and how to resume.
    """

    kept: str | None = None

    def __str__(self) -> str:
        message = super().__str__()
        return f"{message}. {self.kept}" if self.kept else message


class CheckpointError(ChordPackError):
    """A checkpoint file is damaged or inconsistent (truncated shard, missing tensor, bad dtype)."""


class UnsupportedCheckpointError(ChordPackError):
    """The checkpoint is readable but is not int4 / group-32 / symmetric ``pack-quantized``."""


class SourceError(ChordPackError):
    """The source (local directory or Hub repo) could not be resolved or downloaded."""


class HubTimeoutError(SourceError):
    """The Hugging Face Hub (or HF_ENDPOINT) did not answer in time."""


class OutputError(ChordPackError):
    """The output directory (or an interrupted run's partial directory) is in the way or unwritable."""


class VerifyError(ChordPackError):
    """A converted checkpoint failed verification; ``problems`` lists every finding."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.problems = problems
        listing = "\n  - ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"{path} failed verification:\n  - {listing}{more}")


@contextmanager
def os_errors(action: str, path: str | Path, error: type[ChordPackError] = OutputError) -> Iterator[None]:
    """Turn an ``OSError`` inside the block into ``error``: "cannot <action> <path>: <reason>"."""
    try:
        yield
    except OSError as exc:
        raise error(f"cannot {action} {path}: {exc.strerror or exc}") from exc
