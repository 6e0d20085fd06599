"""``CudaKernel``: one CUDA C++ translation unit -> cached cubin -> launchable function."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from chord_kernels.errors import ChordInputError, NvccNotFoundError
from chord_kernels.jit import cache, nvcc


@dataclass(frozen=True)
class KernelArg:
    """A scalar kernel argument with its exact C type."""

    value: int | float
    ctype: type[ctypes._SimpleCData]

    def as_ctype(self) -> ctypes._SimpleCData:
        return self.ctype(self.value)


def i32(value: int) -> KernelArg:
    """``int32_t`` argument."""
    return KernelArg(int(value), ctypes.c_int32)


def u32(value: int) -> KernelArg:
    """``uint32_t`` argument."""
    return KernelArg(int(value), ctypes.c_uint32)


def i64(value: int) -> KernelArg:
    """``int64_t`` argument."""
    return KernelArg(int(value), ctypes.c_int64)


def f32(value: float) -> KernelArg:
    """``float`` argument."""
    return KernelArg(float(value), ctypes.c_float)


Arg = torch.Tensor | KernelArg | ctypes.Structure | None
"""A tensor (passed as its device pointer), a typed scalar, None (a null pointer), or a ctypes
struct whose fields are consecutive kernel parameters (built by
:meth:`chord_kernels.jit.args.ArgStruct.pack`)."""


def _dims(name: str, dims: Sequence[int]) -> tuple[int, int, int]:
    d = tuple(int(x) for x in dims)
    if not 1 <= len(d) <= 3 or any(x <= 0 for x in d):
        raise ChordInputError(f"{name}: expected 1 to 3 positive sizes, got {tuple(dims)}")
    return (*d, *(1,) * (3 - len(d)))  # type: ignore[return-value]


@dataclass(eq=False)
class CudaKernel:
    """A kernel compiled on first use and cached on disk by content hash.

    ``source`` is a complete translation unit that may ``#include <chord/...>``; ``entry`` names
    an ``extern "C" __global__`` function in it. ``arch`` None means the architecture of the GPU
    it is launched on.
    """

    name: str
    source: str
    entry: str
    arch: str | None = None
    flags: tuple[str, ...] = ()
    _functions: dict[int, Any] = field(default_factory=dict, repr=False)
    _smem_set: dict[int, int] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def compile(self, arch: str | None = None) -> Path:
        """Compile (or find in the cache) the cubin for ``arch``; needs nvcc, not a GPU. Without an
        nvcc, the cubin an nvcc cached (``chord-kernels precompile``), else :class:`NvccNotFoundError`."""
        target = arch or self.arch or nvcc.DEFAULT_ARCH
        flags = [*cache.BASE_FLAGS, *nvcc.arch_flags(target), *self.flags]
        try:
            compiler = nvcc.find_nvcc()
        except NvccNotFoundError as exc:
            cubin = cache.find_precompiled(self.name, self.source, flags)
            if cubin is None:
                raise NvccNotFoundError(f"{exc} Nor is kernel {self.name!r} for {target} in the cache "
                                        f"{cache.cache_dir()} (`chord-kernels precompile` on a host with nvcc, "
                                        "sharing this cache, puts it there).") from exc
            return cubin
        return cache.compile_cached(self.name, self.source, compiler, flags, nvcc.nvcc_version(compiler))

    def _function(self, device: torch.device) -> Any:
        index = device.index if device.index is not None else torch.cuda.current_device()
        fn = self._functions.get(index)
        if fn is not None:
            return fn
        from chord_kernels.jit import driver

        with self._lock:
            if index in self._functions:
                return self._functions[index]
            arch = self.arch or nvcc.arch_of_capability(*torch.cuda.get_device_capability(index))
            cubin = self.compile(arch)
            try:
                fn = driver.load_function(cubin.read_bytes(), self.entry, torch.device("cuda", index))
            except driver.CudaDriverError:
                # A cubin that passed the checksum but that the driver refuses: rebuild once.
                cache.discard(cubin)
                fn = driver.load_function(self.compile(arch).read_bytes(), self.entry, torch.device("cuda", index))
            self._functions[index] = fn
            return fn

    def prepare(self, device: torch.device | str | int | None = None, smem: int = 0) -> None:
        """Compile and load ahead of time, and allow launches with up to ``smem`` bytes of dynamic
        shared memory (capped at the GPU's limit), so that nothing but the launch itself happens
        during CUDA-graph capture."""
        dev = _as_device(device)
        fn = self._function(dev)
        if smem > 48 * 1024:
            from chord_kernels.jit import driver

            self._allow_smem(fn, dev, min(smem, driver.max_dynamic_smem(dev.index)))

    def _allow_smem(self, fn: Any, dev: torch.device, smem: int) -> None:
        from chord_kernels.jit import driver

        if self._smem_set.get(dev.index, 0) >= smem:
            return
        limit = driver.max_dynamic_smem(dev.index)
        if smem > limit:
            raise ChordInputError(f"kernel {self.name}: {smem} bytes of shared memory requested, the GPU allows {limit}")
        driver.set_dynamic_smem(fn, smem)
        self._smem_set[dev.index] = smem

    def launch(
        self,
        grid: Sequence[int],
        block: Sequence[int],
        args: Iterable[Arg],
        smem: int = 0,
        stream: torch.cuda.Stream | None = None,
        device: torch.device | None = None,
    ) -> None:
        """Launch on ``stream`` (default: torch's current stream of the device). ``device``
        defaults to that of the first tensor argument (give it when the arguments are a struct,
        whose pointers :meth:`~chord_kernels.jit.args.ArgStruct.pack` checked already)."""
        from chord_kernels.jit import driver

        args = list(args)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        dev = device or (tensors[0].device if tensors else _as_device(None))
        if dev.type != "cuda":
            raise ChordInputError(f"kernel {self.name}: expected CUDA tensors, got tensors on {dev}")
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        values: list[ctypes._SimpleCData | ctypes.Structure] = []  # kept alive until the launch
        params: list[int] = []  # the address of each kernel parameter's value
        for position, arg in enumerate(args):
            if isinstance(arg, ctypes.Structure):
                values.append(arg)
                params.extend(ctypes.addressof(arg) + getattr(type(arg), name).offset for name, _ in arg._fields_)
                continue
            if isinstance(arg, torch.Tensor):
                driver.require_cuda_device(arg, dev, f"kernel {self.name} argument {position}")
                values.append(ctypes.c_void_p(arg.data_ptr()))
            elif isinstance(arg, KernelArg):
                values.append(arg.as_ctype())
            elif arg is None:
                values.append(ctypes.c_void_p(0))
            else:
                raise ChordInputError(
                    f"kernel {self.name} argument {position}: expected a tensor, None, a struct or a "
                    f"typed scalar (chord_kernels.jit.i32/u32/i64/f32), got {type(arg).__name__}"
                )
            params.append(ctypes.addressof(values[-1]))
        fn = self._function(dev)
        if smem > 48 * 1024:
            self._allow_smem(fn, dev, smem)
        driver.launch(fn, _dims("grid", grid), _dims("block", block), params, smem,
                      stream or torch.cuda.current_stream(dev))


def _as_device(device: torch.device | str | int | None) -> torch.device:
    if device is None:
        return torch.device("cuda", torch.cuda.current_device())
    dev = torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
    if dev.type != "cuda":
        raise ChordInputError(f"device: expected a CUDA device, got {dev}")
    return dev


COMPILE_WORKERS = 8
"""The most nvcc processes :func:`compile_all` runs at once (fewer on fewer CPUs): ptxas takes one
core for tens of seconds on a WGMMA kernel, and eight ranks of one host may compile together."""


def distinct_sources(kernels: Iterable[CudaKernel]) -> list[CudaKernel]:
    """``kernels`` with each source once, in order: configurations that differ only in what their source does
    not show give one kernel."""
    return list({kernel.source: kernel for kernel in kernels}.values())


def compile_all(kernels: Iterable[CudaKernel], arch: str | None = None) -> list[Path]:
    """Compile (or find in the cache) every kernel for ``arch`` (a kernel's own ``arch`` first, as
    at launch), several nvcc at a time; returns their cubins in order. Needs nvcc, not a GPU."""
    kernels = list(kernels)
    workers = max(1, min(COMPILE_WORKERS, os.cpu_count() or 1, len(kernels)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda kernel: kernel.compile(kernel.arch or arch), kernels))
