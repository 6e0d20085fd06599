// Indexed W4A16 MoE GEMM on warpgroup MMA (sm_90a), for the middle and prefill shapes.
//
// Same contract and weight layout as the decode kernel (decode.cuh), with swapped operands on
// wgmma: the dequantized weights are the register A operand (a packed 64-channel tile is exactly
// one warpgroup's 64 x 16 A fragment per K step: warp w takes atom row w), the routing block's
// tokens are the MMA N dimension (kBM, any multiple of 8 up to 256) read from shared memory.
//
// Work items are (run of routing blocks, N tile): up to kItems consecutive routing blocks of one
// expert share each weight stage (one weight pass per run of up to kTile = kItems x kBM tokens),
// and the wgmma N is the item's blocks x kBM, so a part-filled run costs neither a second weight
// pass nor MMAs on empty blocks (one instantiation of the K loop per block count, or per compiled
// width of kWidths, an item running at the narrowest that holds it).
// Roles (one CTA per SM, persistent over items):
// * one producer warpgroup fills a kStages ring: the packed atoms of the tile with 1-D bulk copies
//   (contiguous runs, L2 evict-first) and the tokens' activation rows with 16-byte cp.async into
//   128-byte-swizzled K-major tiles (natural K order, as the layout's A fragments) or, where each
//   routing block's rows are consecutive rows of `a` (kTmaRows: the grouped modes), with one 2-D
//   tensor copy per block and 64-K slice, which the copy engine swizzles; an item's
//   slots, rows and top-k weights are read once, into its first stage's header and the
//   producer's row buffer;
// * kConsumers warpgroups each own kMT 64-channel tiles of the CTA's N tile: per K group of 32 (per
//   K step of 16 with kCommitPerStep) they dequantize (bit-exact, as the decode kernel) into one of
//   two register buffers while the wgmma group of the previous one runs (commit, then wait_group 1
//   before reusing a buffer), and release a stage as soon as the last wgmma reading it has retired;
// * the epilogue (slots and weights copied from the item's first stage) scales by the top-k weight
//   (or, fused SiLU-and-mul, combines a warpgroup's gate and up tiles), stages bf16 rows of a
//   warpgroup's channels in shared memory (stmatrix, transposed) and writes whole 16-byte chunks
//   of the output rows.
// Registers move from the producer to the consumers with setmaxnreg.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "chord/common/activation.cuh"
#include "chord/common/dequant.cuh"
#include "chord/common/ptx.cuh"
#include "chord/common/wgmma.cuh"
#include "chord/indexed/contract.cuh"
#include "chord/indexed/epilogue.cuh"
#include "chord/indexed/scheduler.cuh"

namespace chord::indexed {

// kBM tokens per routing block, up to kItems blocks of one expert per work item (the wgmma N is
// a multiple of kBM up to kTile), kMT 64-channel tiles per consumer warpgroup, kBK input channels
// per pipeline stage (128 or 256), kStages stages, kConsumers consumer warpgroups; with
// kWeightRing (128-K stages only) the weights travel in their own two-slot ring of whole 256-K
// tiles (one bulk copy per 64-channel block) instead of in the stages; with kSiluMul (kMT 2) the
// weight is [gate | up] (N = 2I, I a multiple of 64) and the output silu(gate) * up ([slots, I]);
// with kTopkSum the output is also summed over each token's local slots into args.reduced
// ([tokens, N], N a multiple of 8; see topk_arrive_and_reduce); with kDynamic a CTA takes its
// items after the first from a global counter (wgmma_producer) instead of every gridDim-th; with
// kTmaRows routing block b's rows are rows block_first_row(b) on of `a`, loaded through the tensor
// map args.a_rows (boxes of kBM rows x 64 K) whatever sorted_token_ids says (a padding row is
// loaded, never stored); kWidths (bit j - 1: j blocks; 0: every count) are the item widths the
// K loop is compiled for, an item running at the narrowest one that holds its blocks; kConsumerRegs
// is each consumer thread's register count after setmaxnreg (ptxas pipelines the wgmmas of two
// 168-token widths only with 224); kRowWidths (bit j - 1: 8 j tokens) are token counts between
// those the K loop is also compiled for: an item then runs at the narrowest compiled count that
// holds its last real row, so a part-filled block costs only the wgmma columns it needs. With
// kNRun (K <= kBK = 256: one stage per item) a CTA takes runs of up to kNRun consecutive N tiles
// of one item: the run's activation rows are loaded once, into a resident tile the consumers read
// for every N tile of the run, and the stages hold weights only. With kPingPong (runs only) the two
// consumer warpgroups take turns on the tensor cores, one item each, so that one's epilogue runs
// while the other's wgmmas do. kWholeStages: K is a multiple of kBK, so that every stage holds
// kGroups groups and the K loop has no bound to check. kSubnormal: every scale is below 2^-5 in
// magnitude, so the consumers dequantize with one fma per A register (dequant.cuh), with the pairs at
// bit 4 in place unless kShiftPairs. kTailParts (0: off): where the whole items leave a last round
// of at most half the grid, its items are cut along K into up to kTailParts parts of whole stages
// (scheduler.cuh tail_split), each part's fp32 partial goes to the workspace and the last part to
// arrive sums them in part order and runs the epilogue; with kTailBlocks instead into up to
// kTailParts runs of its routing blocks, each an item of its own over the whole K (the same bits as
// the uncut item, no workspace). With kCtaPair the kernel runs in clusters of two CTAs that take each
// item's two N tiles side by side: each gathers half of the item's activation rows and pushes its
// half into the other's stage with one shared-to-shared bulk copy per 64-K slice, so an item's rows
// are gathered once per pair of N tiles (the 16-byte gathers' instructions are what the indexed
// routing pays over tensor copies: docs/optimization.md, session 66). With kPrefetchRows the gathers
// of a stage also ask L2 for each row's lines of the next stage (its items, on two stages, wait on
// rows read from DRAM; docs/optimization.md, session 67). With kStreamOut the weights are copied with
// an evict-normal L2 policy and the output stored with streaming stores (the down GEMMs: session 69).
template <int kBM_, int kItems_, int kMT_, int kBK_, int kStages_, int kConsumers_, bool kWeightRing_ = false,
          bool kSiluMul_ = false, bool kTopkSum_ = false, bool kDynamic_ = false, bool kTmaRows_ = false,
          unsigned kWidths_ = 0, int kConsumerRegs_ = 216, unsigned kRowWidths_ = 0, int kNRun_ = 0,
          bool kPingPong_ = false, bool kWholeStages_ = false, bool kSubnormal_ = false, bool kShiftPairs_ = false,
          int kTailParts_ = 0, bool kTailBlocks_ = false, bool kCtaPair_ = false, bool kPrefetchRows_ = false,
          bool kStreamOut_ = false>
struct WgmmaConfig {
  static constexpr int kBM = kBM_;
  static constexpr int kItems = kItems_;
  static constexpr int kTile = kBM * kItems;  // tokens of the widest item
  static constexpr int kMT = kMT_;
  static constexpr int kBK = kBK_;
  static constexpr int kStages = kStages_;
  static constexpr int kConsumers = kConsumers_;
  static constexpr bool kWeightRing = kWeightRing_;
  static constexpr bool kSiluMul = kSiluMul_;
  static constexpr bool kTopkSum = kTopkSum_;
  static constexpr bool kDynamic = kDynamic_;  // items from a global counter (args.counters)
  static constexpr bool kTmaRows = kTmaRows_;  // activation rows by tensor copies (args.a_rows)
  // Whether the grouped contiguous mode's routing (args.m_indices) is compiled in (wgmma.py
  // reads_contiguous_rows): tensor-copy kernels of two consumers whose routing blocks divide the
  // mode's 128-row segments (its 64-row blocks and the wide items' 16 or 32), so no block spans
  // two experts. Elsewhere the branch made the producer spill (four consumers; 40- and 56-row blocks).
  static constexpr bool kContiguousRows = kTmaRows_ && kConsumers_ == 2 && 128 % kBM_ == 0;
  static constexpr int kNRun = kNRun_;           // N tiles per run (0: items of one N tile)
  static constexpr bool kResident = kNRun_ > 0;  // the run's activation tile stays in shared memory
  static constexpr bool kPingPong = kPingPong_;
  static constexpr bool kWholeStages = kWholeStages_;
  static constexpr int kTailParts = kTailParts_;
  static constexpr bool kTailBlocks = kTailBlocks_;
  static constexpr bool kSplitK = kTailParts_ > 0 && !kTailBlocks_;  // the tail's parts along K
  static constexpr bool kCtaPair = kCtaPair_;  // clusters of two CTAs sharing each item's gathered rows
  static_assert(!kCtaPair || (!kTmaRows_ && kNRun_ == 0 && kTailParts_ == 0),
                "pairs share gathered rows of items of one N tile, uncut");
  static constexpr bool kPrefetchRows = kPrefetchRows_;  // the next stage's rows asked of L2 with a stage's gathers
  // The weights copied with an evict-normal L2 policy (else evict-first) and the output stored with streaming stores:
  // the down GEMMs, whose weights an expert's other blocks read again while their output passes through L2.
  static constexpr bool kStreamOut = kStreamOut_;
  static_assert(!kPrefetchRows || !kTmaRows_, "rows are prefetched where they are gathered");
  __device__ __forceinline__ static uint64_t weight_policy() {
    return kStreamOut ? ptx::policy_evict_normal() : ptx::policy_evict_first();
  }
  static constexpr Dequant kDequant =
      !kSubnormal_ ? Dequant::kSubMul : kShiftPairs_ ? Dequant::kFmaShifted : Dequant::kFmaInPlace;
  // Whether items of j blocks have their own K loop (else they run at the next compiled width: the
  // extra blocks' rows are padding, computed and never stored). ptxas pipelines the wgmmas of a
  // few widths up to 144 tokens; with every width up to 168 it serializes them (C7512).
  static constexpr bool compiled_width(int j) {
    return kWidths_ == 0 || j >= kItems_ || ((kWidths_ >> (j - 1)) & 1u);
  }
  static constexpr unsigned kRowWidths = kRowWidths_;
  // Whether the K loop is compiled for 8 j tokens: a compiled block count, or one of kRowWidths.
  static constexpr bool compiled_tokens(int j) {
    return (8 * j % kBM_ == 0 && compiled_width(8 * j / kBM_)) || ((kRowWidths_ >> (j - 1)) & 1u);
  }
  static_assert(kBM_ * kItems_ / 8 > 32 || (kRowWidths_ >> (kBM_ * kItems_ / 8 - 1)) == 0,
                "row widths: narrower than the widest item");
  static_assert(!(kSiluMul && kTopkSum), "SiLU-and-mul belongs to gate_up, the top-k sum to down");
  static_assert(!kSiluMul || kMT_ == 2, "SiLU-and-mul pairs each warpgroup's gate tile with its up tile");
  static_assert(!kWeightRing || kBK_ == 128, "the weight ring holds whole 256-K tiles under 128-K stages");
  static_assert(kBM % 8 == 0 && kBM >= 8 && kTile <= 256, "the token tile is the wgmma N: 8..256, step 8");
  static_assert(kItems >= 1 && kItems <= 32, "an item's blocks are found with one warp ballot");
  static_assert(kMT >= 1 && kMT * kTile <= 352, "accumulators: kMT * kTile / 2 registers per thread");
  static_assert(kBK == 128 || kBK == 256, "a stage is half or all of a 256-wide packed K tile");
  static_assert(!kResident || (kBK == 256 && !kWeightRing), "runs: one stage of whole-K weights per N tile");
  static_assert(!kPingPong || (kResident && kConsumers_ == 2), "ping-pong: two warpgroups, items of one stage");
  // (The weight ring's items, 144-168 tokens, spill in the K loop with it: ptxas.)
  static_assert(kTailParts_ == 0 || (kTailParts_ >= 2 && kTailParts_ <= 32 && !kResident && (kTailBlocks_ || !kWeightRing)),
                "split tail: 2..32 parts (Header::width's bits) of items of one N tile, weights in the stages");
  static_assert(!kTailBlocks_ || (kTailParts_ >= 2 && kItems_ >= 2), "a tail cut into blocks: items of 2+ blocks");
  static constexpr int kThreads = 128 * (kConsumers + 1);  // + the producer warpgroup
  static constexpr int kBN = 64 * kMT * kConsumers;         // output channels per N tile
  static constexpr int kBlocks = kBN / 64;                  // 64-channel packed blocks per N tile
  static constexpr int kOutMT = kSiluMul ? 1 : kMT;         // 64-channel output tiles per warpgroup
  // One wgmma commit group per K step instead of per K group (consume_group_by_step) from 128
  // accumulators x tokens up: there ptxas cannot fit an A buffer per K group of a stage next to
  // the accumulators and would serialize every wgmma (C7511/C7512); below, the per-group commits
  // measured faster (docs/optimization.md, session 8), row widths included (session 17 found a
  // second width serializing them; with today's K loop nvcc 13.0's ptxas pipelines every width,
  // session 37), except with four consumer warpgroups, whose smaller register share holds no A
  // buffer per K group (session 24); three, at 128 registers, hold one at 24-32 tokens (session 42).
  // With whole stages (no K bound: two A buffers suffice, session 29) the one-block items, and items of
  // several blocks compiled without row widths or the weight ring, commit per K group at any width:
  // ptxas pipelines the 72-104-token one-block items and the 64 x 2 items so (session 61: planned for the
  // 64 x 2 gate_up items and the downs' one-block items, wgmma.py GROUP_*), not the 64 x 2 items with row
  // widths nor the ring's wide items.
  static constexpr bool kGroupCommitsWhole = kWholeStages_ && (kItems_ == 1 || (kRowWidths_ == 0 && !kWeightRing_));
  static constexpr bool kCommitPerStep = (kMT * kTile >= 128 && !kGroupCommitsWhole) || kConsumers_ > 3;
  static constexpr int kOutBN = 64 * kOutMT * kConsumers;   // output channels per N tile
  // Channels of an output row for a weight of n rows.
  __device__ __forceinline__ static int out_channels(int n) { return kSiluMul ? n / 2 : n; }
  // Global 64-channel block (of `blocks`) of the N tile's block b, which is consumer b / kMT's tile
  // b % kMT. With kSiluMul, output block g's gate is block g and its up block g + blocks / 2, so a
  // warpgroup holds both halves of its outputs; `blocks` (no rows) past the outputs.
  __device__ __forceinline__ static int block_of(int ntile, int b, int blocks) {
    if constexpr (kSiluMul) {
      const int g = ntile * kConsumers + b / kMT;
      return g < blocks / 2 ? (b % kMT) * (blocks / 2) + g : blocks;
    } else {
      return ntile * kBlocks + b;
    }
  }
  static constexpr int kGroups = kBK / kAtomK;              // scale groups (32 K) per stage
  static constexpr int kSubtiles = kBK / 64;                // 64-K swizzled activation tiles per stage
  static_assert(!kTmaRows || kItems * kSubtiles <= 32, "one producer lane per tensor copy of a stage");
  static constexpr int kRowsPerLane = (kTile + 31) / 32;
  static constexpr int kActTileBytes = kTile * 128;         // one 64-K tile of kTile token rows
  // Activations: in every stage, or with kResident once per run in a tile before the stages (one
  // tile and a third stage measured faster than two tiles, session 21).
  static constexpr int kStageActBytes = kResident ? 0 : kSubtiles * kActTileBytes;
  static constexpr int kResidentBytes = kResident ? kSubtiles * kActTileBytes : 0;  // a multiple of 4 KB
  // Scale groups of stage kc of a K with kgroups groups: kGroups, but in a short last stage.
  __device__ __forceinline__ static int stage_groups(int kc, int kgroups) {
    return kWholeStages ? kGroups : min(kGroups, kgroups - kc * kGroups);
  }
  // Weights of one 64-channel block: kTileRows atom rows of kWeightGroups groups.
  static constexpr int kWeightGroups = kWeightRing ? kTileGroups : kGroups;
  static constexpr int kWeightBlockBytes = kTileRows * kWeightGroups * kAtomBytes;
  static constexpr int kStageWeightBytes = kWeightRing ? 0 : kBlocks * kWeightBlockBytes;
  static constexpr int kStageBytes = (kStageActBytes + kStageWeightBytes + 1023) / 1024 * 1024;
  static constexpr int kWeightSlots = kWeightRing ? 2 : 0;
  static constexpr int kStagesOffset = kResidentBytes;
  static constexpr int kWeightOffset = kStagesOffset + kStages * kStageBytes;

