// Compile-time configuration of the indexed W4A16 decode kernel: the template the host's
// chord_kernels.indexed.decode.DecodeConfig is emitted into, and the shared-memory plan derived
// from it (the host's number is checked against smem_bytes by a static_assert in every generated
// source).
#pragma once

#include <cstdint>

#include "chord/common/dequant.cuh"
#include "chord/indexed/contract.cuh"

namespace chord::indexed {

// Work schedules (scheduler.cuh): strided items, a global atomic counter, or equal contiguous
// ranges of (item, K stage) units per CTA with items split along K between neighbouring CTAs.
enum Schedule : int { kStrided = 0, kDynamicCounter = 1, kBalanced = 2 };

// kWarps consumer warps, each owning kMT 16-channel atoms of the CTA's N tile (BN = 16 kWarps kMT);
// kBM tokens per routing block (a multiple of 8: kBM / 8 mma N tiles); kBK input channels per
// pipeline stage; kStages stages in the shared-memory ring; kSchedule a Schedule; kSubnormal: every
// scale is below 2^-5 in magnitude, so the warps dequantize with one fma per A register (dequant.cuh,
// the pairs at bit 4 in place).
// kRowWidths: an item's whole K stages multiply only the token tiles up to its last real row (the
// routing puts a block's real rows first), so a 16-token block holding 8 rows costs the MMAs of an
// 8-token one. kSiluMul: the weight is [gate | up] (N = 2I) and the output silu(gate) * up ([slots, I]):
// the first half of the warps multiply gate channels, the second half the same channels of up, and
// each pair of warps combines its halves through shared memory in the epilogue.
template <int kWarps_, int kMT_, int kBM_, int kBK_, int kStages_, int kSchedule_, bool kSubnormal_ = false,
          bool kRowWidths_ = false, bool kSiluMul_ = false>
struct DecodeConfig {
  static constexpr int kWarps = kWarps_;
  static constexpr int kMT = kMT_;
  static constexpr int kBM = kBM_;
  static constexpr int kBK = kBK_;
  static constexpr int kStages = kStages_;
  static constexpr int kSchedule = kSchedule_;
  static constexpr Dequant kDequant = kSubnormal_ ? Dequant::kFmaInPlace : Dequant::kSubMul;
  static constexpr bool kDynamic = kSchedule_ == kDynamicCounter;
  static constexpr bool kBalancedSchedule = kSchedule_ == kBalanced;
  static constexpr bool kRowWidths = kRowWidths_ && kBM_ > 8;
  static constexpr bool kSiluMul = kSiluMul_;

