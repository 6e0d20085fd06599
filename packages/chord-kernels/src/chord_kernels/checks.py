"""Argument validation shared by every public entry point.

Checks run on metadata only (dtype, shape, device, strides), so they never synchronize the GPU
and are safe inside CUDA-graph capture.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch

from chord_kernels.errors import ChordInputError

Dims = Sequence[int | None]


def require_tensor(
    name: str,
    value: object,
    *,
    dtype: torch.dtype | Sequence[torch.dtype] | None = None,
    ndim: int | Sequence[int] | None = None,
    shape: Dims | None = None,
    device: torch.device | str | None = None,
    contiguous: bool = False,
) -> torch.Tensor:
    """Return ``value`` if it is a tensor matching every given constraint, else raise.

    ``shape`` entries of ``None`` match any size. ``device`` may be a device type ("cuda") or a
    full device ("cuda:1").
    """
    if not isinstance(value, torch.Tensor):
        raise ChordInputError(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
    if dtype is not None:
        allowed = (dtype,) if isinstance(dtype, torch.dtype) else tuple(dtype)
        if value.dtype not in allowed:
            want = " or ".join(str(d) for d in allowed)
            raise ChordInputError(f"{name}: expected dtype {want}, got {value.dtype}")
    if ndim is not None:
        allowed_ndim = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if value.dim() not in allowed_ndim:
            raise ChordInputError(
                f"{name}: expected {' or '.join(map(str, allowed_ndim))} dimensions, "
                f"got shape {tuple(value.shape)}"
            )
    if shape is not None:
        want_shape = tuple(shape)
        if value.dim() != len(want_shape) or any(
            w is not None and w != s for w, s in zip(want_shape, value.shape, strict=False)
        ):
            pretty = "[" + ", ".join("*" if w is None else str(w) for w in want_shape) + "]"
            raise ChordInputError(f"{name}: expected shape {pretty}, got {list(value.shape)}")
    if device is not None:
        want_dev = torch.device(device)
        got = value.device
        if got.type != want_dev.type or (want_dev.index is not None and got.index != want_dev.index):
            raise ChordInputError(f"{name}: expected a tensor on {want_dev}, got one on {got}")
    if contiguous and not value.is_contiguous():
        raise ChordInputError(
            f"{name}: expected a contiguous tensor, got strides {tuple(value.stride())} "
            f"for shape {tuple(value.shape)} (call .contiguous())"
        )
    return value


def output_tensor(
    out: torch.Tensor | None,
    shape: Sequence[int],
    *,
    dtype: torch.dtype,
    device: torch.device,
    contiguous: bool = False,
) -> torch.Tensor:
    """``out`` once checked to be a ``dtype`` tensor of ``shape`` on ``device``, or a new empty one."""
    if out is None:
        return torch.empty(tuple(shape), dtype=dtype, device=device)
    return require_tensor("out", out, dtype=dtype, shape=shape, device=device, contiguous=contiguous)


def require_same_device(**tensors: torch.Tensor) -> torch.device:
    """All tensors must live on one device; returns it."""
    devices = {name: t.device for name, t in tensors.items()}
    first = next(iter(devices.values()))
    if any(d != first for d in devices.values()):
        listing = ", ".join(f"{n} on {d}" for n, d in devices.items())
        raise ChordInputError(f"expected all tensors on one device, got {listing}")
    return first


def require_multiple(name: str, value: int, multiple: int, what: str = "") -> int:
    """``value`` must be a positive multiple of ``multiple``."""
    if value <= 0 or value % multiple:
        suffix = f" ({what})" if what else ""
        raise ChordInputError(f"{name}: expected a positive multiple of {multiple}{suffix}, got {value}")
    return value


def require_int(name: str, value: object, *, minimum: int = 0) -> int:
    """``value`` as a Python int: an integer (a NumPy one too; not a bool, float or tensor) of at least
    ``minimum``."""
    try:
        number = None if isinstance(value, bool | torch.Tensor) else operator.index(value)
    except TypeError:
        number = None
    if number is None or number < minimum:
        bound = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer >= {minimum}")
        raise ChordInputError(f"{name}: expected {bound}, got {value!r}")
    return number
