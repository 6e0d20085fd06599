// vLLM's moe_align_block_size contract, stable: the token slots sorted by expert (ascending slot
// order within an expert) and every expert padded to block_m rows.
//
// The slots are split into contiguous ranges, one per warp. Counting gives a [range][expert] table;
// its exclusive prefix down each expert's column gives every range its first row within the expert,
// and a block scan over the experts' padded counts gives each expert its first row. Scattering then
// walks each warp's range in slot order and writes every slot at its row: __match_any_sync ranks the
// lanes that chose the same expert, so no atomic decides an order and every run gives the same
// bits. Everything the contract fills is written exactly once (the slots, each expert's padding,
// the tail past the last block), so the outputs need no initialisation. Slots whose id lies
// outside [0, num_experts) are not routed.
//
// Small batches take one CTA (align_single: the table in shared memory, one row per warp). Large
// ones take three launches, so that many SMs share the scattered stores: align_count (a CTA per
// chunk of slots writes its column sums), align_layout (one CTA: the prefixes and the layout) and
// align_scatter (a CTA per chunk again).
#pragma once

#include <cstdint>

#include <cub/block/block_scan.cuh>

namespace chord::align {

constexpr int kLayoutThreads = 1024;  // align_single and align_layout
constexpr int kChunkThreads = 256;    // align_count and align_scatter
constexpr int kUnroll = 8;            // ids each lane loads before using them: their latencies overlap

struct Outputs {
  int32_t* sorted_ids;  // [capacity]
  int32_t* expert_ids;  // [num_blocks]
  int32_t* total;       // [1]
  const int32_t* expert_map;  // [num_experts] global -> local id or -1; null: the identity
  int numel, num_experts, block_m, capacity, num_blocks;
};

template <typename Id>
__device__ __forceinline__ int routed_expert(const Id* __restrict__ ids, int s, int end, int num_experts) {
  if (s >= end) return -1;
  const int64_t e = static_cast<int64_t>(ids[s]);
  return (e >= 0 && e < num_experts) ? static_cast<int>(e) : -1;
}

// This warp's part [lo, hi) of the CTA's slots [begin, end): consecutive runs, multiples of 32.
__device__ __forceinline__ void warp_range(int begin, int end, int& lo, int& hi) {
  const int warps = blockDim.x / 32;
  const int per_warp = ((end - begin + warps - 1) / warps + 31) / 32 * 32;
  lo = min(end, begin + static_cast<int>(threadIdx.x / 32) * per_warp);
  hi = min(end, lo + per_warp);
}

// table[warp][e] = the slots of this warp's range that chose e (the whole CTA takes part; the
// table is complete when it returns).
template <typename Id>
__device__ __forceinline__ void count_slots(const Id* __restrict__ ids, int begin, int end, int num_experts,
                                            int32_t* table) {
  for (int i = threadIdx.x; i < static_cast<int>(blockDim.x / 32) * num_experts; i += blockDim.x) table[i] = 0;
  __syncthreads();
  int lo, hi;
  warp_range(begin, end, lo, hi);
  int32_t* mine = table + (threadIdx.x / 32) * num_experts;
  for (int s0 = lo; s0 < hi; s0 += 32 * kUnroll) {
    int e[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) e[u] = routed_expert(ids, s0 + u * 32 + threadIdx.x % 32, hi, num_experts);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (e[u] >= 0) atomicAdd(mine + e[u], 1);
    }
  }
  __syncthreads();
}

// Writes every slot of this warp's range at its row; next_row[warp][e] starts at the warp's
// first row of expert e and advances past each slot written.
template <typename Id>
__device__ __forceinline__ void scatter_slots(const Id* __restrict__ ids, int begin, int end, int num_experts,
                                              int32_t* next_row, int32_t* __restrict__ sorted_ids) {
  int lo, hi;
  warp_range(begin, end, lo, hi);
  const int lane = threadIdx.x % 32;
  const unsigned lanes_before = (1u << lane) - 1u;
  int32_t* mine = next_row + (threadIdx.x / 32) * num_experts;
  for (int s0 = lo; s0 < hi; s0 += 32 * kUnroll) {
    int e[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) e[u] = routed_expert(ids, s0 + u * 32 + lane, hi, num_experts);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const unsigned same = __match_any_sync(0xffffffffu, e[u]);
      const int32_t r = e[u] >= 0 ? mine[e[u]] + __popc(same & lanes_before) : 0;
      __syncwarp();
      if (e[u] >= 0) {
        sorted_ids[r] = s0 + u * 32 + lane;
        if ((same & lanes_before) == 0) mine[e[u]] += __popc(same);
      }
      __syncwarp();
    }
  }
}

// Each column e of table [rows][num_experts] becomes its exclusive prefix; count[e] receives the
// column's sum. A thread per column (consecutive threads, consecutive words: no bank conflicts in
// shared memory, coalesced in global), kPrefixBatch loads in flight before the sums need them.
constexpr int kPrefixBatch = 16;

__device__ __forceinline__ void column_prefixes(int32_t* table, int rows, int num_experts, int32_t* count) {
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
    int32_t carry = 0;
    for (int r0 = 0; r0 < rows; r0 += kPrefixBatch) {
      int32_t v[kPrefixBatch];
#pragma unroll
      for (int u = 0; u < kPrefixBatch; ++u) v[u] = r0 + u < rows ? table[(r0 + u) * num_experts + e] : 0;
#pragma unroll
      for (int u = 0; u < kPrefixBatch; ++u) {
        if (r0 + u < rows) table[(r0 + u) * num_experts + e] = carry;
        carry += v[u];
      }
    }
    count[e] = carry;
  }
}

