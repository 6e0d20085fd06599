"""JIT runtime: generated CUDA C++ -> nvcc -> cached cubin -> ``cuda.bindings`` launch.

See :class:`CudaKernel` and :class:`ArgStruct`. No torch C++ extension is built, so there is no
ABI coupling to torch. The runtime knows nothing of the kernels built on it: the families that
use it are listed in :mod:`chord_kernels.families`, which also owns ``precompile``.
"""

from chord_kernels.jit.args import ArgStruct, Field
from chord_kernels.jit.kernel import (
    CudaKernel,
    KernelArg,
    compile_all,
    distinct_sources,
    f32,
    i32,
    i64,
    u32,
)
from chord_kernels.jit.nvcc import DEFAULT_ARCH, SUPPORTED_ARCHS, find_nvcc

__all__ = [
    "DEFAULT_ARCH",
    "SUPPORTED_ARCHS",
    "ArgStruct",
    "CudaKernel",
    "Field",
    "KernelArg",
    "compile_all",
    "distinct_sources",
    "f32",
    "find_nvcc",
    "i32",
    "i64",
    "u32",
]
