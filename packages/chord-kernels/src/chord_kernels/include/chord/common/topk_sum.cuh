// The top-k sum of one 16-byte chunk (8 bf16 channels) of a token's rows, shared by the
// standalone sum (ops/topk.py) and the WGMMA kernel's epilogue sum (indexed/epilogue.cuh).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace chord {

// Bit j of the result: choice j (< top_k <= 32) of a token is computed by a local expert, the same
// test that routed it to a local block: its id mapped by expert_map (when given; ids outside
// [0, num_global) are not local), or the id itself, in [0, num_local).
__device__ __forceinline__ uint32_t local_choices(const int32_t* ids, int top_k, const int32_t* expert_map,
                                                  int num_global, int num_local) {
  uint32_t mask = 0;
#pragma unroll 8
  for (int j = 0; j < top_k; ++j) {
    int expert = __ldg(ids + j);
    if (expert_map != nullptr) {
      expert = static_cast<unsigned>(expert) < static_cast<unsigned>(num_global) ? __ldg(expert_map + expert) : -1;
    }
    if (static_cast<unsigned>(expert) < static_cast<unsigned>(num_local)) mask |= 1u << j;
  }
  return mask;
}

// acc[i] += channel i of the 8 bf16 channels in v.
__device__ __forceinline__ void add_chunk(float (&acc)[8], const uint4& v) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    acc[2 * i] += f.x;
    acc[2 * i + 1] += f.y;
  }
}

// The 8 fp32 sums rounded once to bf16.
__device__ __forceinline__ uint4 round_chunk(const float (&acc)[8]) {
  uint4 r;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(acc[2 * i], acc[2 * i + 1]);
  return r;
}

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
      if ((mask >> (j0 + j)) & 1u) add_chunk(acc, v[j]);
    }
  }
  return round_chunk(acc);
}

// out[c], out[c + step], ... = sum_choices(rows + c, stride, mask, ...), ... for chunks below `chunks`, the
// same bits, where `mask` has at most P choices: U chunks' loads go out together. Under EP a token has
// about one local choice, and one load in flight per thread would leave the sum waiting on memory.
template <int P, int U>
__device__ __forceinline__ void sum_few_choices(const uint4* __restrict__ rows, int64_t stride, uint32_t mask,
                                                uint4* __restrict__ out, int c, int step, int chunks) {
  int choice[P];
#pragma unroll
  for (int p = 0; p < P; ++p) {
    choice[p] = mask ? __ffs(mask) - 1 : -1;  // ascending j, the order sum_choices adds in
    mask &= mask - 1;
  }
  for (; c < chunks; c += U * step) {
    uint4 v[U][P];
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int p = 0; p < P; ++p) {
        v[u][p] = choice[p] >= 0 && c + u * step < chunks ? __ldcg(rows + choice[p] * stride + c + u * step)
                                                          : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (c + u * step >= chunks) break;
      float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int p = 0; p < P; ++p) {
        if (choice[p] >= 0) add_chunk(acc, v[u][p]);
      }
      out[c + u * step] = round_chunk(acc);
    }
  }
}

}  // namespace chord
