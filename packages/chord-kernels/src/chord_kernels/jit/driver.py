"""The thin layer over ``cuda.bindings.driver``: load cubins, look up kernels, launch on a stream.

Imported lazily so that ``import chord_kernels`` works on machines without CUDA.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import torch

from chord_kernels.errors import ChordError, ChordInputError


class CudaDriverError(ChordError, RuntimeError):
    """A CUDA driver call failed."""


@functools.cache
def _driver() -> Any:
    try:
        from cuda.bindings import driver
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ChordError(
            "Chord launches kernels through cuda-bindings; `pip install cuda-bindings` "
            f"(import failed: {exc})"
        ) from exc
    return driver


def check(result: tuple, what: str) -> Any:
    """Unwrap a cuda-bindings ``(error, *values)`` tuple, raising on failure."""
    drv = _driver()
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != drv.CUresult.CUDA_SUCCESS:
        _, name = drv.cuGetErrorName(err)
        _, text = drv.cuGetErrorString(err)
        raise CudaDriverError(
            f"{what} failed: {name.decode() if name else err} ({text.decode() if text else ''})"
        )
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def ensure_context(device: torch.device) -> None:
    """Make torch's primary context of ``device`` current on this thread."""
    torch.cuda.init()
    drv = _driver()
    with torch.cuda.device(device):
        torch.cuda.current_stream(device)  # forces torch to create and bind the primary context
        ctx = check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if ctx is None or int(ctx) == 0:
            dev = check(drv.cuDeviceGet(device.index or 0), "cuDeviceGet")
            primary = check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
            check(drv.cuCtxSetCurrent(primary), "cuCtxSetCurrent")


def load_function(cubin: bytes, entry: str, device: torch.device) -> Any:
    """Load ``cubin`` into ``device``'s context and return the ``CUfunction`` named ``entry``."""
    drv = _driver()
    ensure_context(device)
    with torch.cuda.device(device):
        module = check(drv.cuModuleLoadData(cubin), "cuModuleLoadData")
        return check(drv.cuModuleGetFunction(module, entry.encode()), f"cuModuleGetFunction({entry})")


@functools.cache
def max_dynamic_smem(device_index: int) -> int:
    """Largest opt-in dynamic shared memory per block on that device."""
    drv = _driver()
    attr = drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    return int(check(drv.cuDeviceGetAttribute(attr, device_index), "cuDeviceGetAttribute"))


def set_dynamic_smem(function: Any, smem: int) -> None:
    drv = _driver()
    attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check(drv.cuFuncSetAttribute(function, attr, smem), "cuFuncSetAttribute(max dynamic smem)")


def launch(
    function: Any,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    params: list[int],
    smem: int,
    stream: torch.cuda.Stream,
) -> None:
    """``cuLaunchKernel`` with a ``void**`` of the parameter values' addresses (the caller keeps
    the values alive for the call)."""
    drv = _driver()
    pointers = (ctypes.c_void_p * len(params))(*params)
    check(
        drv.cuLaunchKernel(
            function, *grid, *block, smem, drv.CUstream(stream.cuda_stream),
            ctypes.addressof(pointers), 0,
        ),
        "cuLaunchKernel",
    )


def require_cuda_device(tensor: torch.Tensor, device: torch.device, name: str) -> None:
    if tensor.device != device:
        raise ChordInputError(f"{name}: expected a tensor on {device}, got one on {tensor.device}")
