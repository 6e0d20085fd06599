"""GPU operations built on the JIT runtime. Importing registers their kernels for precompile."""

from chord_kernels.ops.dequant import dequantize_gpu

__all__ = ["dequantize_gpu"]