// From every expert's count (first_row[e] on entry, kLayoutThreads threads): first_row[e] becomes
// the expert's first row and first_row[num_experts] the rows in use; writes each expert's padding,
// the tail, expert_ids and the total.
__device__ __forceinline__ void write_layout(int32_t* first_row, const Outputs& o) {
  using Scan = cub::BlockScan<int32_t, kLayoutThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  // Each thread owns a run of consecutive experts, so the scan keeps expert order.
  const int per_thread = (o.num_experts + kLayoutThreads - 1) / kLayoutThreads;
  const int e_lo = min(o.num_experts, static_cast<int>(threadIdx.x) * per_thread);
  const int e_hi = min(o.num_experts, e_lo + per_thread);
  int32_t padded_rows = 0;
  for (int e = e_lo; e < e_hi; ++e) padded_rows += (first_row[e] + o.block_m - 1) / o.block_m * o.block_m;
  int32_t row;
  int32_t total;
  Scan(scan_storage).ExclusiveSum(padded_rows, row, total);
  for (int e = e_lo; e < e_hi; ++e) {
    const int32_t count = first_row[e];
    const int32_t padded = (count + o.block_m - 1) / o.block_m * o.block_m;
    first_row[e] = row;
    for (int32_t r = row + count; r < row + padded; ++r) o.sorted_ids[r] = o.numel;
    row += padded;
  }
  if (threadIdx.x == 0) {
    first_row[o.num_experts] = total;
    *o.total = total;
  }
  __syncthreads();
  for (int r = total + threadIdx.x; r < o.capacity; r += blockDim.x) o.sorted_ids[r] = o.numel;
  for (int b = threadIdx.x; b < o.num_blocks; b += blockDim.x) {
    const int32_t start = b * o.block_m;
    int32_t expert = -1;
    if (start < total) {  // the last expert whose first row is <= start (empty experts share it)
      int lo = 0, hi = o.num_experts;
      while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (first_row[mid] <= start) lo = mid; else hi = mid;
      }
      expert = o.expert_map != nullptr ? o.expert_map[lo] : lo;
    }
    o.expert_ids[b] = expert;
  }
}

// One CTA of kLayoutThreads. Dynamic shared memory: (32 + 1) * num_experts + 1 int32.
template <typename Id>
__device__ __forceinline__ void single(const Id* __restrict__ ids, const Outputs& o) {
  extern __shared__ int32_t smem[];
  const int warps = kLayoutThreads / 32;
  int32_t* table = smem;                            // [warp][expert]
  int32_t* first_row = smem + warps * o.num_experts;  // [expert + 1]
  count_slots(ids, 0, o.numel, o.num_experts, table);
  column_prefixes(table, warps, o.num_experts, first_row);
  __syncthreads();
  write_layout(first_row, o);
  for (int i = threadIdx.x; i < warps * o.num_experts; i += blockDim.x) table[i] += first_row[i % o.num_experts];
  __syncthreads();
  scatter_slots(ids, 0, o.numel, o.num_experts, table, o.sorted_ids);
}

// CTA c of kChunkThreads: counts[c][e] = the slots of chunk c that chose e. Dynamic shared
// memory: (kChunkThreads / 32) * num_experts int32.
template <typename Id>
__device__ __forceinline__ void count_chunk(const Id* __restrict__ ids, int numel, int num_experts, int chunk,
                                            int32_t* __restrict__ counts) {
  extern __shared__ int32_t smem[];
  const int warps = kChunkThreads / 32;
  const int begin = min(numel, static_cast<int>(blockIdx.x) * chunk);
  count_slots(ids, begin, min(numel, begin + chunk), num_experts, smem);
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
    int32_t sum = 0;
    for (int w = 0; w < warps; ++w) sum += smem[w * num_experts + e];
    counts[blockIdx.x * num_experts + e] = sum;
  }
}

// One CTA of kLayoutThreads over align_count's [chunks][experts] table: each entry becomes the
// chunk's first row within the expert, first_row_out[e] the expert's first row. Dynamic shared
// memory: num_experts + 1 int32.
__device__ __forceinline__ void layout(int32_t* counts, int chunks, int32_t* __restrict__ first_row_out,
                                       const Outputs& o) {
  extern __shared__ int32_t smem[];
  column_prefixes(counts, chunks, o.num_experts, smem);
  __syncthreads();
  write_layout(smem, o);
  for (int e = threadIdx.x; e < o.num_experts; e += blockDim.x) first_row_out[e] = smem[e];
}

// CTA c of kChunkThreads: writes chunk c's slots. It counts its chunk again, per warp: on chip,
// cheaper than align_count keeping a table eight times larger for align_layout to walk. Dynamic
// shared memory as align_count.
template <typename Id>
__device__ __forceinline__ void scatter_chunk(const Id* __restrict__ ids, int numel, int num_experts, int chunk,
                                              const int32_t* __restrict__ offsets,
                                              const int32_t* __restrict__ first_row, int32_t* __restrict__ sorted_ids) {
  extern __shared__ int32_t smem[];
  const int warps = kChunkThreads / 32;
  const int begin = min(numel, static_cast<int>(blockIdx.x) * chunk);
  const int end = min(numel, begin + chunk);
  count_slots(ids, begin, end, num_experts, smem);
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
    int32_t row = first_row[e] + offsets[blockIdx.x * num_experts + e];
    for (int w = 0; w < warps; ++w) {
      const int32_t c = smem[w * num_experts + e];
      smem[w * num_experts + e] = row;
      row += c;
    }
  }
  __syncthreads();
  scatter_slots(ids, begin, end, num_experts, smem, sorted_ids);
}

}  // namespace chord::align
