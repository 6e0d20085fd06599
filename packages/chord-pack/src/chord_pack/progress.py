"""Progress reporting hooks. The converter reports bytes; the CLI renders them with rich."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """What long-running chord-pack operations report as they go."""

    def start(self, description: str, total_bytes: int) -> None:
        """A phase begins; ``total_bytes`` will be advanced in total."""

    def advance(self, nbytes: int) -> None:
        """``nbytes`` more bytes have been processed."""

    def note(self, message: str) -> None:
        """A line worth showing the user (a resumed shard, a finished projection)."""

    def shard_done(self, name: str) -> None:
        """Shard ``name`` is complete on disk and recorded (a safe point to stop)."""


class NullProgress:
    """Reports nothing."""

    def start(self, description: str, total_bytes: int) -> None:
        pass

    def advance(self, nbytes: int) -> None:
        pass

    def note(self, message: str) -> None:
        pass

    def shard_done(self, name: str) -> None:
        pass
