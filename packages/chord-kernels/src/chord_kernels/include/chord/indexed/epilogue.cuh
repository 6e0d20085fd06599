// Epilogue of the indexed decode kernel: fp32 accumulators (x optional top-k weight) -> bf16
// rows of the unreduced output, and zero rows for slots routed to non-local experts.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "chord/common/activation.cuh"
#include "chord/common/ptx.cuh"
#include "chord/common/topk_sum.cuh"
#include "chord/indexed/contract.cuh"
#include "chord/indexed/decode_config.cuh"
#include "chord/indexed/routing.cuh"

namespace chord::indexed {

// Store 8 bf16 output channels from `channel` of slot `slot`'s row of `n` channels: one 16-byte
// store when n keeps rows 16-byte aligned (kStream: a streaming store, first out of L2), else element
// by element up to n.
template <bool kStream = false>
__device__ __forceinline__ void store_chunk(const Args& args, int n, int slot, int channel, const uint4& v,
                                            bool aligned) {
  __nv_bfloat16* dst = args.out + static_cast<int64_t>(slot) * n + channel;
  if (aligned) {
    if constexpr (kStream) {
      __stcs(reinterpret_cast<uint4*>(dst), v);
    } else {
      *reinterpret_cast<uint4*>(dst) = v;
    }
  } else {
    const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&v);
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      if (channel + u < n) dst[u] = e[u];
    }
  }
}

// 16-byte output chunks of one consumer warp's tile (kBM tokens x kMT * 16 channels) and how many
// each lane stores.
// With kSiluMul the two warps of a pair (gate and up) share their tile's chunks: this lane's chunk
// i is lane + 32 (2 i + half), half 0 for the gate warp and 1 for the up warp.
template <class Cfg>
struct OutChunks {
  static constexpr int kPerRow = Cfg::kMT * 2;
  static constexpr int kCount = Cfg::kBM * kPerRow;
  static constexpr int kLanes = Cfg::kSiluMul ? 64 : 32;  // lanes sharing the tile's chunks
  static constexpr int kPerLane = (kCount + kLanes - 1) / kLanes;
  __device__ __forceinline__ static int chunk(int lane, int i, int half) {
    return Cfg::kSiluMul ? lane + 32 * (2 * i + half) : lane + 32 * i;
  }
};

// Slot of each output chunk this lane stores (chunk c is token row c / kPerRow of the block), read
// from the stage header before the stage is released.
template <class Cfg>
__device__ __forceinline__ void chunk_slots(int (&slots)[OutChunks<Cfg>::kPerLane], const int* header_slots,
                                            int num_slots, int lane, int half) {
#pragma unroll
  for (int i = 0; i < OutChunks<Cfg>::kPerLane; ++i) {
    const int c = OutChunks<Cfg>::chunk(lane, i, half);
    slots[i] = c < OutChunks<Cfg>::kCount ? header_slots[c / OutChunks<Cfg>::kPerRow] : num_slots;
  }
}

// One consumer warp's fragments (accumulators already scaled), rounded to bf16, into its shared
// staging rows with stmatrix (transposed, so each shared row is one token's channels).
template <class Cfg>
__device__ __forceinline__ void stage_block(const float (&acc)[Cfg::kMT][Cfg::kNT][4], uint8_t* staging,
                                            int lane) {
  const uint32_t base = ptx::smem_addr(staging);
#pragma unroll
  for (int mt = 0; mt < Cfg::kMT; ++mt)
#pragma unroll
    for (int j = 0; j < Cfg::kNT; ++j) {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(acc[mt][j][0], acc[mt][j][1]);  // channel g
      const __nv_bfloat162 hi = __floats2bfloat162_rn(acc[mt][j][2], acc[mt][j][3]);  // channel g + 8
      // Lanes 0-7 address token rows j*8 + l of matrix 0 (channels mt*16 + 0..7), lanes 8-15
      // those of matrix 1 (channels mt*16 + 8..15).
      const uint32_t row = base + (j * 8 + (lane & 7)) * Cfg::kOutRowBytes + (mt * 16 + (lane & 8)) * 2;
      ptx::stmatrix_x2_trans(row, *reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    }
}

// Store one consumer warp's tile (accumulators already scaled): staged with stage_block, then every
// lane copies 16-byte chunks to the output rows, so each warp store instruction writes whole
// 128-byte lines instead of 2-byte scatters. When N is not a multiple of 8 the rows are not 16-byte
// aligned and the chunks are stored element by element.
template <class Cfg>
__device__ __forceinline__ void store_block(const Args& args, const float (&acc)[Cfg::kMT][Cfg::kNT][4],
                                            uint8_t* staging, const int (&slots)[OutChunks<Cfg>::kPerLane],
                                            int channel0, int lane) {
  using Chunks = OutChunks<Cfg>;
  __syncwarp();  // the previous item's chunk loads are done before the staging rows are rewritten
  stage_block<Cfg>(acc, staging, lane);
  __syncwarp();
  const bool aligned = args.n % 8 == 0;  // gemm() checks that `out` is 16-byte aligned
#pragma unroll
  for (int i = 0; i < Chunks::kPerLane; ++i) {
    const int c = lane + 32 * i;
    const int channel = channel0 + (c % Chunks::kPerRow) * 8;
    if (c < Chunks::kCount && slots[i] < args.num_slots && channel < args.n) {
      const uint4 v = *reinterpret_cast<const uint4*>(staging + (c / Chunks::kPerRow) * Cfg::kOutRowBytes +
                                                      (c % Chunks::kPerRow) * 16);
      store_chunk(args, args.n, slots[i], channel, v, aligned);
    }
  }
}

// SiLU-and-mul of a warp pair's tile: gate warp w (< kWarps / 2) and up warp w + kWarps / 2 stage
// their bf16 outputs, meet at named barrier 1 + w, and each stores half of the chunks of
// silu(gate) * up (fp32 math on the bf16 values, as ops.silu_and_mul computes it) to the [slots, I]
// output; they meet again before either rewrites its staging.
template <class Cfg>
__device__ __forceinline__ void store_silu_mul_block(const Args& args, const float (&acc)[Cfg::kMT][Cfg::kNT][4],
                                                     uint8_t* staging0, const int (&slots)[OutChunks<Cfg>::kPerLane],
                                                     int ntile, int warp, int lane) {
  using Chunks = OutChunks<Cfg>;
  constexpr int kPairs = Cfg::kWarps / 2;
  const int pair = warp % kPairs, half = warp / kPairs;
  const int n_out = args.n / 2;
  const uint8_t* gate = staging0 + pair * Cfg::kWarpOutBytes;
  const uint8_t* up = staging0 + (pair + kPairs) * Cfg::kWarpOutBytes;
  const int channel0 = (ntile * kPairs + pair) * Cfg::kMT * kAtomN;
  ptx::named_barrier(1 + pair, 64);  // the pair's previous chunk loads are done
  stage_block<Cfg>(acc, staging0 + warp * Cfg::kWarpOutBytes, lane);
  ptx::named_barrier(1 + pair, 64);
  const bool aligned = n_out % 8 == 0;
#pragma unroll
  for (int i = 0; i < Chunks::kPerLane; ++i) {
    const int c = Chunks::chunk(lane, i, half);
    const int channel = channel0 + (c % Chunks::kPerRow) * 8;
    if (c < Chunks::kCount && slots[i] < args.num_slots && channel < n_out) {
      const int offset = (c / Chunks::kPerRow) * Cfg::kOutRowBytes + (c % Chunks::kPerRow) * 16;
      const uint4 g = *reinterpret_cast<const uint4*>(gate + offset);
      const uint4 u = *reinterpret_cast<const uint4*>(up + offset);
      const __nv_bfloat16* ge = reinterpret_cast<const __nv_bfloat16*>(&g);
      const __nv_bfloat16* ue = reinterpret_cast<const __nv_bfloat16*>(&u);
      uint4 v;
      __nv_bfloat16* ve = reinterpret_cast<__nv_bfloat16*>(&v);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        ve[e] = __float2bfloat16_rn(silu_of_bf16(__bfloat162float(ge[e])) * __bfloat162float(ue[e]));
      }
      store_chunk(args, n_out, slots[i], channel, v, aligned);
    }
  }
}