  static_assert(kSchedule_ >= kStrided && kSchedule_ <= kBalanced, "unknown schedule");
  static_assert(kBM % 8 == 0 && kBM <= 64, "block_m must be a multiple of 8 up to 64");
  static_assert(kBK % (kTileGroups * kAtomK) == 0, "a stage holds whole 256-wide K tiles");
  static_assert((kWarps * kMT) % kTileRows == 0, "a CTA tile holds whole 64-channel tiles");
  static constexpr int kThreads = (kWarps + 1) * 32;  // + one producer warp
  static constexpr int kNT = kBM / 8;                 // mma N tiles per block
  static constexpr int kRowsPerLane = (kBM + 31) / 32;  // token rows each producer lane handles
  static constexpr bool kPrefetchB = kNT * kMT <= 8;    // operands loaded a K group ahead (registers)
  static constexpr int kAtomsN = kWarps * kMT;        // 16-channel atoms per CTA tile
  // A split item's parts end in different CTAs, and a pair of warps must end together.
  static_assert(!kSiluMul || (kSchedule_ != kBalanced && kWarps % 2 == 0 && (kAtomsN / 2) % kTileRows == 0),
                "SiLU-and-mul pairs whole 64-channel runs of gate and up warps, items never split");
  static constexpr int kBKG = kBK / kAtomK;           // scale groups per stage
  static constexpr int kRuns = kAtomsN / kTileRows;   // contiguous weight runs (bulk copies) per stage
  static constexpr int kRunBytes = kTileRows * kBKG * kAtomBytes;  // shared bytes reserved per run
  // First atom row of run `run` of N tile `ntile` (of n16 atom rows): with kSiluMul the first half of
  // the runs are gate rows and the second half the same rows of up (n16 / 2 on).
  __device__ __forceinline__ static int run_row0(int ntile, int run, int n16) {
    if constexpr (kSiluMul) {
      constexpr int kHalf = kRuns / 2;
      return (run / kHalf) * (n16 / 2) + (ntile * kHalf + run % kHalf) * kTileRows;
    } else {
      return ntile * kAtomsN + run * kTileRows;
    }
  }
  // Activation rows: +16 bytes so the 8 rows of one ldmatrix 8x8 matrix fall in 8 different
  // 16-byte bank groups (each B-fragment ldmatrix.x4 takes the minimum 4 wavefronts).
  static constexpr int kActRowBytes = kBK * 2 + 16;
  static constexpr int kStageWeightBytes = kAtomsN * kBKG * kAtomBytes;
  static constexpr int kStageActBytes = kBM * kActRowBytes;
  static constexpr int kStageBytes = (kStageWeightBytes + kStageActBytes + 127) / 128 * 128;

  struct alignas(16) Header {
    int item;   // work item (-1: no more work)
    int kc;     // K chunk index within the item
    int ntile;  // N tile of the item
    int flags;  // kFirstStage | kLastStage | kPartialItem (this CTA's part of the item)
    int act_block;  // routing block and K chunk of the activations in the slot (producer only)
    int act_kc;
    int rows;  // real rows of the block: the last one's index + 1
    int pad;
    int slots[kBM];  // flat slot of each token row (>= num_slots: padding)
    float weights[kBM];  // top-k weight of each token row (1 without top-k weights)
  };
  // Floats of one consumer warp's split-K partial (balanced schedule): kMT x kNT tiles of 16 x 8.
  static constexpr int kPartialFloats = kMT * kNT * 4 * 32;
  // Independent accumulator chains per mma tile: consecutive MMAs of one warp write different
  // accumulators, so the tensor pipe is not serialised on one accumulator's latency.
  static constexpr int kChains = kMT * kNT >= 4 ? 1 : 4 / (kMT * kNT);

  static constexpr int kBarOffset = kStages * kStageBytes;
  static constexpr int kHeaderOffset = kBarOffset + 2 * kStages * 8;
  static constexpr int kScratchOffset = kHeaderOffset + kStages * static_cast<int>(sizeof(Header));
  // Epilogue staging (epilogue.cuh store_block): per consumer warp, kBM token rows of its kMT x 16
  // output channels in bf16, rows padded by 16 bytes so that the 8 rows of one stmatrix 8 x 8
  // matrix land in 8 different 16-byte bank groups.
  static constexpr int kOutRowBytes = kMT * 32 + 16;
  static constexpr int kWarpOutBytes = kBM * kOutRowBytes;
  static constexpr int kOutOffset = kScratchOffset + 16 * 4;
  static constexpr int kListOffset = kOutOffset + kWarps * kWarpOutBytes;
  // Dynamic shared memory for a list of `list_cap` compacted routing blocks.
  static constexpr int smem_bytes(int list_cap) { return kListOffset + 4 * list_cap; }
};

// Header flags of a stage: the first / last stage of this CTA's part of an item, and whether the
// part starts after K stage 0 (the balanced schedule's split items: each part writes a partial sum
// to the workspace and the last part to arrive finishes the item; decode.cuh finish_split_part).
constexpr int kFirstStage = 1;
constexpr int kLastStage = 2;
constexpr int kPartialItem = 4;

}  // namespace chord::indexed
