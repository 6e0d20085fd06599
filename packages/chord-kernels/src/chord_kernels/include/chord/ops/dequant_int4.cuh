// Plain dequant kernel: compressed-tensors int4 (weight_packed + weight_scale) -> bf16 weights.
//
// One thread per 32-column group: a 16-byte load brings the group's four packed words, one
// scale, and four 16-byte stores write its 32 bf16 values. Memory-bound and simple on purpose;
// it serves tests and the reference path on GPU, and proves the JIT pipeline.
#pragma once

#include <cstdint>

#include "chord/common/dequant.cuh"

namespace chord {

__device__ __forceinline__ void dequant_int4_groups(const uint4* __restrict__ packed,
                                                    const uint16_t* __restrict__ scales,
                                                    uint4* __restrict__ out, int64_t num_groups) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < num_groups; g += stride) {
    const uint4 words = __ldg(packed + g);
    const uint32_t scale2 = broadcast_bf16(scales[g]);
    const uint32_t w[4] = {words.x, words.y, words.z, words.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t v[4];
      dequant_word_in_order(w[i], scale2, v);
      out[g * 4 + i] = make_uint4(v[0], v[1], v[2], v[3]);
    }
  }
}

}  // namespace chord