// Rows (of n channels) of the slots of routing blocks whose expert is not local (id -1 or out of
// range) are zero, as in the reference, unless the caller never reads them (args.zero_nonlocal 0).
// CTA c handles blocks c, c + G, ... with `num_warps` warps.
__device__ __forceinline__ void zero_invalid_blocks(const Args& args, int n, int used, int block_m,
                                                    int warp, int num_warps) {
  if (!args.zero_nonlocal) return;
  const int lane = threadIdx.x % 32;
  for (int b = blockIdx.x; b < used; b += gridDim.x) {
    const int expert = block_expert(args, b, block_m);
    if (static_cast<unsigned>(expert) < static_cast<unsigned>(args.num_experts)) continue;
    for (int r = warp; r < block_m; r += num_warps) {
      const int slot = block_slot<true>(args, b, r, block_m, expert);
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

// ---- The top-k sum (kernels that reduce into args.reduced) ---------------------------------

// Bit j of the result: slot `token * reduce_top_k + j` is computed by a local expert.
__device__ __forceinline__ uint32_t local_slots(const Args& args, int token) {
  return local_choices(args.topk_ids + static_cast<int64_t>(token) * args.reduce_top_k, args.reduce_top_k,
                       args.expert_map, args.num_global_experts, args.num_experts);
}

// Rows (of n channels) of args.reduced for tokens without a local slot are zero (no tile ever
// arrives for them). Lane l of warp w of CTA c tests token 32 (c * num_warps + w) + l, and so on.
__device__ __forceinline__ void zero_unrouted_tokens(const Args& args, int n, int warp, int num_warps) {
  const int lane = threadIdx.x % 32;
  const int tokens = args.num_slots / args.reduce_top_k;
  for (int t0 = 32 * (blockIdx.x * num_warps + warp); t0 < tokens; t0 += 32 * gridDim.x * num_warps) {
    const int token = t0 + lane;
    uint32_t empty = __ballot_sync(0xffffffffu, token < tokens && local_slots(args, token) == 0);
    while (empty != 0) {
      const int t = t0 + __ffs(empty) - 1;
      empty &= empty - 1;
      uint4* row = reinterpret_cast<uint4*>(args.reduced + static_cast<int64_t>(t) * n);
      for (int i = lane; i < n / 8; i += 32) row[i] = make_uint4(0, 0, 0, 0);
    }
  }
}

// args.reduced[token, channel .. channel + 8) = the top-k sum (chord::sum_choices: ascending j
// from +0, one rounding) of the token's local slots (`mask`) in args.out. The rows were written by
// other CTAs: loads go through L2, after the caller's acquire fence.
__device__ __forceinline__ void reduce_chunk(const Args& args, int n, int token, uint32_t mask, int channel) {
  const uint4* rows = reinterpret_cast<const uint4*>(args.out + static_cast<int64_t>(token) * args.reduce_top_k * n + channel);
  *reinterpret_cast<uint4*>(args.reduced + static_cast<int64_t>(token) * n + channel) =
      sum_choices(rows, n / 8, mask, args.reduce_top_k);
}

}  // namespace chord::indexed
