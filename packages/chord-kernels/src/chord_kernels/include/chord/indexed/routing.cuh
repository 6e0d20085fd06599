// The routing the indexed kernels read, block by block.
//
// Three sources: vLLM's moe_align_block_size tensors (sorted_token_ids, expert_ids,
// num_tokens_post_padded, read on the device); the grouped masked mode's [G, max_m] rows
// (args.masked_m set): group g owns args.group_blocks consecutive routing blocks, and row r of its
// block j is slot g * max_m + j * block_m + r while that is below the group's count masked_m[g]
// (clamped to [0, max_m]), a block with no row below the count having expert -1 (skipped); or the
// grouped contiguous mode's rows (args.m_indices set): block b is rows b * block_m on, its expert
// that of its first row (an expert's padding, -1, follows its real rows in its segment), a row
// slot = row while it holds that expert. The grouped modes compute what the PyTorch routing
// (grouped.masked_routing, grouped.contiguous_routing) would have written, so they cost no launch
// of their own.
#pragma once

#include <cstdint>

#include "chord/indexed/contract.cuh"

namespace chord::indexed {

// Routing blocks in use: those below num_tokens_post_padded (or every block of the grouped modes).
__device__ __forceinline__ int used_blocks(const Args& args, int block_m) {
  if (args.masked_m != nullptr || args.m_indices != nullptr) return args.num_blocks;
  const int padded = __ldg(args.num_tokens_post_padded);
  const int used = (max(padded, 0) + block_m - 1) / block_m;
  return min(used, args.num_blocks);
}

// Rows of masked group g: its count clamped to [0, max_m].
__device__ __forceinline__ int masked_rows(const Args& args, int g) {
  return min(max(__ldg(args.masked_m + g), 0), args.max_m);
}

// Expert of routing block b (-1 or out of range: not local, skipped).
__device__ __forceinline__ int block_expert(const Args& args, int b, int block_m) {
  if (args.m_indices != nullptr) return __ldg(args.m_indices + static_cast<int64_t>(b) * block_m);
  if (args.masked_m == nullptr) return __ldg(args.expert_ids + b);
  const int g = b / args.group_blocks;
  return (b - g * args.group_blocks) * block_m < masked_rows(args, g) ? g : -1;
}

// Slot of row `row` counted from routing block b's first row (row may pass into the following
// blocks of the same expert, as a multi-block work item's rows do), `expert` being the block's
// (block_expert, which every caller has read); args.num_slots (the sentinel) for a row past the
// group's count or, in the contiguous mode, a row not of that expert. kContiguousRows false: a
// kernel the contiguous mode never launches, compiled without that mode (WgmmaConfig::kContiguousRows).
template <bool kContiguousRows>
__device__ __forceinline__ int block_slot(const Args& args, int b, int row, int block_m, int expert) {
  if constexpr (kContiguousRows) {
    if (args.m_indices != nullptr) {
      const int64_t r = static_cast<int64_t>(b) * block_m + row;
      return expert >= 0 && __ldg(args.m_indices + r) == expert ? static_cast<int>(r) : args.num_slots;
    }
  }
  if (args.masked_m == nullptr) return __ldg(args.sorted_token_ids + static_cast<int64_t>(b) * block_m + row);
  const int g = b / args.group_blocks;
  const int r = (b - g * args.group_blocks) * block_m + row;
  return r < masked_rows(args, g) ? g * args.max_m + r : args.num_slots;
}

// Row of `a` holding routing block b's first row where a block's rows are consecutive rows of `a`
// (the grouped modes: contiguous, block b is rows b * block_m on; masked, group g's block j is rows
// g * max_m + j * block_m on).
__device__ __forceinline__ int block_first_row(const Args& args, int b, int block_m) {
  if (args.masked_m == nullptr) return b * block_m;
  const int g = b / args.group_blocks;
  return g * args.max_m + (b - g * args.group_blocks) * block_m;
}

// The grouped contiguous mode's choice between its two launches of one GEMM (grouped.contiguous):
// wide items of up to `wide_rows` rows of one expert pay where at least a fifth of the experts
// present hold 129..wide_rows rows (one weight pass where 128-row items take two) and more experts
// do than hold more (whose rest past a wide item runs narrow). An expert's rows are the first of its
// 128-row segments, so a row at offset j from its first segment is of that expert iff the expert
// holds more than j rows. Every CTA of both launches computes it from m_indices alone, so exactly
// one runs; all threads of the CTA call it. Each thread's four loads are independent: one round trip.
template <int kThreads>
__device__ __forceinline__ bool wide_items_pay(const Args& args, int m, int wide_rows) {
  const int segments = m / 128;
  int present = 0, fit = 0, past = 0;
  for (int base = 0; base < segments; base += kThreads) {
    const int s = base + static_cast<int>(threadIdx.x);
    bool head = false, more = false, most = false;
    if (s < segments) {
      const int64_t first = static_cast<int64_t>(s) * 128;
      const int expert = __ldg(args.m_indices + first);
      const int previous = s > 0 ? __ldg(args.m_indices + first - 128) : -1;
      const int next = first + 128 < m ? __ldg(args.m_indices + first + 128) : -1;
      const int beyond = first + wide_rows < m ? __ldg(args.m_indices + first + wide_rows) : -1;
      head = static_cast<unsigned>(expert) < static_cast<unsigned>(args.num_experts) && previous != expert;
      more = head && next == expert;
      most = more && beyond == expert;
    }
    present += __syncthreads_count(head);
    fit += __syncthreads_count(more && !most);
    past += __syncthreads_count(most);
  }
  return fit * 5 >= present && fit > past;
}

}  // namespace chord::indexed
