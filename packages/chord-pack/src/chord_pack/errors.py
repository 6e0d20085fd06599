"""Exceptions raised by chord-pack. Every message names the file and tensor involved."""

from __future__ import annotations


class ChordPackError(Exception):
    """Base class of every error chord-pack raises on purpose (the CLI prints these cleanly)."""


class CheckpointError(ChordPackError):
    """A checkpoint file is damaged or inconsistent (truncated shard, missing tensor, bad dtype)."""


class UnsupportedCheckpointError(ChordPackError):
    """The checkpoint is readable but is not int4 / group-32 / symmetric ``pack-quantized``."""


class SourceError(ChordPackError):
    """The source (local directory or Hub repo) could not be resolved or downloaded."""


class OutputError(ChordPackError):
    """The output directory (or an interrupted run's partial directory) is in the way."""


class VerifyError(ChordPackError):
    """A converted checkpoint failed verification; ``problems`` lists every finding."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.problems = problems
        listing = "\n  - ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"{path} failed verification:\n  - {listing}{more}")
