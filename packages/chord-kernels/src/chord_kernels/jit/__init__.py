"""JIT runtime: generated CUDA C++ -> nvcc -> cached cubin -> ``cuda.bindings`` launch.

See :class:`CudaKernel`. No torch C++ extension is built, so there is no ABI coupling to torch.
"""

from chord_kernels.jit.kernel import (
    CudaKernel,
    KernelArg,
    f32,
    i32,
    i64,
    precompile,
    register_precompile,
    u32,
)
from chord_kernels.jit.nvcc import DEFAULT_ARCH, SUPPORTED_ARCHS, find_nvcc

__all__ = [
    "DEFAULT_ARCH",
    "SUPPORTED_ARCHS",
    "CudaKernel",
    "KernelArg",
    "f32",
    "find_nvcc",
    "i32",
    "i64",
    "precompile",
    "register_precompile",
    "u32",
]
