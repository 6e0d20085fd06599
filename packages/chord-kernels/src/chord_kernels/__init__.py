"""Chord: W4A16 INT4 Mixture-of-Experts kernels for Kimi K2.x on H200 and Blackwell.

The host core (formats, routing, reference, packed-weight objects, JIT runtime) is pure Python
and PyTorch; CUDA device code is compiled on first use (or ahead of time with
``python -m chord_kernels precompile``) and launched through ``cuda.bindings``.
"""

from __future__ import annotations

from chord_kernels import formats, grouped, indexed, ops, reference, routing
from chord_kernels.errors import (
    ChordCompileError,
    ChordError,
    ChordInputError,
    ChordLayoutError,
    ChordPerformanceWarning,
    ChordUnsupportedError,
    NvccNotFoundError,
)
from chord_kernels.packed import PackedWeight, available_layouts, pack, unpack
from chord_kernels.version import __version__

__all__ = [
    "ChordCompileError",
    "ChordError",
    "ChordInputError",
    "ChordLayoutError",
    "ChordPerformanceWarning",
    "ChordUnsupportedError",
    "NvccNotFoundError",
    "PackedWeight",
    "__version__",
    "available_layouts",
    "formats",
    "grouped",
    "indexed",
    "ops",
    "pack",
    "reference",
    "routing",
    "unpack",
]