  struct alignas(16) Header {
    int item;   // work item (-1: no more work)
    int ntile;  // N tile of the item
    int width;  // with kRowWidths its tokens up to its last real row, else its blocks (1..kItems);
              // with kResident also kRunFirst / kRunLast
    int block;  // its first routing block (row r's routing position: block * kBM + r)
    int slots[kTile];      // flat slot of each token row (>= num_slots: padding)
    float weights[kTile];  // top-k weight of each token row (1 without top-k weights)
  };
  // Epilogue: per consumer warpgroup, the item's slots, weights (and local-slot masks with
  // kTopkSum), then a staging tile of
  // kEpiTokens token rows x kMT * 64 channels in bf16 (rows padded by 16 bytes: the 8 rows of one
  // stmatrix matrix fall in 8 different 16-byte bank groups), stored in passes of kEpiGroups
  // 8-token groups: 4, or 2 for four warpgroups' items beyond 40 tokens, whose two stages fit
  // shared memory only so.
  static constexpr int kEpiGroups = kConsumers_ > 2 && kTile > 40 ? 2 : 4;
  static constexpr int kEpiTokens = (kTile / 8 < kEpiGroups ? kTile / 8 : kEpiGroups) * 8;
  static constexpr int kEpiRowBytes = kMT * 128 + 16;
  static constexpr int kEpiInfoBytes = kTile * (kTopkSum ? 12 : 8);
  static constexpr int kEpiBytes = kEpiInfoBytes + kEpiTokens * kEpiRowBytes;

  static constexpr int kBarOffset = kWeightOffset + kWeightSlots * kBlocks * kWeightBlockBytes;
  static constexpr int kWeightBarOffset = kBarOffset + 2 * kStages * 8;  // full, then empty, per weight slot
  static constexpr int kResidentBarOffset = kWeightBarOffset + 2 * kWeightSlots * 8;  // full, then empty
  // With kCtaPair: per stage the barrier of this CTA's own gathers, then per item-id slot (two) the
  // barrier the second CTA waits on for the id and the one the first waits on for the slot's reuse.
  static constexpr int kCtaPairBarOffset = kResidentBarOffset + (kResident ? 16 : 0);
  static constexpr int kHeaderOffset = kCtaPairBarOffset + (kCtaPair ? ((kStages + 4) * 8 + 15) / 16 * 16 : 0);
  // With kTopkSum, per stage the local-slot mask (local_slots) of each row's token, next to its header.
  static constexpr int kMasksOffset = kHeaderOffset + kStages * static_cast<int>(sizeof(Header));
  static constexpr int kScratchOffset = kMasksOffset + (kTopkSum ? kStages * kTile * 4 : 0);
  static constexpr int kEpiOffset = kScratchOffset + 32 * 4;  // two ints per warp (compact_items)
  // The producer's activation rows of its current and previous item (slot / top_k, -1: padding).
  static constexpr int kRowsOffset = kEpiOffset + kConsumers * kEpiBytes;
  static constexpr int kListOffset = kRowsOffset + 2 * kTile * 4;
  static constexpr int smem_bytes(int list_cap) { return kListOffset + 4 * list_cap; }
  // Arrivals completing a full barrier: every producer thread's cp.async completion (none with
  // kTmaRows; with kCtaPair the pusher's one, once they landed), plus the header writer's arrive (which
  // also announces the bulk-copy bytes, the other CTA's pushed half included).
  static constexpr int kFullArrivals = (kTmaRows || kResident ? 0 : kCtaPair ? 1 : 128) + 1;
  // The resident tile's arrivals: every producer thread's cp.async completion, or the tensor copies' bytes.
  static constexpr int kResidentArrivals = kTmaRows ? 1 : 128;
  static constexpr int kEmptyArrivals = 4 * kConsumers;  // lane 0 of every consumer warp
  // A stage's: with kCtaPair both CTAs' consumers (the other's half of it is pushed in from there).
  static constexpr int kStageEmptyArrivals = kEmptyArrivals * (kCtaPair ? 2 : 1);
  // setmaxnreg moves registers inside the pool allocated at launch (ptxas's cap at one CTA per SM:
  // 168 per thread for 384 threads, 128 for 512, 96 for 640): kConsumerRegs per consumer thread,
  // the rest to the producer (72 x 128 + 216 x 256 = 168 x 384 by default). An increase beyond the
  // pool would block forever. With one consumer warpgroup every thread already gets up to 255.
  static constexpr int kRegPool = 65536 / kThreads / 8 * 8 < 168 ? 65536 / kThreads / 8 * 8 : 168;
  static constexpr int kConsumerRegs = kConsumerRegs_;
  static constexpr int kProducerRegs = (kRegPool * kThreads - kConsumerRegs * 128 * kConsumers) / 128 / 8 * 8;
  static_assert(kConsumers == 1 || (kProducerRegs >= 24 && kConsumerRegs % 8 == 0 && kConsumerRegs <= 256),
                "setmaxnreg takes multiples of 8 in [24, 256]");
  static_assert(kConsumers == 1 || kProducerRegs * 128 + kConsumerRegs * 128 * kConsumers <= kRegPool * kThreads,
                "setmaxnreg beyond the launch register pool deadlocks");
};

// Header::width flags of kResident: the first N tile of a run (its slots, weights and activation
// tile are new) and the last (the consumers release the activation tile after its wgmmas).
constexpr int kRunFirst = 1 << 16;
constexpr int kRunLast = 1 << 17;
constexpr int kWidthMask = kRunFirst - 1;
// Header fields of a split tail's part (kTailParts): Header::width bits kPartShift up its part and
// kPartsShift up the item's parts (0: a whole item), Header::ntile bits kTailShift up its tail item.
constexpr int kPartShift = 18;
constexpr int kPartsShift = 24;
constexpr int kTailShift = 16;
constexpr int kPartMask = 63;

// kCtaPair: where the launch's unit count, used blocks and listed flag sit in the CTA's scratch ints
// (after the item-id slots, written once compact_items is done with them).
constexpr int kPairFacts = 16;

// Named barriers (id 0 is __syncthreads): the producer warpgroup, each consumer warpgroup (2 + c),
// and with kPingPong each consumer warpgroup's turn on the tensor cores (kTurnBarrier + c).
constexpr int kProducerBarrier = 1;
constexpr int kTurnBarrier = 4;
using ptx::named_barrier;

// 16-byte asynchronous copy global -> shared through L2 only, with an L2 cache policy; completion
// is signalled with cp_async_arrive_noinc.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "l"(policy)
               : "memory");
}

