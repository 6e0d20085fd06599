"""SiLU-and-mul between the two MoE GEMMs, where it is not fused into the gate_up GEMM's epilogue
(the decode kernel, shapes the fused WGMMA epilogue does not serve).

The numerics contract of docs/formats.md: ``silu(gate) * up`` computed in fp32 from the bf16
inputs (PyTorch's fp32 silu, ``x / (1 + exp(-x))``), rounded once to bf16. On CUDA tensors one
kernel reads each row once and writes its half (``chord::silu_of_bf16``, equal bit for bit to
PyTorch's fp32 silu for every bf16 input, as the fused epilogue uses); elsewhere plain PyTorch
with an fp32 temporary, the same values.
"""

from __future__ import annotations

import functools

import torch

from chord_kernels import hardware
from chord_kernels.checks import output_tensor, require_tensor
from chord_kernels.errors import ChordInputError
from chord_kernels.jit import DEFAULT_ARCH, CudaKernel, i32, i64

_THREADS = 256
_SOURCE = r"""
#include <cuda_bf16.h>
#include <cstdint>

#include "chord/common/activation.cuh"

// out[r, c] = bf16(silu(x[r, c]) * x[r, inter + c]) for rows r, c < inter; kVec consecutive
// channels per thread (16-byte loads and stores: inter a multiple of 8, both buffers 16-byte aligned).
template <int kVec>
__device__ __forceinline__ void silu_and_mul(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ out,
                                             int64_t rows, int inter) {
  const int per_row = inter / kVec;
  const int64_t total = rows * per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row;
    const int c = static_cast<int>(i - r * per_row) * kVec;
    const __nv_bfloat16* gate = x + r * 2 * inter + c;
    alignas(16) __nv_bfloat16 g[kVec];
    alignas(16) __nv_bfloat16 u[kVec];
    alignas(16) __nv_bfloat16 o[kVec];
    if constexpr (kVec == 8) {
      *reinterpret_cast<uint4*>(g) = *reinterpret_cast<const uint4*>(gate);
      *reinterpret_cast<uint4*>(u) = *reinterpret_cast<const uint4*>(gate + inter);
    } else {
      g[0] = gate[0];
      u[0] = gate[inter];
    }
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      o[v] = __float2bfloat16_rn(chord::silu_of_bf16(__bfloat162float(g[v])) * __bfloat162float(u[v]));
    }
    if constexpr (kVec == 8) {
      *reinterpret_cast<uint4*>(out + r * inter + c) = *reinterpret_cast<const uint4*>(o);
    } else {
      out[r * inter + c] = o[0];
    }
  }
}

extern "C" __global__ void __launch_bounds__(256) chord_silu_and_mul(const __nv_bfloat16* x, __nv_bfloat16* out,
                                                                     int64_t rows, int inter, int vec8) {
  if (vec8) {
    silu_and_mul<8>(x, out, rows, inter);
  } else {
    silu_and_mul<1>(x, out, rows, inter);
  }
}
"""


@functools.cache
def silu_and_mul_kernel() -> CudaKernel:
    """The kernel of :func:`silu_and_mul` on CUDA tensors (one for every architecture)."""
    return CudaKernel(name="silu_and_mul", source=_SOURCE, entry="chord_silu_and_mul")


def kernels(arch: str = DEFAULT_ARCH) -> list[CudaKernel]:
    """The op's precompile hook (:mod:`chord_kernels.families`): one kernel for every ``arch``."""
    return [silu_and_mul_kernel()]


def silu_and_mul(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """bf16 ``[..., I]`` = ``silu(gate) * up`` of bf16 ``x = [..., 2I]`` (gate columns, then up).

    Any number of rows, zero included. ``out`` (bf16 ``[..., I]``, same device) receives the
    result when given. On CUDA one kernel launch (``x`` made contiguous first if it is not; ``out``
    must be contiguous), capturable in a CUDA graph once :func:`silu_and_mul_kernel` is loaded.
    """
    require_tensor("x", x, dtype=torch.bfloat16, ndim=(1, 2, 3))
    if x.shape[-1] % 2:
        raise ChordInputError(f"x: expected an even last dimension [gate | up], got {x.shape[-1]}")
    shape = (*x.shape[:-1], x.shape[-1] // 2)
    if x.device.type != "cuda":
        out = output_tensor(out, shape, dtype=torch.bfloat16, device=x.device)
        gate, up = x.float().chunk(2, dim=-1)
        return out.copy_(torch.nn.functional.silu(gate).mul_(up))
    out = output_tensor(out, shape, dtype=torch.bfloat16, device=x.device, contiguous=True)
    inter = shape[-1]
    rows = x.numel() // max(1, x.shape[-1])
    if rows == 0 or inter == 0:
        return out
    x = x.contiguous()
    vec8 = inter % 8 == 0 and x.data_ptr() % 16 == 0 and out.data_ptr() % 16 == 0
    work = rows * (inter // 8 if vec8 else inter)
    blocks = max(1, min(-(-work // _THREADS), 16 * hardware.num_sms(hardware.device_index(x.device))))
    silu_and_mul_kernel().launch((blocks,), (_THREADS,), (x, out, i64(rows), i32(inter), i32(int(vec8))))
    return out
