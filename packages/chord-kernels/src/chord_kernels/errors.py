"""Exception types raised by Chord. Every message names what was expected and what was found."""

from __future__ import annotations


class ChordError(Exception):
    """Base class of every error Chord raises on purpose."""


class ChordInputError(ChordError, ValueError):
    """An argument has the wrong dtype, shape, device, layout or value."""


class ChordLayoutError(ChordError, TypeError):
    """A packed weight was handed to a kernel of another family, mode, profile or layout version."""


class NvccNotFoundError(ChordError, RuntimeError):
    """No CUDA compiler could be found to build a kernel."""


class ChordCompileError(ChordError, RuntimeError):
    """nvcc rejected generated device code; the message carries nvcc's log."""


class ChordUnsupportedError(ChordError, NotImplementedError):
    """The request is well formed but no Chord kernel implements it (GPU arch, scheme, layout)."""


class ChordPerformanceWarning(UserWarning):
    """A call works but takes a slower path than it needs to; the message says how to avoid it."""
