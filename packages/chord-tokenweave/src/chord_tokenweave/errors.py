"""Exceptions raised by chord_tokenweave (stand-alone: no dependency on chord-kernels)."""

from __future__ import annotations


class TokenWeaveError(RuntimeError):
    """Base class for chord_tokenweave errors."""


class TokenWeaveInputError(TokenWeaveError, ValueError):
    """A tensor or argument does not have the expected shape, dtype, device or value."""


class MulticastForbiddenError(TokenWeaveError):
    """NVLink multicast/NVLS was found enabled; it must never be used on our machines."""


class BarrierTimeoutError(TokenWeaveError, TimeoutError):
    """A peer did not reach a barrier of the fused kernel within the timeout."""


class TableError(TokenWeaveError, ValueError):
    """A profiler table is missing, malformed, or does not match the model it is used for."""
