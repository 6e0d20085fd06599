// Compile-time configuration and run-time arguments of the indexed W4A16 decode kernel.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace chord::indexed {

constexpr int kAtomN = 16;       // output channels per packed atom (mma M)
constexpr int kAtomK = 32;       // input channels per atom (one scale group = two mma K steps)
constexpr int kAtomBytes = 288;  // 256 bytes of codes + 32 bytes of scale pairs
constexpr int kAtomWords = kAtomBytes / 4;
constexpr int kTileRows = 4;    // atom rows per packed tile (64 channels)
constexpr int kTileGroups = 8;  // scale groups per packed tile (256 K)

// kWarps consumer warps, each owning kMT 16-channel atoms of the CTA's N tile (BN = 16 kWarps kMT);
// kBM tokens per routing block (a multiple of 8: kBM / 8 mma N tiles); kBK input channels per
// pipeline stage; kStages stages in the shared-memory ring; kDynamic: items taken from a global
// atomic counter instead of the semi-static stride.
template <int kWarps_, int kMT_, int kBM_, int kBK_, int kStages_, bool kDynamic_>
struct DecodeConfig {
  static constexpr int kWarps = kWarps_;
  static constexpr int kMT = kMT_;
  static constexpr int kBM = kBM_;
  static constexpr int kBK = kBK_;
  static constexpr int kStages = kStages_;
  static constexpr bool kDynamic = kDynamic_;

  static_assert(kBM % 8 == 0 && kBM <= 32, "block_m must be 8, 16, 24 or 32");
  static_assert(kBK % (kTileGroups * kAtomK) == 0, "a stage holds whole 256-wide K tiles");
  static_assert((kWarps * kMT) % kTileRows == 0, "a CTA tile holds whole 64-channel tiles");
  static constexpr int kThreads = (kWarps + 1) * 32;  // + one producer warp
  static constexpr int kNT = kBM / 8;                 // mma N tiles per block
  static constexpr int kAtomsN = kWarps * kMT;        // 16-channel atoms per CTA tile
  static constexpr int kBKG = kBK / kAtomK;           // scale groups per stage
  static constexpr int kRuns = kAtomsN / kTileRows;   // contiguous weight runs (bulk copies) per stage
  static constexpr int kRunBytes = kTileRows * kBKG * kAtomBytes;  // shared bytes reserved per run
  // Activation rows: +64 bytes so rows g and g+1 fall in opposite halves of the 128-byte bank
  // window: the B-fragment 16-byte loads of a warp then take the minimum 4 wavefronts.
  static constexpr int kActRowBytes = kBK * 2 + 64;
  static constexpr int kStageWeightBytes = kAtomsN * kBKG * kAtomBytes;
  static constexpr int kStageActBytes = kBM * kActRowBytes;
  static constexpr int kStageBytes = (kStageWeightBytes + kStageActBytes + 127) / 128 * 128;

  struct alignas(16) Header {
    int item;   // work item (-1: no more work)
    int kc;     // K chunk index within the item
    int ntile;  // N tile of the item
    int pad;
    int slots[kBM];  // flat slot of each token row (>= num_slots: padding)
    float weights[kBM];  // top-k weight of each token row (1 without top-k weights)
  };
  // Independent accumulator chains per mma tile: consecutive MMAs of one warp write different
  // accumulators, so the tensor pipe is not serialised on one accumulator's latency.
  static constexpr int kChains = kMT * kNT >= 4 ? 1 : 4 / (kMT * kNT);

  static constexpr int kBarOffset = kStages * kStageBytes;
  static constexpr int kHeaderOffset = kBarOffset + 2 * kStages * 8;
  static constexpr int kScratchOffset = kHeaderOffset + kStages * static_cast<int>(sizeof(Header));
  static constexpr int kListOffset = kScratchOffset + 16 * 4;
  // Dynamic shared memory for a list of `list_cap` compacted routing blocks.
  static constexpr int smem_bytes(int list_cap) { return kListOffset + 4 * list_cap; }
};

struct DecodeArgs {
  const int32_t* tiles;              // [E, N16 * K/32, 72] packed atoms in 64 x 256 tiles
  const __nv_bfloat16* a;            // [rows, K] activations (slot t reads row t / top_k)
  __nv_bfloat16* out;                // [num_slots, N]
  const int32_t* sorted_token_ids;   // [num_blocks * block_m] (at least the used part)
  const int32_t* expert_ids;         // [num_blocks]
  const int32_t* num_tokens_post_padded;  // [1]
  const float* topk_weights;         // [num_slots] or null
  int32_t* counters;                 // [2] zero-initialised (dynamic schedule only)
  int n;
  int k;
  int num_experts;
  int num_slots;
  int top_k;
  int num_blocks;
  int list_cap;  // 0: no compaction (walk every block, skip invalid ones in the producer)
};

}  // namespace chord::indexed