// The barrier receives one arrival once every cp.async this thread issued so far has landed
// (the arrival is counted in the barrier's expected count: .noinc).
__device__ __forceinline__ void cp_async_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

// Routing blocks of the item starting at `block` (1..kItems): the run of `expert` from it, cut at
// kItems blocks and, when the blocks are walked rather than listed, at the next multiple of kItems
// (where the next item of a long run starts). Every lane of the calling warp gets the count.
template <int kItems>
__device__ __forceinline__ int item_blocks(const Args& args, int used, int block_m, int block, int expert, bool listed) {
  if constexpr (kItems == 1) {
    return 1;
  } else {
    const int j = threadIdx.x % 32;
    const int b = block + j;
    const bool same = j == 0 || (j < kItems && b < used && (listed || b % kItems != 0) &&
                                 block_expert(args, b, block_m) == expert);
    return __ffs(~__ballot_sync(0xffffffffu, same)) - 1;
  }
}

template <class Cfg>
__device__ __forceinline__ void wgmma_producer(const Args& args, uint8_t* smem, const uint32_t* list,
                                               int total_, int used_, bool listed_, int* item_ids) {
  using Header = typename Cfg::Header;
  const int pw = (threadIdx.x / 32) % 4;  // producer warp 0..3
  const int lane = threadIdx.x % 32;
  const int n16 = (args.n + kAtomN - 1) / kAtomN;
  const int kgroups = args.k / kAtomK;
  const int num_kc = (kgroups + Cfg::kGroups - 1) / Cfg::kGroups;
  const int ntiles = (n16 + 4 * Cfg::kBlocks - 1) / (4 * Cfg::kBlocks);
  const int blocks = (n16 + kTileRows - 1) / kTileRows;  // 64-channel blocks of the weight
  const bool weighted = args.topk_weights != nullptr;
  const uint32_t smem_base = ptx::smem_addr(smem);
  const uint32_t full0 = smem_base + Cfg::kBarOffset;
  const uint32_t empty0 = full0 + Cfg::kStages * 8;
  Header* headers = reinterpret_cast<Header*>(smem + Cfg::kHeaderOffset);
  uint32_t* const masks = reinterpret_cast<uint32_t*>(smem + Cfg::kMasksOffset);

  const uint32_t wfull0 = smem_base + Cfg::kWeightBarOffset;  // (weight ring only)
  const uint32_t wempty0 = wfull0 + Cfg::kWeightSlots * 8;
  int wslot = 0;
  uint32_t wphase = 0;
  int* const row_buffers = reinterpret_cast<int*>(smem + Cfg::kRowsOffset);
  int row_buffer = 0;
  // A thread copies rows 4 pw + lane / 8 + 16 i of the item. Up to five of them it keeps in
  // registers and issues a stage's copies back to back; beyond, one shared-memory read per row
  // paces them (they share the memory pipe with the consumers' weight reads): measured faster at
  // 32-80-token items and at 128-token ones respectively (docs/optimization.md, session 6).
  // (kCtaPair: a CTA gathers at most half the item's rows plus 4, below.)
  constexpr int kRowIters = ((Cfg::kCtaPair ? Cfg::kTile / 2 + 4 : Cfg::kTile) + 15) / 16;
  constexpr bool kRowsInRegisters = kRowIters <= 5;
  int a_rows[kRowsInRegisters ? kRowIters : 1];
  int stage = 0;
  uint32_t phase = 0;
  const uint32_t resident_full = smem_base + Cfg::kResidentBarOffset;  // (kResident only)
  uint32_t resident_phase = 0;
  // kCtaPair: this CTA's rank in its cluster of two (read where used: the register it held through the
  // loop made the wide items' producer spill, ptxas) and the barriers of the pair (kCtaPairBarOffset).
  const auto rank = [] { return Cfg::kCtaPair ? ptx::cluster_rank() : 0u; };
  const uint32_t gathered0 = full0 - Cfg::kBarOffset + Cfg::kCtaPairBarOffset;
  const uint32_t item_full0 = gathered0 + Cfg::kStages * 8, item_free0 = item_full0 + 16;
  // kCtaPair: the launch's unit count, used blocks and whether they are listed, read from shared memory
  // where used (kept in registers through the loop they spilled next to the pusher, ptxas).
  const int* const facts = item_ids + kPairFacts;
  const auto total = [&] { return Cfg::kCtaPair ? facts[0] : total_; };
  const auto used = [&] { return Cfg::kCtaPair ? facts[1] : used_; };
  const auto listed = [&] { return Cfg::kCtaPair ? facts[2] != 0 : listed_; };
  // Work units: items (routing blocks, N tile) or, with kResident, runs of up to kNRun N tiles of
  // one item's routing blocks. CTA c takes unit c, then c + G, c + 2G ... (strided) or, with
  // kDynamic, G + the next value of a global counter: the strided order gives some CTAs only the
  // expensive items when item costs repeat with a period dividing G (TP8 gate_up: an expert's 128-
  // and 64-token items, two N tiles each). Warp 0 requests the next unit as it starts one (the
  // atomic's latency hides behind the unit) and hands it to the other warps through item_ids (two
  // slots: a warp may still read the previous one while warp 0 writes the next).
  // kCtaPair: a unit is a pair of N tiles (ntiles is even), the cluster's CTAs take one each; the first
  // CTA requests the units (with kDynamic) and hands each to the second through its item_ids (the second
  // acknowledges each slot before the first reuses it: units of no stages may follow each other).
  const int units_per_block = Cfg::kResident ? (ntiles + Cfg::kNRun - 1) / Cfg::kNRun : Cfg::kCtaPair ? ntiles / 2 : ntiles;
  constexpr int kCtasPerUnit = Cfg::kCtaPair ? 2 : 1;
  if (Cfg::kCtaPair && ntiles % 2 != 0) __trap();  // the host refuses such an N
  int pending = 0;
  for (int it = 0, item = static_cast<int>(blockIdx.x) / kCtasPerUnit;; ++it) {
    // kTailParts: the whole items, then the split tail's parts (listed items only). Worked out per
    // unit from the grid size read each time: kept in registers through the loop they spilled (ptxas).
    TailSplit split{total(), 1};
    if constexpr (Cfg::kTailParts > 0) {
      int grid;
      asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(grid));
      if (listed()) split = tail_split(total(), grid, Cfg::kTailBlocks ? Cfg::kItems : num_kc, Cfg::kTailParts);
    }
    const int units = split.units(total());
    if constexpr (Cfg::kDynamic) {
      if (pw == 0) {
        if (!Cfg::kCtaPair && it > 0) item = static_cast<int>(gridDim.x) + __shfl_sync(0xffffffffu, pending, 0);
        if (lane == 0) {
          const int slot = it & 1;
          if (Cfg::kCtaPair && rank() == 1) {
            ptx::mbarrier_wait_cluster(item_full0 + slot * 8, (it >> 1) & 1);
          } else {
            if (Cfg::kCtaPair && it >= 2) ptx::mbarrier_wait_cluster(item_free0 + slot * 8, ((it >> 1) - 1) & 1);
            // kCtaPair: the next unit requested as it is needed, not one ahead: the id kept through the unit
            // spilled next to the pusher (ptxas); the stages already filled hide the request's latency.
            if (Cfg::kCtaPair && it > 0) item = static_cast<int>(gridDim.x) / 2 + atomicAdd(args.counters, 1);
            item_ids[slot] = item;
            if (!Cfg::kCtaPair && item < units) pending = atomicAdd(args.counters, 1);
            if constexpr (Cfg::kCtaPair) {
              const uint32_t id = ptx::smem_addr(item_ids + slot);
              ptx::st_cluster(ptx::peer_addr(id, 1), item);
              ptx::mbarrier_arrive_cluster(ptx::peer_addr(item_full0 + slot * 8, 1));
            }
          }
        }
      }
      named_barrier(kProducerBarrier, 128);
      item = item_ids[it & 1];
      // kCtaPair: every producer thread of the second CTA has read the previous slot (it passed this
      // barrier): the first may write it again.
      if (Cfg::kCtaPair && rank() == 1 && it > 0 && pw == 0 && lane == 0) {
        ptx::mbarrier_arrive_cluster(ptx::peer_addr(item_free0 + ((it - 1) & 1) * 8, 0));
      }
    } else if (it > 0) {
      // The grid size read per unit, not kept from the start: held in a register through the loop it
      // spilled in the tensor-copy producer of four consumer warpgroups (64 registers; ptxas).
      int grid;
      asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(grid));
      item += grid / kCtasPerUnit;
    }
    const bool done = item >= units;
    int block = 0, expert = -1, ntile = 0, nsub = 0, run_tiles = 1;
    int work = item, kc0 = 0, kc1 = num_kc;  // the unit's item and stages
    int part_bits = 0, tail_bits = 0;       // (Header::width and ::ntile of a split tail's part)
    if (Cfg::kSplitK && !done && item >= split.full) {
      const int v = item - split.full, part = v % split.parts;
      work = split.full + v / split.parts;
      const int2 stages = part_stages(part, split.parts, num_kc);
      kc0 = stages.x;
      kc1 = stages.y;
      part_bits = (part << kPartShift) | (split.parts << kPartsShift);
      tail_bits = (v / split.parts) << kTailShift;
    }
    if constexpr (Cfg::kTailBlocks) {
      if (!done && item >= split.full) work = split.full + (item - split.full) / split.parts;
    }
    if (!done) {
      const int cb = work / units_per_block;
      ntile = work - cb * units_per_block;
      if constexpr (Cfg::kCtaPair) ntile = 2 * ntile + static_cast<int>(rank());
      if constexpr (Cfg::kResident) {
        ntile *= Cfg::kNRun;
        run_tiles = min(Cfg::kNRun, ntiles - ntile);
      }
      if (listed()) {
        const uint32_t entry = list[cb];
        block = static_cast<int>(entry & 0xffffu);
        expert = static_cast<int>(entry >> 16);
      } else {
        block = cb;
        expert = block_expert(args, cb, Cfg::kBM);
        // Walking every block: an item starts at a run's first block or at a multiple of kItems.
        if (Cfg::kItems > 1 && block % Cfg::kItems != 0 && block > 0 &&
            block_expert(args, block - 1, Cfg::kBM) == expert) {
          continue;
        }
      }
      if (static_cast<unsigned>(expert) >= static_cast<unsigned>(args.num_experts)) continue;  // not local
      nsub = item_blocks<Cfg::kItems>(args, used(), Cfg::kBM, block, expert, listed());
      if constexpr (Cfg::kTailBlocks) {
        if (item >= split.full) {
          // Part p of a tail item of nsub blocks: blocks [p q, min(nsub, (p + 1) q)), q = ceil(nsub / parts),
          // an item of its own (none where the item has too few blocks for this part).
          const int part = (item - split.full) % split.parts, per = (nsub + split.parts - 1) / split.parts;
          if (part * per >= nsub) continue;
          block += part * per;
          nsub = min(per, nsub - part * per);
        }
      }
    }
    const int rows_used = nsub * Cfg::kBM;  // the item's blocks are consecutive in the routing
    // The rows this CTA gathers, [own_lo, own_hi): all, or with kCtaPair the first CTA the first half
    // (rounded to 8 rows: a thread's rows keep their swizzled chunk) and the second the rest.
    const int half = 8 * ((rows_used + 8) / 16);
    const int own_lo = (Cfg::kCtaPair && rank() == 1) ? half : 0;
    const int own_hi = (Cfg::kCtaPair && rank() == 0) ? half : rows_used;
    // Alternate row buffers: a producer warp may still copy the previous item's last stage while
    // warp 0 writes this item's rows (the warps meet once per item, at its first stage).
    int* const item_rows = row_buffers + row_buffer * Cfg::kTile;
    row_buffer ^= 1;
    // The item's 64-channel blocks (Cfg::block_of) have 4 atom rows, except the last block of N.
    const int32_t* expert_tiles = args.tiles + static_cast<int64_t>(expert < 0 ? 0 : expert) * n16 * kgroups * kAtomWords;
    int width = 0;  // Header::width of the item (warp 0)
    for (int j = 0; j < run_tiles; ++j, ++ntile) {
      const bool first = j == 0;  // of a run: the item's slots, rows (and resident activations) are loaded
      for (int kc = kc0; kc < (done ? kc0 + 1 : kc1); ++kc) {
        const int nkg = Cfg::stage_groups(kc, kgroups);
        const uint32_t full = full0 + stage * 8;
        const int k0 = kc * Cfg::kBK;
        // kTmaRows: the stage's (or the resident tile's) tensor copies, one per routing block and 64-K slice inside K.
        const int act_subs = min(Cfg::kSubtiles, (args.k - k0 + 63) / 64);
        // (kCtaPair: the other CTA's half, pushed in; this CTA's own cp.async arrive instead.)
        const uint32_t act_bytes =
            done ? 0u
            : Cfg::kTmaRows ? static_cast<uint32_t>(nsub * act_subs * Cfg::kBM * 128)
            : Cfg::kCtaPair ? static_cast<uint32_t>((rows_used - own_hi + own_lo) * act_subs * 128) : 0u;
        ptx::mbarrier_wait(empty0 + stage * 8, phase ^ 1);
        Header& h = headers[stage];
        if (kc == kc0) {
          if (pw == 0) {
            if (first) {
              int last_real = -1;  // the item's last row with a real slot
              if (!done) {
                // The item's slots and top-k weights (and, summing the top-k, its tokens' local slots),
                // read once per item (all loads of a lane in flight together) into its first stage's
                // header, from which the consumers copy them for the epilogue; its activation rows into
                // the producer's row buffer.
                constexpr int kBatch = Cfg::kRowsPerLane < 2 ? Cfg::kRowsPerLane : 2;  // loads in flight per lane
#pragma unroll 1
                for (int r0 = 0; r0 < Cfg::kRowsPerLane; r0 += kBatch) {
                  int slot[kBatch];
#pragma unroll
                  for (int r = 0; r < kBatch; ++r) {
                    const int row = lane + 32 * (r0 + r);
                    slot[r] = row < rows_used ? block_slot<Cfg::kContiguousRows>(args, block, row, Cfg::kBM, expert) : args.num_slots;
                  }
#pragma unroll
                  for (int r = 0; r < kBatch; ++r) {
                    const int row = lane + 32 * (r0 + r);
                    const bool real = slot[r] >= 0 && slot[r] < args.num_slots;
                    if (Cfg::kRowWidths != 0 && real) last_real = row;
                    if (row < Cfg::kTile) {
                      h.slots[row] = slot[r];
                      item_rows[row] = real ? slot[r] / args.top_k : -1;
                      h.weights[row] = (weighted && real) ? __ldg(args.topk_weights + slot[r]) : 1.0f;
                      if constexpr (Cfg::kTopkSum) {
                        masks[stage * Cfg::kTile + row] = real ? local_slots(args, slot[r] / args.reduce_top_k) : 0u;
                      }
                    }
                  }
                }
              }
              width = Cfg::kRowWidths != 0 ? __reduce_max_sync(0xffffffffu, last_real) + 1 : nsub;
            }
            if (lane == 0) {
              h.item = done ? -1 : item;
              h.ntile = ntile | tail_bits;
              const int run_flags = (first ? kRunFirst : 0) | (j == run_tiles - 1 ? kRunLast : 0);
              h.width = width | (Cfg::kResident ? run_flags : 0) | part_bits;
              h.block = block;
            }
          }
          if (first) {
            named_barrier(kProducerBarrier, 128);  // the item's rows are visible to the producer warps
            if constexpr (kRowsInRegisters) {
#pragma unroll
              for (int i = 0; i < kRowIters; ++i) {
                const int row = own_lo + 4 * pw + lane / 8 + 16 * i;
                a_rows[i] = (!done && row < own_hi) ? item_rows[row] : -1;
              }
            }
          }
        }
        const uint32_t dst = smem_base + Cfg::kStagesOffset + stage * Cfg::kStageBytes;
        if (pw == 0) {
          if constexpr (Cfg::kWeightRing) {
            // The stage holds activations only; an even stage also starts the next 256-K weight tile
            // (every 64-channel block's atoms of it in one bulk copy) in the weight ring.
            if (lane == 0) ptx::mbarrier_arrive_expect_tx(full, act_bytes);
            if (!done && kc % 2 == 0) {
              const uint32_t wfull = wfull0 + wslot * 8;
              ptx::mbarrier_wait(wempty0 + wslot * 8, wphase ^ 1);
              const int kt = kc / 2;
              const int width = min(kTileGroups, kgroups - kt * kTileGroups);
              uint32_t bytes = 0;
#pragma unroll
              for (int b = 0; b < Cfg::kBlocks; ++b) {
                bytes += static_cast<uint32_t>(max(min(kTileRows, n16 - Cfg::block_of(ntile, b, blocks) * kTileRows), 0) *
                                               width * kAtomBytes);
              }
              __syncwarp();
              if (lane == 0) ptx::mbarrier_arrive_expect_tx(wfull, bytes);
              if (lane < Cfg::kBlocks) {
                const int nb = Cfg::block_of(ntile, lane, blocks);
                const int rows = min(kTileRows, n16 - nb * kTileRows);
                const int32_t* tile = expert_tiles + (static_cast<int64_t>(nb) * kTileRows * kgroups +
                                                      static_cast<int64_t>(rows) * kt * kTileGroups) * kAtomWords;
                const uint32_t wdst = smem_base + Cfg::kWeightOffset + (wslot * Cfg::kBlocks + lane) * Cfg::kWeightBlockBytes;
                if (rows > 0) ptx::bulk_copy_g2s(wdst, tile, rows * width * kAtomBytes, wfull, Cfg::weight_policy());
              }
              if (++wslot == Cfg::kWeightSlots) {
                wslot = 0;
                wphase ^= 1;
              }
            }
          } else {
            // Weights: the item's atoms of this K stage, rows of a block at a stride of nkg atoms.
            uint32_t bytes = Cfg::kResident ? 0u : act_bytes;
            constexpr int kCopies = Cfg::kBK == 256 ? Cfg::kBlocks : Cfg::kBlocks * kTileRows;
#pragma unroll
            for (int b = 0; b < Cfg::kBlocks; ++b) {
              const int rows = min(kTileRows, n16 - Cfg::block_of(ntile, b, blocks) * kTileRows);
              bytes += done ? 0u : static_cast<uint32_t>(max(rows, 0) * nkg * kAtomBytes);
            }
            __syncwarp();
            if (lane == 0) ptx::mbarrier_arrive_expect_tx(full, bytes);
            if (!done && lane < kCopies) {
              const int b = Cfg::kBK == 256 ? lane : lane / kTileRows;
              const int nb = Cfg::block_of(ntile, b, blocks);
              const int rows = min(kTileRows, n16 - nb * kTileRows);
              // K tile kt of block nb starts after kt tiles of `rows` x 8 atoms; inside it each row is
              // `width` atoms (8, or fewer in a short last K tile).
              const int g0 = kc * Cfg::kGroups;
              const int kt = g0 / kTileGroups;
              const int width = min(kTileGroups, kgroups - kt * kTileGroups);
              const int32_t* tile = expert_tiles + (static_cast<int64_t>(nb) * kTileRows * kgroups +
                                                    static_cast<int64_t>(rows) * kt * kTileGroups) * kAtomWords;
              const uint64_t weight_policy = Cfg::weight_policy();  // (made per use: producer registers are few)
              const uint32_t block_dst = dst + Cfg::kStageActBytes + b * kTileRows * Cfg::kGroups * kAtomBytes;
              if constexpr (Cfg::kBK == 256) {
                if (rows > 0) ptx::bulk_copy_g2s(block_dst, tile, rows * nkg * kAtomBytes, full, weight_policy);
              } else {
                const int r = lane % kTileRows;
                if (r < rows) {
                  ptx::bulk_copy_g2s(block_dst + r * nkg * kAtomBytes,
                                     tile + (static_cast<int64_t>(r) * width + g0 % kTileGroups) * kAtomWords,
                                     nkg * kAtomBytes, full, weight_policy);
                }
              }
            }
          }
        }
        // Activations: into the stage or, with kResident, into the resident tile at a run's first N tile
        // once the consumers released it (its barriers instead of the stage's).
        const bool load_rows = !done && (!Cfg::kResident || first);
        uint32_t act_dst = dst, act_full = full;
        if constexpr (Cfg::kResident) {
          act_dst = smem_base;
          act_full = resident_full;
          if (load_rows) {
            ptx::mbarrier_wait(resident_full + 8, resident_phase ^ 1);  // released by the previous run's last tile
            resident_phase ^= 1;
            if (Cfg::kTmaRows && pw == 1 && lane == 0) ptx::mbarrier_arrive_expect_tx(act_full, act_bytes);
            __syncwarp();
          }
        }
        if (Cfg::kTmaRows && load_rows) {
          // Activations: warp 1's lane j * kSubtiles + sub copies 64-K slice sub of the item's block j
          // (kBM consecutive rows of a) to its rows of the stage's slice tile (a multiple of 1024 bytes
          // from the tile's start, so the copy engine's swizzle is the tile's).
          const int j = lane / Cfg::kSubtiles, sub = lane % Cfg::kSubtiles;
          if (pw == 1 && j < nsub && sub < act_subs) {
            ptx::tensor_copy_2d_g2s(act_dst + sub * Cfg::kActTileBytes + j * Cfg::kBM * 128, args.a_rows, k0 + sub * 64,
                                    block_first_row(args, block + j, Cfg::kBM), act_full, ptx::policy_evict_last());
          }
        } else if (load_rows) {
          // Activations, in natural K order (the layout's A fragments are): warp pw copies rows
          // 4 (pw + 4 i) + lane / 8, lane % 8 being the 16-byte chunk of each 64-K slice, into the
          // 128-byte-swizzled K-major tiles of the stage.
          const int chunk = lane % 8;
          const uint64_t act_policy = ptx::policy_evict_last();
          // One row's 16-byte chunk of each 64-K slice of the stage (a slice past K is not copied).
          const auto copy_row = [&](uint32_t row_dst, const char* src, bool whole) {
#pragma unroll
            for (int sub = 0; sub < Cfg::kSubtiles; ++sub) {
              if (whole || k0 + sub * 64 + 8 * chunk < args.k) {
                cp_async_16(row_dst + sub * Cfg::kActTileBytes, src + sub * 128, act_policy);
              }
            }
            if constexpr (Cfg::kPrefetchRows) {
              // The row's 128-byte line `chunk` (64 K) of the next stage into L2 (`src` is this stage's
              // chunk of the row, 16 bytes per chunk on): the gathers one stage on then find it there.
              if (chunk < Cfg::kSubtiles && k0 + Cfg::kBK + 64 * chunk < args.k) {
                ptx::prefetch_l2(src + 2 * Cfg::kBK + (128 - 16) * chunk);
              }
            }
          };
          if constexpr (kRowsInRegisters) {
#pragma unroll
            for (int i = 0; i < kRowIters; ++i) {
              const int row = own_lo + 4 * pw + lane / 8 + 16 * i;
              if (a_rows[i] >= 0) {  // -1: padding, never stored
                copy_row(act_dst + wgmma::sw128_offset(row, chunk),
                         reinterpret_cast<const char*>(args.a + static_cast<int64_t>(a_rows[i]) * args.k + k0 + 8 * chunk),
                         false);
              }
            }
          } else {
            // The per-row work is what paces a wide item's stage (the loop was the producer's hottest
            // code under ncu, session 16): every row of a thread has the same row % 8, hence the
            // same swizzled chunk, 16 rows (2 KB) further on; its source is one 32 x 32 -> 64-bit
            // multiply-add; the K bound is checked in an item's short last stage only.
            const int row0 = 4 * pw + lane / 8;
            const char* const a_stage = reinterpret_cast<const char*>(args.a + k0 + 8 * chunk);
            const uint32_t a_stride = 2u * static_cast<uint32_t>(args.k);
            const auto gather = [&](bool whole) {  // called with a constant: one loop without the checks
              // (kCtaPair: the thread's swizzled offset from its thread index read here, not kept through
              // the producer's loop, where it spilled next to the pusher: ptxas.)
              uint32_t tid = threadIdx.x;
              if constexpr (Cfg::kCtaPair) asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
              uint32_t row_dst = act_dst + wgmma::sw128_offset(4 * ((tid / 32) % 4) + (tid % 32) / 8, tid % 8) + own_lo * 128;
#pragma unroll 1
              for (int row = row0 + own_lo; row < own_hi; row += 16, row_dst += 16 * 128) {
                const int a_row = item_rows[row];
                if (a_row >= 0) copy_row(row_dst, a_stage + static_cast<uint64_t>(static_cast<uint32_t>(a_row)) * a_stride, whole);
              }
            };
            if (k0 + Cfg::kBK <= args.k) {
              gather(true);
            } else {
              gather(false);
            }
          }
        }
        if (!Cfg::kTmaRows && (!Cfg::kResident || load_rows)) cp_async_arrive_noinc(Cfg::kCtaPair ? gathered0 + stage * 8 : act_full);
        if constexpr (Cfg::kCtaPair) {
          // Warp 1 pushes this CTA's half into the other CTA's stage (its empty barrier counted both
          // CTAs' consumers, so it is free there too) once it landed here, one bulk copy per 64-K slice
          // inside K, then lets the consumers in. (Its addresses are worked out again from the barrier's:
          // the stage's and the slices' kept live through the gathers made the producer spill, ptxas.)
          if (pw == 1) {
            const uint32_t bar = gathered0 + stage * 8;
            ptx::mbarrier_wait(bar, phase);
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // cp.async wrote, the bulk copy reads
            const uint32_t own_full = bar - Cfg::kCtaPairBarOffset + Cfg::kBarOffset;
            if (!done && own_hi > own_lo && lane * 64 < args.k - kc * Cfg::kBK && lane < Cfg::kSubtiles) {
              const uint32_t src = bar - Cfg::kCtaPairBarOffset - stage * 8 + Cfg::kStagesOffset + stage * Cfg::kStageBytes +
                                   lane * Cfg::kActTileBytes + own_lo * 128;
              ptx::bulk_copy_s2cluster(ptx::peer_addr(src, rank() ^ 1), src, static_cast<uint32_t>(own_hi - own_lo) * 128,
                                       ptx::peer_addr(own_full, rank() ^ 1));
            }
            __syncwarp();
            if (lane == 0) ptx::mbarrier_arrive(own_full);
          }
        }
        if (++stage == Cfg::kStages) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
    if (done) break;
  }
  if constexpr (Cfg::kDynamic) {
    if (pw == 0 && lane == 0 && rank() == 0) {  // the thread that took this CTA's (cluster's) items
      release_item_counter(args, static_cast<int>(gridDim.x) / kCtasPerUnit);
    }
  }
}

