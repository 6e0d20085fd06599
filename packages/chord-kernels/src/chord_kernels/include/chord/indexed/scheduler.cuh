// Work schedule of the indexed kernels.
//
// A work item is (routing blocks, N tile): the full K of BN output channels of one expert for the
// tokens of one routing block (decode kernel) or of up to kItems consecutive blocks of one expert
// (WGMMA kernel). Every CTA first compacts the items' first blocks (expert id in [0, E), a block in
// use: routing.cuh) into a shared-memory list, so items are dense.
// Strided schedule: CTA c takes items c, c + G, c + 2G ...; dynamic schedule: the producer takes
// the next item from a global atomic counter (the last CTA to finish resets the counters, so the
// kernel stays CUDA-graph replayable).
// Balanced schedule (the decode default): the items' K stages form one sequence of `units` =
// items x stages and CTA c streams [balanced_start(c), balanced_start(c + 1)), so CTAs differ by
// at most one stage of work. An item cut by a range boundary is split along K: the CTA holding
// its first stage owns it. Every part writes its fp32 partial to its own workspace slot and counts
// itself in on the owner's counter; the last part to arrive sums the partials in CTA order and
// stores the item (decode.cuh finish_split_part). Nobody waits, so progress never depends on how
// many CTAs are resident, and results are deterministic.
// Split tail (WGMMA kernel; planned on narrow gate_up items, wgmma.TAIL_CUT_PARTS): where the whole
// items leave a last round of at most half the grid, each of that round's items is cut along K into
// parts of whole stages, scheduled as units after the whole items; the parts finish as the balanced
// schedule's do (wgmma.cuh arrive_tail_part), summed in part order. The cut depends on the item
// count, so a token's bits may differ between batches (never between runs of one batch). With
// kTailBlocks the items are cut into runs of their routing blocks instead, each an item over the
// whole K: the same bits.
#pragma once

#include <cstdint>

#include "chord/indexed/contract.cuh"
#include "chord/indexed/routing.cuh"

namespace chord::indexed {

// Dynamic schedule, called by one thread of each of the `requesters` CTAs that take items (every
// CTA, or one per cluster) once it takes no more: the last to do so resets the counters (next item,
// requesters done) for the next launch, graph replays included; every other request has returned by then.
__device__ __forceinline__ void release_item_counter(const Args& args, int requesters) {
  __threadfence();
  if (atomicAdd(args.counters + 1, 1) == requesters - 1) {
    args.counters[0] = 0;
    args.counters[1] = 0;
    __threadfence();
  }
}

// First unit of CTA `cta`'s range under the balanced schedule.
__device__ __forceinline__ int64_t balanced_start(int64_t units, int cta, int grid) {
  return units * cta / grid;
}

// The split tail of `total` whole items of `stages` K stages on `grid` CTAs (at most `max_parts`
// parts per item): units [0, full) are whole items, then the tail's items full, full + 1 ... in
// `parts` consecutive units each. parts = 1: no split (no tail, or one too full to gain: fewer than
// two parts per item fit the grid).
struct TailSplit {
  int full;
  int parts;
  __device__ __forceinline__ int units(int total) const { return full + (total - full) * parts; }
};

__device__ __forceinline__ TailSplit tail_split(int total, int grid, int stages, int max_parts) {
  const int tail = total % grid;
  const int parts = tail == 0 ? 1 : min(min(max_parts, stages), grid / tail);
  return parts < 2 ? TailSplit{total, 1} : TailSplit{total - tail, parts};
}

// The stages [x, y) of part `part` of `parts` (<= num_kc) of a K loop of num_kc stages: every part
// gets at least one.
__device__ __forceinline__ int2 part_stages(int part, int parts, int num_kc) {
  return make_int2(num_kc * part / parts, num_kc * (part + 1) / parts);
}

// Compact the work items' first blocks of [0, used) into `list` (entries: block | expert << 16;
// at most args.list_cap are written) and return how many there are. An item is up to kItems
// consecutive blocks of one local expert: a run of an expert's blocks is cut every kItems blocks
// from its first. All threads of the CTA call it; `scratch` holds two ints per warp.
template <int kThreads, int kItems>
__device__ __forceinline__ int compact_items(const Args& args, int used, int block_m, uint32_t* list, int* scratch) {
  constexpr int kNumWarps = kThreads / 32;
  static_assert(kNumWarps <= 32, "a warp's lanes hold the per-warp counts");
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  int count = 0;
  int carry = -1;  // the last run start before this chunk
  for (int base = 0; base < used; base += kThreads) {
    const int idx = base + tid;
    int expert = -1;
    if (idx < used) expert = block_expert(args, idx, block_m);
    const bool valid = idx < used && static_cast<unsigned>(expert) < static_cast<unsigned>(args.num_experts);
    bool start = valid;
    if constexpr (kItems > 1) {
      // The run start of each block: an inclusive max-scan of run heads across the CTA.
      const bool head = valid && (idx == 0 || block_expert(args, idx - 1, block_m) != expert);
      int run = head ? idx : -1;
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        const int up = __shfl_up_sync(0xffffffffu, run, d);
        if (lane >= d) run = max(run, up);
      }
      if (lane == 31) scratch[kNumWarps + warp] = run;
      __syncthreads();
      // Lane w holds warp w's last run start; a max-scan over the lanes gives the warps before this one
      // and the whole chunk (one shared load per lane: a loop over the warps kept kNumWarps of them live
      // and spilled the four-warpgroup kernels, ptxas).
      int warps_run = lane < kNumWarps ? scratch[kNumWarps + lane] : -1;
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        const int up = __shfl_up_sync(0xffffffffu, warps_run, d);
        if (lane >= d) warps_run = max(warps_run, up);
      }
      const int before = __shfl_sync(0xffffffffu, warps_run, warp > 0 ? warp - 1 : 0);
      run = max(max(run, carry), warp > 0 ? before : -1);
      carry = max(carry, __shfl_sync(0xffffffffu, warps_run, 31));
      start = valid && (idx - run) % kItems == 0;
    }
    const unsigned mask = __ballot_sync(0xffffffffu, start);
    if (lane == 0) scratch[warp] = __popc(mask);
    __syncthreads();
    // Lane w holds warp w's count; a sum-scan over the lanes gives the items before this warp and the chunk's.
    const int mine = lane < kNumWarps ? scratch[lane] : 0;
    int upto = mine;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int up = __shfl_up_sync(0xffffffffu, upto, d);
      if (lane >= d) upto += up;
    }
    const int offset = count + __shfl_sync(0xffffffffu, upto - mine, warp);
    const int total = __shfl_sync(0xffffffffu, upto, 31);
    if (start) {
      const int pos = offset + __popc(mask & ((1u << lane) - 1u));
      if (pos < args.list_cap) list[pos] = static_cast<uint32_t>(idx) | (static_cast<uint32_t>(expert) << 16);
    }
    __syncthreads();
    count += total;
  }
  return count;
}

}  // namespace chord::indexed
