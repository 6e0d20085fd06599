// The top-k sum of one 16-byte chunk (8 bf16 channels) of a token's rows, shared by the
// standalone sum (ops/topk.py) and the WGMMA kernel's epilogue sum (indexed/epilogue.cuh).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace chord {

// The fp32 sum, in ascending j from +0, of the chunks rows[j * stride] of the choices j set in
// `mask` (j < top_k), rounded once to bf16; skipping a choice adds nothing (x + 0 = x). Up to
// eight loads in flight together, through L2 (the rows may come from other CTAs of the same kernel).
__device__ __forceinline__ uint4 sum_choices(const uint4* rows, int64_t stride, uint32_t mask, int top_k) {
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int j0 = 0; j0 < top_k; j0 += 8) {
    uint4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = (mask >> (j0 + j)) & 1u ? __ldcg(rows + (j0 + j) * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (!((mask >> (j0 + j)) & 1u)) continue;
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v[j]);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 f = __bfloat1622float2(h[i]);
        acc[2 * i] += f.x;
        acc[2 * i + 1] += f.y;
      }
    }
  }
  uint4 r;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(acc[2 * i], acc[2 * i + 1]);
  return r;
}

}  // namespace chord