// The A fragment of K step ks (16 K) of one K group of one 64-channel tile, from the group's packed
// words w (this lane's 16 nibbles) and scales sc: four registers (mma.m16n8k16 order: row g, row
// g + 8, row g k+8, row g + 8 k+8) in form kForm (sc from group_scales).
template <int ks, Dequant kForm>
__device__ __forceinline__ void dequant_step(uint32_t (&a)[4], uint2 w, const GroupScales& sc) {
  a[0] = scaled_pair<kForm, false>(w.x, 8 * ks, sc);
  a[1] = scaled_pair<kForm, true>(w.y, 8 * ks, sc);
  a[2] = scaled_pair<kForm, false>(w.x, 8 * ks + 4, sc);
  a[3] = scaled_pair<kForm, true>(w.y, 8 * ks + 4, sc);
}

// The A fragments of one K group (32 K) of one 64-channel tile: K steps 0 and 1.
template <Dequant kForm>
__device__ __forceinline__ void dequant_group(uint32_t (&a)[8], const uint8_t* atom, int lane) {
  const uint2 w = *reinterpret_cast<const uint2*>(atom + lane * 8);
  const GroupScales sc = group_scales<kForm>(*reinterpret_cast<const uint32_t*>(atom + 256 + (lane / 4) * 4));
  dequant_step<0, kForm>(*reinterpret_cast<uint32_t(*)[4]>(&a[0]), w, sc);
  dequant_step<1, kForm>(*reinterpret_cast<uint32_t(*)[4]>(&a[4]), w, sc);
}

