// SiLU for the gate_up GEMM's fused SiLU-and-mul epilogue, bit-identical to PyTorch's fp32 silu
// (x / (1 + exp(-x)), IEEE expf and division), which ops.silu_and_mul and the reference use.
#pragma once

#include <cuda_bf16.h>

namespace chord {

// silu(x) for a bf16 value x, equal bit for bit to x / (1.0f + expf(-x)) with IEEE division, for
// every bf16 x (checked exhaustively on the GPU: test_indexed_silu_mul_gpu.py), without
// div.rn.f32's slow-path branch, which serialised the epilogue: d = 1 + expf(-x) >= 1 is scaled by
// a power of two into [1, 2^64], divided through a Newton-refined approximate reciprocal with one
// residual correction, and scaled back (exact: the quotient is normal whenever d is scaled).
__device__ __forceinline__ float silu_of_bf16(float x) {
  const float d = 1.0f + expf(-x);
  const float s = d >= 0x1p64f ? 0x1p-64f : 1.0f;
  const float ds = d * s;
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(ds));
  r = fmaf(fmaf(-ds, r, 1.0f), r, r);
  float q = x * r;
  q = fmaf(fmaf(-ds, q, x), r, q);
  // d = inf (x < -88.7): x / inf is -0 (NaN for x = -inf); x = +inf, NaN or +-0: x itself (the
  // correction would turn -0 into +0).
  const bool special = isinf(d) || !isfinite(x) || x == 0.0f;
  return special ? x * (isinf(d) ? 0.0f : 1.0f) : q * s;
}

}  // namespace chord
