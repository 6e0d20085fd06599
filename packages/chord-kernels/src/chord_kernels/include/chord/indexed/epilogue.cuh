// Epilogue of the indexed decode kernel: fp32 accumulators (x optional top-k weight) -> bf16
// rows of the unreduced output, and zero rows for slots routed to non-local experts.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "chord/indexed/params.cuh"

namespace chord::indexed {

// One 16x8 accumulator tile (already scaled): channels ch0 = base + g and ch0 + 8, tokens 2t
// and 2t + 1 whose output rows are row0 / row1 (null: padding, not written).
__device__ __forceinline__ void store_tile(int n, const float (&acc)[4], int ch0, __nv_bfloat16* row0,
                                           __nv_bfloat16* row1) {
  const int ch1 = ch0 + 8;
  if (row0 != nullptr) {
    if (ch0 < n) row0[ch0] = __float2bfloat16_rn(acc[0]);
    if (ch1 < n) row0[ch1] = __float2bfloat16_rn(acc[2]);
  }
  if (row1 != nullptr) {
    if (ch0 < n) row1[ch0] = __float2bfloat16_rn(acc[1]);
    if (ch1 < n) row1[ch1] = __float2bfloat16_rn(acc[3]);
  }
}

// Rows of the slots of routing blocks whose expert is not local (id -1 or out of range) are
// zero, as in the reference. CTA c handles blocks c, c + G, ... with `num_warps` warps.
__device__ __forceinline__ void zero_invalid_blocks(const DecodeArgs& args, int used, int block_m,
                                                    int warp, int num_warps) {
  const int lane = threadIdx.x % 32;
  const int n = args.n;
  for (int b = blockIdx.x; b < used; b += gridDim.x) {
    const int expert = __ldg(args.expert_ids + b);
    if (static_cast<unsigned>(expert) < static_cast<unsigned>(args.num_experts)) continue;
    for (int r = warp; r < block_m; r += num_warps) {
      const int slot = __ldg(args.sorted_token_ids + static_cast<int64_t>(b) * block_m + r);
      if (slot < 0 || slot >= args.num_slots) continue;
      __nv_bfloat16* row = args.out + static_cast<int64_t>(slot) * n;
      if ((n % 8) == 0) {
        uint4* row16 = reinterpret_cast<uint4*>(row);
        for (int i = lane; i < n / 8; i += 32) row16[i] = make_uint4(0, 0, 0, 0);
      } else {
        for (int i = lane; i < n; i += 32) row[i] = __float2bfloat16_rn(0.0f);
      }
    }
  }
}

}  // namespace chord::indexed