// The registers of a consumer warpgroup: kMT accumulator tiles of the widest item (an item of kN
// tokens uses the first kN / 2 of each: one register allocation for every item width) and two
// A-fragment buffers (of a K group, or with kCommitPerStep of a K step).
template <class Cfg>
struct ConsumerState {
  float acc[Cfg::kMT][Cfg::kTile / 2];
  uint32_t a[2][Cfg::kMT][Cfg::kCommitPerStep ? 4 : 8];
  template <int kN>
  __device__ __forceinline__ float (&tile(int i))[kN / 2] {
    return *reinterpret_cast<float(*)[kN / 2]>(acc[i]);
  }
  template <int kN>
  __device__ __forceinline__ const float (&tile(int i) const)[kN / 2] {
    return *reinterpret_cast<const float(*)[kN / 2]>(acc[i]);
  }
};

// One K group (32 K) of a stage: dequantize it into register buffer kBuf while the previous
// group's wgmmas run, issue this group's wgmmas (2 K steps x kMT tiles) and commit them, then
// retire the previous group (wait_group 1), which frees the other buffer.
template <class Cfg, int kN, int kBuf>
__device__ __forceinline__ void consume_group(ConsumerState<Cfg>& st, const uint8_t* weights, uint64_t desc,
                                              bool first, int lane) {
  using MMA = wgmma::RegisterA<kN>;
  uint32_t(&a)[Cfg::kMT][8] = st.a[kBuf];
#pragma unroll
  for (int i = 0; i < Cfg::kMT; ++i) dequant_group<Cfg::kDequant>(a[i], weights + i * Cfg::kWeightBlockBytes, lane);
  wgmma::fence();
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
#pragma unroll
    for (int i = 0; i < Cfg::kMT; ++i) {
      MMA::mma(st.template tile<kN>(i), a[i][4 * ks], a[i][4 * ks + 1], a[i][4 * ks + 2], a[i][4 * ks + 3], desc + 2 * ks,
               (first && ks == 0) ? 0 : 1);
    }
  }
  wgmma::commit_group();
  wgmma::wait_group<1>();
}

