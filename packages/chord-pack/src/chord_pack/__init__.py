"""chord-pack: convert Kimi K2.x INT4 checkpoints into Chord kernel-ready layouts, verify, upload."""

from __future__ import annotations

__version__ = "0.1.0"