// consume_group with kCommitPerStep: two commit groups, one per K step ks: dequantize step ks of
// the kMT tiles into register buffer ks while the previous commit group's wgmmas run, issue its kMT
// wgmmas and commit them, then retire the previous commit group (wait_group 1), which frees the
// other buffer. Every K group starts on buffer 0 and ends on buffer 1 whichever groups ran before
// it (a stage's short tail, the loop back edge), so ptxas can prove the two buffers enough: with
// one buffer per K group (a group alternating with the next) a path that skips a group reuses a
// buffer still in flight, ptxas then gives each group of the unrolled stage its own A registers
// and, where those and the accumulators do not fit, serializes every wgmma (C7511 / C7512).
template <class Cfg, int kN>
__device__ __forceinline__ void consume_group_by_step(ConsumerState<Cfg>& st, const uint8_t* weights, uint64_t desc,
                                                      bool first, int lane) {
  using MMA = wgmma::RegisterA<kN>;
  uint2 w[Cfg::kMT];
  GroupScales sc[Cfg::kMT];
#pragma unroll
  for (int i = 0; i < Cfg::kMT; ++i) {
    const uint8_t* atom = weights + i * Cfg::kWeightBlockBytes;
    w[i] = *reinterpret_cast<const uint2*>(atom + lane * 8);
    sc[i] = group_scales<Cfg::kDequant>(*reinterpret_cast<const uint32_t*>(atom + 256 + (lane / 4) * 4));
  }
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
    uint32_t(&a)[Cfg::kMT][4] = st.a[ks];
#pragma unroll
    for (int i = 0; i < Cfg::kMT; ++i) {
      if (ks == 0) {
        dequant_step<0, Cfg::kDequant>(a[i], w[i], sc[i]);
      } else {
        dequant_step<1, Cfg::kDequant>(a[i], w[i], sc[i]);
      }
    }
    wgmma::fence();
#pragma unroll
    for (int i = 0; i < Cfg::kMT; ++i) {
      MMA::mma(st.template tile<kN>(i), a[i][0], a[i][1], a[i][2], a[i][3], desc + 2 * ks, (first && ks == 0) ? 0 : 1);
    }
    wgmma::commit_group();
    wgmma::wait_group<1>();
  }
}

// The top-k sum after a warpgroup stored its rows (kTopkSum). A token with one local slot was
// written straight to args.reduced. For the others, each (token, 64 * kOutMT channels) unit counts
// the tiles stored for it in args.arrivals; the warpgroup bringing the count to the token's number
// of local slots sums the unit (reduce_chunk: fixed order, so the result never depends on which
// CTA finishes last). Writers fence their rows before the barrier that precedes the count (the
// classic threadfence reduction); the last arriver fences before reading the others' rows. The
// ready list lives in the staging tile, which the store loop no longer reads.
template <class Cfg, int kN>
__device__ __forceinline__ void topk_arrive_and_reduce(const Args& args, const uint8_t* epi, uint8_t* staging,
                                                       int channel0, int tid, int consumer) {
  constexpr int kUnit = 64 * Cfg::kOutMT;
  constexpr int kChunksPerUnit = kUnit / 8;
  static_assert(Cfg::kEpiTokens * Cfg::kEpiRowBytes >= 8 * Cfg::kTile + 16, "the ready list fits the staging tile");
  const int* slots = reinterpret_cast<const int*>(epi);
  const uint32_t* masks = reinterpret_cast<const uint32_t*>(epi + Cfg::kTile * 8);
  int* ready = reinterpret_cast<int*>(staging);  // [0]: count; then (token, mask) pairs
  const int n_out = Cfg::out_channels(args.n);
  // The last N tile's second warpgroup has no channels where N ends in its first half: it must not
  // count, as unit `units` would be the next token's unit 0 (all 128 threads return together).
  if (channel0 >= n_out) return;
  const int units = (n_out + kUnit - 1) / kUnit;
  const int unit = channel0 / kUnit;
  if (tid == 0) ready[0] = 0;
  __threadfence();
  named_barrier(2 + consumer, 128);
  bool arrived = false;
#pragma unroll 1
  for (int r = tid; r < kN; r += 128) {
    const int slot = slots[r];  // (< 0: stored to args.reduced)
    const int local = __popc(masks[r]);
    if (slot >= 0 && slot < args.num_slots && local > 1) {
      const int token = slot / args.reduce_top_k;
      if (atomicAdd(args.arrivals + static_cast<int64_t>(token) * units + unit, 1) == local - 1) {
        const int i = atomicAdd(ready, 1);
        ready[1 + 2 * i] = token;
        ready[2 + 2 * i] = static_cast<int>(masks[r]);
        arrived = true;
      }
    }
  }
  if (arrived) __threadfence();  // acquire: the other tiles' rows are read after their arrivals
  named_barrier(2 + consumer, 128);
  const int count = ready[0];
#pragma unroll 1
  for (int c = tid; c < count * kChunksPerUnit; c += 128) {
    const int channel = channel0 + (c % kChunksPerUnit) * 8;
    if (channel < n_out) {
      const int* entry = ready + 1 + 2 * (c / kChunksPerUnit);
      reduce_chunk(args, n_out, entry[0], static_cast<uint32_t>(entry[1]), channel);
    }
  }
  named_barrier(2 + consumer, 128);  // the ready list is read before the next item's staging
}

// The epilogue of an item of kN tokens from its accumulators (a split tail's item: its parts' sum,
// sum_tail_parts).
template <class Cfg, int kN>
__device__ __forceinline__ void wgmma_epilogue(const Args& args, const ConsumerState<Cfg>& source, uint8_t* epi,
                                               int ntile, int warp, int lane) {
  constexpr int kNT = kN / 8;
  constexpr int kEpiNT = kNT < Cfg::kEpiGroups ? kNT : Cfg::kEpiGroups;
  const int consumer = threadIdx.x / 128;
  const int tid = threadIdx.x % 128;
  const int* slots = reinterpret_cast<const int*>(epi);
  const float* weights = reinterpret_cast<const float*>(epi + Cfg::kTile * 4);
  uint8_t* staging = epi + Cfg::kEpiInfoBytes;
  const uint32_t staging_addr = ptx::smem_addr(staging);
  const int t = lane % 4;
  const int n_out = Cfg::out_channels(args.n);
  const int channel0 = ntile * Cfg::kOutBN + consumer * Cfg::kOutMT * 64;
  const bool aligned = n_out % 8 == 0;
  constexpr int kChunksPerRow = Cfg::kOutMT * 8;
  constexpr int kChunks = kEpiNT * 8 * kChunksPerRow;
  // Output x of tile i: the accumulator, or silu(gate) * up computed as ops.silu_and_mul does on
  // the unfused bf16 output (gate and up rounded to bf16, fp32 math), so both paths agree bit for bit.
  const auto value = [&](int i, int x) {
    if constexpr (Cfg::kSiluMul) {
      const float g = __bfloat162float(__float2bfloat16_rn(source.template tile<kN>(0)[x]));
      const float u = __bfloat162float(__float2bfloat16_rn(source.template tile<kN>(1)[x]));
      return silu_of_bf16(g) * u;
    } else {
      return source.template tile<kN>(i)[x];
    }
  };
#pragma unroll
  for (int j0 = 0; j0 < kNT; j0 += kEpiNT) {
#pragma unroll
    for (int i = 0; i < Cfg::kOutMT; ++i)
#pragma unroll
      for (int jj = 0; jj < kEpiNT; ++jj) {
        const int j = j0 + jj;
        if (j < kNT) {
          const float w0 = weights[j * 8 + 2 * t], w1 = weights[j * 8 + 2 * t + 1];
          __nv_bfloat162 lo = __floats2bfloat162_rn(value(i, 4 * j) * w0, value(i, 4 * j + 1) * w1);
          __nv_bfloat162 hi = __floats2bfloat162_rn(value(i, 4 * j + 2) * w0, value(i, 4 * j + 3) * w1);
          if constexpr (Cfg::kTopkSum) {
            // -0 + +0 = +0: a token's one local row is its sum, which adds from +0 (reduce_chunk).
            lo = __hadd2(lo, __float2bfloat162_rn(0.0f));
            hi = __hadd2(hi, __float2bfloat162_rn(0.0f));
          }
          const uint32_t row = staging_addr + (jj * 8 + (lane & 7)) * Cfg::kEpiRowBytes + (i * 64 + warp * 16 + (lane & 8)) * 2;
          ptx::stmatrix_x2_trans(row, *reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
        }
      }
    named_barrier(2 + consumer, 128);
#pragma unroll
    for (int c = tid; c < kChunks; c += 128) {
      const int token = j0 * 8 + c / kChunksPerRow;
      const int channel = channel0 + (c % kChunksPerRow) * 8;
      if (token < kN && channel < n_out) {
        const int slot = slots[token];
        if ((Cfg::kTopkSum || slot >= 0) && (args.out_position || slot < args.num_slots)) {
          const uint4 v = *reinterpret_cast<const uint4*>(staging + (c / kChunksPerRow) * Cfg::kEpiRowBytes +
                                                          (c % kChunksPerRow) * 16);
          if (Cfg::kTopkSum && slot < 0) {  // the token's one local slot: its sum
            *reinterpret_cast<uint4*>(args.reduced + static_cast<int64_t>(-1 - slot) * n_out + channel) = v;
          } else {
            store_chunk<Cfg::kStreamOut>(args, n_out, slot, channel, v, aligned);
          }
        }
      }
    }
    named_barrier(2 + consumer, 128);  // the staging tile is read before the next chunk rewrites it
  }
}

// A split tail's workspace (kTailParts): part slot s holds, per consumer warpgroup, its threads'
// accumulators of the widest item as float4 rows of 128 threads (slot s, warpgroup c: block
// s x kConsumers + c of kSlotVecs float4s).
template <class Cfg>
constexpr int64_t kSlotVecs = Cfg::kMT * (Cfg::kTile / 8) * 128;  // one warpgroup's share of a slot

template <class Cfg>
__device__ __forceinline__ float4* part_slot(const Args& args, int slot, int consumer) {
  return reinterpret_cast<float4*>(args.partials) + (static_cast<int64_t>(slot) * Cfg::kConsumers + consumer) * kSlotVecs<Cfg> +
         threadIdx.x % 128;
}

// The last part of a split tail's item: its parts' slots summed in part order into this thread's
// accumulators (the same bits whichever part finishes last), for the item's one epilogue (one
// epilogue per width: a second one, reading the sums from the workspace, doubled the kernel's code).
// Four float4 of a part in flight at a time: more spilled next to the accumulators (ptxas).
template <class Cfg, int kN>
__device__ __forceinline__ void sum_tail_parts(ConsumerState<Cfg>& st, const float4* first, int parts) {
  constexpr int64_t kPartStride = kSlotVecs<Cfg> * Cfg::kConsumers;  // from one part's slot to the next's
  constexpr int kBatch = 4;
#pragma unroll
  for (int i = 0; i < Cfg::kMT; ++i) {
    float(&acc)[kN / 2] = st.template tile<kN>(i);
#pragma unroll
    for (int j0 = 0; j0 < kN / 8; j0 += kBatch) {
      const float4* column = first + (i * (kN / 8) + j0) * 128;
#pragma unroll
      for (int jj = 0; jj < kBatch && j0 + jj < kN / 8; ++jj) {
        const float4 v = __ldcg(column + jj * 128);
        acc[4 * (j0 + jj)] = v.x, acc[4 * (j0 + jj) + 1] = v.y, acc[4 * (j0 + jj) + 2] = v.z, acc[4 * (j0 + jj) + 3] = v.w;
      }
#pragma unroll 1
      for (int p = 1; p < parts; ++p) {
        float4 v[kBatch];
#pragma unroll
        for (int jj = 0; jj < kBatch && j0 + jj < kN / 8; ++jj) v[jj] = __ldcg(column + p * kPartStride + jj * 128);
#pragma unroll
        for (int jj = 0; jj < kBatch && j0 + jj < kN / 8; ++jj) {
          const int x = 4 * (j0 + jj);
          acc[x] += v[jj].x, acc[x + 1] += v[jj].y, acc[x + 2] += v[jj].z, acc[x + 3] += v[jj].w;
        }
      }
    }
  }
}

// A split tail's part after its K loop: this warpgroup's accumulators go to the part's slot and it
// counts itself in on the tail item's counter. Returns whether it was the last part to arrive (it
// then sums the parts and stores the item; it has reset the counter for the next launch). Writers fence
// before the barrier that precedes the count; the last arriver fences before the others' slots are
// read. Nobody waits for another part.
template <class Cfg, int kN>
__device__ __forceinline__ bool arrive_tail_part(const Args& args, ConsumerState<Cfg>& st, int tail, int part,
                                                 int parts, int consumer) {
  float4* mine = part_slot<Cfg>(args, tail * parts + part, consumer);
#pragma unroll
  for (int i = 0; i < Cfg::kMT; ++i) {
    const float(&acc)[kN / 2] = st.template tile<kN>(i);
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
      __stcg(mine + (i * (kN / 8) + j) * 128, make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]));
    }
  }
  __threadfence();  // this thread's partial is visible device-wide before the warpgroup counts itself in
  named_barrier(2 + consumer, 128);
  bool last = false;
  if (threadIdx.x % 128 == 0) {
    int* counter = args.flags + tail * Cfg::kConsumers + consumer;
    last = atomicAdd(counter, 1) == parts - 1;
    if (last) ptx::st_relaxed_gpu(counter, 0);  // every part has counted
  }
  // (Broadcast from lane 0, the barrier's result is warp-uniform to the compiler too: a divergent-looking
  // return here moved the whole consumer loop's ring state off the uniform datapath.)
  if (!__shfl_sync(0xffffffffu, static_cast<int>(ptx::named_barrier_or(2 + consumer, 128, last)), 0)) return false;
  __threadfence();  // the other parts' partials are read after their arrivals
  return true;
}

// A consumer warp's release of stage barrier `empty` (lane 0): with kCtaPair also on the other CTA's,
// whose producer pushes its half of the stage's rows into this CTA's stage.
template <class Cfg>
__device__ __forceinline__ void release_stage(uint32_t empty) {
  ptx::mbarrier_arrive(empty);
  if constexpr (Cfg::kCtaPair) ptx::mbarrier_arrive_remote(ptx::peer_addr(empty, ptx::cluster_rank() ^ 1u));
}

// The ring position of a consumer warpgroup.
struct Ring {
  int stage = 0;
  uint32_t phase = 0;
  int wslot = 0;  // the weight ring's (kWeightRing)
  uint32_t wphase = 0;
  uint32_t resident_phase = 0;  // the resident activation tile's (kResident)
  __device__ __forceinline__ void advance(int stages) {
    if (++stage == stages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// The epilogue of an item from its accumulators, then with kTopkSum the top-k sum.
template <class Cfg, int kN>
__device__ __forceinline__ void store_item(const Args& args, ConsumerState<Cfg>& st, uint8_t* epi, int ntile, int warp,
                                           int lane) {
  const int consumer = threadIdx.x / 128;
  named_barrier(2 + consumer, 128);  // the slots and weights copied by the other warps are visible
  wgmma_epilogue<Cfg, kN>(args, st, epi, ntile, warp, lane);
  if constexpr (Cfg::kTopkSum) {
    // The accumulators are dead until the next item's first wgmma overwrites them: zeros, which
    // the compiler can rematerialize instead of keeping through the sum.
#pragma unroll
    for (int i = 0; i < Cfg::kMT; ++i)
#pragma unroll
      for (int x = 0; x < Cfg::kTile / 2; ++x) st.acc[i][x] = 0.0f;
    topk_arrive_and_reduce<Cfg, kN>(args, epi, epi + Cfg::kEpiInfoBytes,
                                    ntile * Cfg::kOutBN + consumer * Cfg::kOutMT * 64, threadIdx.x % 128, consumer);
  }
}

// One item of kN tokens (its first stage is already full): the K loop, then the epilogue.
template <class Cfg, int kN>
__device__ __forceinline__ void consume_item(const Args& args, uint8_t* smem, ConsumerState<Cfg>& st, Ring& ring,
                                             int ntile, uint8_t* epi, int warp, int lane) {
  using Header = typename Cfg::Header;
  const int consumer = threadIdx.x / 128;
  const int kgroups = args.k / kAtomK;
  const int num_kc = (kgroups + Cfg::kGroups - 1) / Cfg::kGroups;
  const uint32_t smem_base = ptx::smem_addr(smem);
  const uint32_t full0 = smem_base + Cfg::kBarOffset;
  const uint32_t empty0 = full0 + Cfg::kStages * 8;
  const Header* headers = reinterpret_cast<const Header*>(smem + Cfg::kHeaderOffset);
  // The item's slots and weights, from its first stage's header, for the epilogue (the previous
  // item's epilogue has passed its last barrier: nobody reads them any more). With kResident only
  // at a run's first N tile: the run's other tiles have the same rows.
  const Header& h = headers[ring.stage];
  const int run = Cfg::kResident ? h.width : kRunFirst;  // read before the stage is released
  int* slots = reinterpret_cast<int*>(epi);
  float* tw = reinterpret_cast<float*>(epi + Cfg::kTile * 4);
  const uint32_t* masks = reinterpret_cast<const uint32_t*>(smem + Cfg::kMasksOffset) + ring.stage * Cfg::kTile;
  for (int r = threadIdx.x % 128; (run & kRunFirst) && r < kN; r += 128) {
    int slot = h.slots[r];
    if constexpr (Cfg::kTopkSum) {
      // A row whose token has one local slot is stored straight to the token's row of
      // args.reduced (its sum): -1 - token. Padding: num_slots.
      const uint32_t mask = masks[r];
      if (slot < 0 || slot >= args.num_slots) slot = args.num_slots;
      if (__popc(mask) == 1) slot = -1 - slot / args.reduce_top_k;
      reinterpret_cast<uint32_t*>(epi + Cfg::kTile * 8)[r] = mask;
    } else if (args.out_position) {
      // Output rows in routing order (the next GEMM loads them as whole blocks); padding: -1.
      slot = (slot >= 0 && slot < args.num_slots) ? h.block * Cfg::kBM + r : -1;
    }
    slots[r] = slot;
    tw[r] = h.weights[r];
  }
  // The unit's stages [kc0, kc1): the item's, or a split tail part's (parts, part, tail item).
  int kc0 = 0, kc1 = num_kc;
  int parts = 0, part = 0, tail = 0;
  if constexpr (Cfg::kSplitK) {
    // Broadcast from lane 0: values the compiler knows are warp-uniform live in uniform registers
    // through the K loop (not the accumulators' vector ones) and keep its stage arithmetic and wgmma
    // operands on the uniform datapath (read per thread, the loop ran 19 % more instructions than
    // the uncut kernel's where nothing was cut; ncu, session 58).
    const int width = __shfl_sync(0xffffffffu, h.width, 0);
    parts = (width >> kPartsShift) & kPartMask;
    part = (width >> kPartShift) & kPartMask;
    tail = __shfl_sync(0xffffffffu, h.ntile, 0) >> kTailShift;
    if (parts > 1) {
      const int2 stages = part_stages(part, parts, num_kc);
      kc0 = stages.x;
      kc1 = stages.y;
    }
  }
  const uint32_t wfull0 = smem_base + Cfg::kWeightBarOffset;  // (weight ring only)
  const uint32_t wempty0 = wfull0 + Cfg::kWeightSlots * 8;
  const uint32_t resident_full = smem_base + Cfg::kResidentBarOffset;  // (kResident only)
  if (Cfg::kResident && (run & kRunFirst)) {
    ptx::mbarrier_wait(resident_full, ring.resident_phase);
    ring.resident_phase ^= 1;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  // kPingPong: this warpgroup's turn on the tensor cores (the other's K loop has issued its wgmmas).
  if constexpr (Cfg::kPingPong) named_barrier(kTurnBarrier + consumer, 256);
  int prev = -1;  // the previous stage: released once the first group of this one retires its last wgmma
  int prev_w = -1;  // likewise its weight slot, when that stage was the slot's last reader
  // The unit's first wgmma zeroes the accumulators (kc0 is warp-uniform: a uniform register, not a
  // vector one, through the loop; zeroing them before it instead cost every item ~1 %: ncu, session 59).
  for (int kc = kc0; kc < kc1; ++kc) {
    if (kc > kc0) {
      ptx::mbarrier_wait(full0 + ring.stage * 8, ring.phase);
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    const int nkg = Cfg::stage_groups(kc, kgroups);
    const uint8_t* weights;
    if constexpr (Cfg::kWeightRing) {
      // Stage kc reads half kc % 2 of the 256-K weight tile kc / 2 (rows of `width` atoms).
      if (kc % 2 == 0) ptx::mbarrier_wait(wfull0 + ring.wslot * 8, ring.wphase);
      const int width = min(kTileGroups, kgroups - (kc / 2) * kTileGroups);
      weights = smem + Cfg::kWeightOffset + (ring.wslot * Cfg::kBlocks + consumer * Cfg::kMT) * Cfg::kWeightBlockBytes +
                (warp * width + (kc % 2) * Cfg::kGroups) * kAtomBytes;
    } else {
      weights = smem + Cfg::kStagesOffset + ring.stage * Cfg::kStageBytes + Cfg::kStageActBytes +
                consumer * Cfg::kMT * Cfg::kWeightBlockBytes + warp * nkg * kAtomBytes;
    }
    const uint64_t desc = wgmma::desc_k_major_sw128(
        Cfg::kResident ? smem_base : smem_base + Cfg::kStagesOffset + ring.stage * Cfg::kStageBytes);
    // Every stage but an item's short last one has kGroups (even) groups, so group gi always
    // uses register buffer gi % 2 and the body is one code path for the compiler.
#pragma unroll
    for (int gi = 0; gi < Cfg::kGroups; ++gi) {
      if (gi < nkg) {
        const uint64_t d = desc + (((gi / 2) * Cfg::kActTileBytes + (gi % 2) * 64) >> 4);
        if constexpr (Cfg::kCommitPerStep) {
          consume_group_by_step<Cfg, kN>(st, weights + gi * kAtomBytes, d, kc == kc0 && gi == 0, lane);
        } else if (gi % 2 == 0) {
          consume_group<Cfg, kN, 0>(st, weights + gi * kAtomBytes, d, kc == kc0 && gi == 0, lane);
        } else {
          consume_group<Cfg, kN, 1>(st, weights + gi * kAtomBytes, d, false, lane);
        }
        if (gi == 0 && prev >= 0 && lane == 0) {
          release_stage<Cfg>(empty0 + prev * 8);
          if (prev_w >= 0) ptx::mbarrier_arrive(wempty0 + prev_w * 8);
        }
      }
    }
    prev = ring.stage;
    ring.advance(Cfg::kStages);
    prev_w = -1;
    if constexpr (Cfg::kWeightRing) {
      if (kc % 2 == 1 || kc == num_kc - 1) {  // the weight tile's last reader
        prev_w = ring.wslot;
        if (++ring.wslot == Cfg::kWeightSlots) {
          ring.wslot = 0;
          ring.wphase ^= 1;
        }
      }
    }
  }
  if constexpr (Cfg::kPingPong) {
    asm volatile("bar.arrive %0, 256;" ::"r"(kTurnBarrier + 1 - consumer) : "memory");  // the other's turn
  }
  wgmma::wait_group<0>();
  if (lane == 0) {
    release_stage<Cfg>(empty0 + prev * 8);
    if (prev_w >= 0) ptx::mbarrier_arrive(wempty0 + prev_w * 8);
    if (Cfg::kResident && (run & kRunLast)) ptx::mbarrier_arrive(resident_full + 8);  // the run's last reader
  }
  if constexpr (Cfg::kSplitK) {
    if (parts > 1) {
      if (!arrive_tail_part<Cfg, kN>(args, st, tail, part, parts, consumer)) return;  // a later part stores the item
      sum_tail_parts<Cfg, kN>(st, part_slot<Cfg>(args, tail * parts, consumer), parts);
    }
  }
  store_item<Cfg, kN>(args, st, epi, ntile, warp, lane);  // (one call: the epilogue is inlined once per width)
}

// consume_item for an item of `width` (Header::width: blocks, or with kRowWidths tokens): one
// instantiation per compiled token count (kN..), the narrowest that holds it.
template <class Cfg, int kN = (Cfg::kRowWidths != 0 ? 8 : Cfg::kBM)>
__device__ __forceinline__ void consume_item_of(int width, const Args& args, uint8_t* smem, ConsumerState<Cfg>& st,
                                                Ring& ring, int ntile, uint8_t* epi, int warp, int lane) {
  constexpr int kStep = Cfg::kRowWidths != 0 ? 8 : Cfg::kBM;  // tokens from one count to the next
  constexpr int kUnit = Cfg::kRowWidths != 0 ? 1 : Cfg::kBM;  // tokens per unit of width
  if constexpr (kN < Cfg::kTile) {
    if (!Cfg::compiled_tokens(kN / 8) || width * kUnit > kN) {
      consume_item_of<Cfg, kN + kStep>(width, args, smem, st, ring, ntile, epi, warp, lane);
      return;
    }
  }
  if constexpr (Cfg::compiled_tokens(kN / 8)) consume_item<Cfg, kN>(args, smem, st, ring, ntile, epi, warp, lane);
}

template <class Cfg>
__device__ __forceinline__ void wgmma_consumer(const Args& args, uint8_t* smem) {
  using Header = typename Cfg::Header;
  const int consumer = threadIdx.x / 128;
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const uint32_t full0 = ptx::smem_addr(smem) + Cfg::kBarOffset;
  const Header* headers = reinterpret_cast<const Header*>(smem + Cfg::kHeaderOffset);
  uint8_t* epi = smem + Cfg::kEpiOffset + consumer * Cfg::kEpiBytes;
  ConsumerState<Cfg> st;
  Ring ring;
  // kPingPong: warpgroup 0 takes the first turn; it takes the other's last arrival before it exits.
  if (Cfg::kPingPong && consumer == 1) asm volatile("bar.arrive %0, 256;" ::"n"(kTurnBarrier) : "memory");
  for (;;) {
    ptx::mbarrier_wait(full0 + ring.stage * 8, ring.phase);
    // The activations were written by cp.async (generic proxy); wgmma reads them through the async proxy.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    const Header& h = headers[ring.stage];
    if (h.item < 0) break;
    const int ntile = Cfg::kSplitK ? h.ntile & ((1 << kTailShift) - 1) : h.ntile;
    consume_item_of<Cfg>(h.width & kWidthMask, args, smem, st, ring, ntile, epi, warp, lane);
  }
  if (Cfg::kPingPong && consumer == 0) named_barrier(kTurnBarrier, 256);
}

template <class Cfg>
__device__ __forceinline__ void wgmma_kernel(const Args& args) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t smem_base = ptx::smem_addr(smem);
  if (threadIdx.x == 0 && (ptx::dynamic_smem_bytes() < static_cast<uint32_t>(Cfg::smem_bytes(args.list_cap)) ||
                           smem_base % 1024 != 0 || (Cfg::kResident && args.k > Cfg::kBK) ||
                           (Cfg::kWholeStages && args.k % Cfg::kBK != 0))) {
    __trap();  // the host sized shared memory for another layout, the swizzled tiles are misaligned, or
               // runs of N tiles met a K of several stages, or whole stages a K that is not
  }
  const uint32_t full0 = smem_base + Cfg::kBarOffset;
  const uint32_t empty0 = full0 + Cfg::kStages * 8;
  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) {
      ptx::mbarrier_init(full0 + s * 8, Cfg::kFullArrivals);
      ptx::mbarrier_init(empty0 + s * 8, Cfg::kStageEmptyArrivals);
    }
    if constexpr (Cfg::kCtaPair) {
      const uint32_t gathered0 = smem_base + Cfg::kCtaPairBarOffset;
      for (int s = 0; s < Cfg::kStages; ++s) ptx::mbarrier_init(gathered0 + s * 8, 128);  // every producer thread
      for (int s = 0; s < 4; ++s) ptx::mbarrier_init(gathered0 + (Cfg::kStages + s) * 8, 1);  // item-id slots
    }
    const uint32_t wfull0 = smem_base + Cfg::kWeightBarOffset;
    for (int s = 0; s < Cfg::kWeightSlots; ++s) {
      ptx::mbarrier_init(wfull0 + s * 8, 1);  // the producer's arrive with the tile's bytes
      ptx::mbarrier_init(wfull0 + (Cfg::kWeightSlots + s) * 8, Cfg::kEmptyArrivals);
    }
    if constexpr (Cfg::kResident) {
      ptx::mbarrier_init(smem_base + Cfg::kResidentBarOffset, Cfg::kResidentArrivals);
      ptx::mbarrier_init(smem_base + Cfg::kResidentBarOffset + 8, Cfg::kEmptyArrivals);
    }
    ptx::fence_mbarrier_init();
  }
  uint32_t* list = reinterpret_cast<uint32_t*>(smem + Cfg::kListOffset);
  int* scratch = reinterpret_cast<int*>(smem + Cfg::kScratchOffset);
  const int used = used_blocks(args, Cfg::kBM);
  // Items listed in shared memory when they fit (not when experts' blocks are not contiguous);
  // otherwise the producer walks every block.
  const int items = args.list_cap > 0 ? compact_items<Cfg::kThreads, Cfg::kItems>(args, used, Cfg::kBM, list, scratch) : 0;
  const bool listed = args.list_cap > 0 && items <= args.list_cap;
  __syncthreads();
  const int n16 = (args.n + kAtomN - 1) / kAtomN;
  const int ntiles = (n16 + 4 * Cfg::kBlocks - 1) / (4 * Cfg::kBlocks);
  const int units_per_block = Cfg::kResident ? (ntiles + Cfg::kNRun - 1) / Cfg::kNRun : Cfg::kCtaPair ? ntiles / 2 : ntiles;
  const int total = (listed ? items : used) * units_per_block;  // work units: items, runs or pairs of N tiles
  // kCtaPair: the producer's facts in the scratch; the other CTA's barriers are initialized and its
  // compact_items is done with the scratch that holds the item ids it receives.
  if constexpr (Cfg::kCtaPair) {
    if (threadIdx.x == 0) {
      scratch[kPairFacts] = total;
      scratch[kPairFacts + 1] = used;
      scratch[kPairFacts + 2] = listed;
    }
    ptx::cluster_sync();
  }
  if constexpr (Cfg::kContiguousRows) {
    // One of a pair of launches (grouped.contiguous): the other runs where this one does not.
    // (Here, after the item list: returning before it made ptxas spill in the wide items' kernels.)
    if (args.choice_rows > 0 &&
        wide_items_pay<Cfg::kThreads>(args, args.num_blocks * Cfg::kBM, args.choice_rows) != (args.choice_wide != 0)) {
      return;
    }
  }
  if (threadIdx.x / 128 == Cfg::kConsumers) {
    if constexpr (Cfg::kConsumers > 1) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Cfg::kProducerRegs));
    wgmma_producer<Cfg>(args, smem, list, total, used, listed, scratch);  // (compact_items is done with it)
  } else {
    if constexpr (Cfg::kConsumers > 1) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Cfg::kConsumerRegs));
    if constexpr (Cfg::kTopkSum) {
      zero_unrouted_tokens(args, Cfg::out_channels(args.n), threadIdx.x / 32, 4 * Cfg::kConsumers);
    } else {
      zero_invalid_blocks(args, Cfg::out_channels(args.n), used, Cfg::kBM, threadIdx.x / 32, 4 * Cfg::kConsumers);
    }
    wgmma_consumer<Cfg>(args, smem);
  }
  // kCtaPair: no CTA leaves while the other may still push into its stages or arrive on its barriers.
  if constexpr (Cfg::kCtaPair) ptx::cluster_sync();
}

}  // namespace chord::indexed
