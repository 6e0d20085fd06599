// Indexed W4A16 MoE GEMM for decode: swapped operands, mma.sync m16n8k16 bf16 -> fp32.
//
// Dequantized weights are the MMA M operand (16 output channels per atom) and the block's tokens
// are MMA N (8 per mma), so a routing block of <= 8 tokens wastes no MMA work and, more to the
// point, streams each weight byte exactly once. One producer warp runs a kStages-deep ring of
// 1-D bulk async copies (packed atoms with an L2 evict-first policy; one activation row per
// real token) completed on mbarriers; kWarps consumer warps dequantize (lop3 -> 128 + q,
// sub 136, mul scale: bit-exact with the reference) straight into A fragments and issue MMAs.
// The producer crosses item boundaries, so the copy engine never idles between items.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "chord/common/dequant.cuh"
#include "chord/common/mma.cuh"
#include "chord/common/ptx.cuh"
#include "chord/indexed/contract.cuh"
#include "chord/indexed/decode_config.cuh"
#include "chord/indexed/epilogue.cuh"
#include "chord/indexed/scheduler.cuh"

namespace chord::indexed {

// Work-item lookahead of the producer: which routing block and expert an item is, and the slots
// of this lane's token rows in it (row lane + 32 r; rows >= kBM hold the sentinel).
template <int kRows>
struct ItemRef {
  int item;
  int block;
  int expert;
  int slot[kRows];
};

template <class Cfg>
__device__ __forceinline__ void producer_loop(const Args& args, uint8_t* smem, const uint32_t* list,
                                              int total) {
  using Header = typename Cfg::Header;
  const int lane = threadIdx.x % 32;
  const int n16 = (args.n + kAtomN - 1) / kAtomN;
  const int kgroups = args.k / kAtomK;
  const int num_kc = (kgroups + Cfg::kBKG - 1) / Cfg::kBKG;
  const int ntiles = (n16 + Cfg::kAtomsN - 1) / Cfg::kAtomsN;  // with kSiluMul, of gate and up halves
  const bool compacted = args.list_cap > 0;
  const bool weighted = args.topk_weights != nullptr;
  // This CTA's items [first_item, end_item); with the balanced schedule the first one starts at
  // K stage kc_first and the last one ends before stage kc_end (scheduler.cuh).
  int first_item = 0, end_item = total, kc_first = 0, kc_end = num_kc;
  if constexpr (Cfg::kBalancedSchedule) {
    const int64_t units = static_cast<int64_t>(total) * num_kc;
    const int64_t u0 = balanced_start(units, blockIdx.x, gridDim.x);
    const int64_t u1 = balanced_start(units, blockIdx.x + 1, gridDim.x);
    first_item = static_cast<int>(u0 / num_kc);
    end_item = u1 > u0 ? static_cast<int>((u1 - 1) / num_kc) + 1 : first_item;
    kc_first = static_cast<int>(u0 - static_cast<int64_t>(first_item) * num_kc);
    kc_end = static_cast<int>(u1 - static_cast<int64_t>(end_item - 1) * num_kc);
  }
  const uint32_t smem_base = ptx::smem_addr(smem);
  const uint32_t full0 = smem_base + Cfg::kBarOffset;
  const uint32_t empty0 = full0 + Cfg::kStages * 8;
  Header* headers = reinterpret_cast<Header*>(smem + Cfg::kHeaderOffset);
  const uint64_t weight_policy = ptx::policy_evict_first();
  const uint64_t act_policy = ptx::policy_evict_last();

  // Item ids: semi-static stride, or a global atomic counter whose result is only consumed one
  // iteration later (request now, resolve next time) so its latency hides behind streaming.
  int pending = 0;
  auto request = [&](int current) {
    if constexpr (Cfg::kDynamic) {
      if (lane == 0) pending = atomicAdd(args.counters, 1);
    } else if constexpr (Cfg::kBalancedSchedule) {
      pending = current < 0 ? first_item : current + 1;
    } else {
      pending = current < 0 ? static_cast<int>(blockIdx.x) : current + static_cast<int>(gridDim.x);
    }
  };
  auto resolve = [&]() -> int {
    if constexpr (Cfg::kDynamic) {
      return __shfl_sync(0xffffffffu, pending, 0);
    } else {
      return pending;
    }
  };
  // Block, expert and (in flight) slot id of an item.
  constexpr int kRows = Cfg::kRowsPerLane;
  using Ref = ItemRef<kRows>;
  auto lookup = [&](int it) -> Ref {
    Ref ref{it, -1, -1, {}};
#pragma unroll
    for (int r = 0; r < kRows; ++r) ref.slot[r] = args.num_slots;
    if (it >= end_item) return ref;
    const int cb = it / ntiles;
    if (compacted) {
      const uint32_t entry = list[cb];
      ref.block = static_cast<int>(entry & 0xffffu);
      ref.expert = static_cast<int>(entry >> 16);
    } else {
      ref.block = cb;
      ref.expert = block_expert(args, cb, Cfg::kBM);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int row = lane + 32 * r;
      if (row < Cfg::kBM) ref.slot[r] = block_slot<true>(args, ref.block, row, Cfg::kBM, ref.expert);
    }
    return ref;
  };
  auto weights_of = [&](const Ref& ref, float (&w)[kRows]) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int slot = ref.slot[r];
      w[r] = (weighted && slot >= 0 && slot < args.num_slots) ? __ldg(args.topk_weights + slot) : 1.0f;
    }
  };

  // Lookahead: item 0 is streamed now; item 1's slots and item 2's id are in flight.
  request(-1);
  Ref cur = lookup(resolve());
  request(cur.item);
  Ref nxt = lookup(resolve());
  request(nxt.item);
  float cur_weight[kRows];
  weights_of(cur, cur_weight);

  int stage = 0;
  uint32_t phase = 0;
  while (cur.item < end_item) {
    float nxt_weight[kRows];
    weights_of(nxt, nxt_weight);          // nxt's slots were loaded one item ago
    const Ref after = lookup(resolve());  // its slot loads stay in flight
    request(after.item);
    if (static_cast<unsigned>(cur.expert) < static_cast<unsigned>(args.num_experts)) {
      const int ntile = cur.item - (cur.item / ntiles) * ntiles;
      bool real[kRows];
      int num_real = 0, rows_end = 0;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        real[r] = cur.slot[r] >= 0 && cur.slot[r] < args.num_slots;  // rows >= kBM hold the sentinel
        const uint32_t mask = __ballot_sync(0xffffffffu, real[r]);
        num_real += __popc(mask);
        if (mask != 0u) rows_end = 32 * r + 32 - __clz(mask);
      }
      const int atoms = Cfg::kSiluMul ? Cfg::kAtomsN : min(Cfg::kAtomsN, n16 - ntile * Cfg::kAtomsN);
      // Run `lane` (< kRuns): one 64-channel tile row block of this CTA tile, `run_rows` atom rows.
      const int run_row0 = Cfg::run_row0(ntile, lane, n16);
      const int run_rows = Cfg::kSiluMul ? kTileRows : min(kTileRows, n16 - run_row0);
      const int32_t* wsrc = args.tiles + (static_cast<int64_t>(cur.expert) * n16 * kgroups +
                                          static_cast<int64_t>(run_row0) * kgroups) * kAtomWords;
      const __nv_bfloat16* arow[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        arow[r] = args.a + static_cast<int64_t>(real[r] ? cur.slot[r] / args.top_k : 0) * args.k;
      }
      const int kc_lo = cur.item == first_item ? kc_first : 0;
      const int kc_hi = cur.item == end_item - 1 ? kc_end : num_kc;
      for (int kc = kc_lo; kc < kc_hi; ++kc) {
        const int nkg = min(Cfg::kBKG, kgroups - kc * Cfg::kBKG);
        ptx::mbarrier_wait(empty0 + stage * 8, phase ^ 1);
        Header& h = headers[stage];
        // The slot may still hold this block's activations for this K chunk (the balanced
        // schedule streams the N tiles of a block back to back; with one K chunk per item, as in
        // the K = 256 TP8 down GEMM, every reuse of a slot within a block hits): skip the copies.
        const bool have_act = h.act_block == cur.block && h.act_kc == kc;
        __syncwarp();
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (lane + 32 * r < Cfg::kBM) {
            h.slots[lane + 32 * r] = cur.slot[r];
            h.weights[lane + 32 * r] = cur_weight[r];
          }
        }
        if (lane == 0) {
          h.item = cur.item;
          h.kc = kc;
          h.ntile = ntile;
          h.flags = (kc == kc_lo ? kFirstStage : 0) | (kc == kc_hi - 1 ? kLastStage : 0) |
                    (kc_lo > 0 ? kPartialItem : 0);
          h.act_block = cur.block;
          h.act_kc = kc;
          h.rows = rows_end;
        }
        __syncwarp();
        const uint32_t full = full0 + stage * 8;
        if (lane == 0) {
          ptx::mbarrier_arrive_expect_tx(
              full, static_cast<uint32_t>((atoms * kAtomBytes + (have_act ? 0 : num_real * 64)) * nkg));
        }
        __syncwarp();
        const uint32_t dst = smem_base + stage * Cfg::kStageBytes;
        if (lane < Cfg::kRuns && run_rows > 0) {
          // Whole K tiles of one 64-channel block are adjacent: one contiguous run per stage.
          ptx::bulk_copy_g2s(dst + lane * Cfg::kRunBytes,
                             wsrc + static_cast<int64_t>(run_rows) * kc * Cfg::kBKG * kAtomWords,
                             run_rows * nkg * kAtomBytes, full, weight_policy);
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (real[r] && !have_act) {
            ptx::bulk_copy_g2s(dst + Cfg::kStageWeightBytes + (lane + 32 * r) * Cfg::kActRowBytes,
                               arow[r] + kc * Cfg::kBK, nkg * 64, full, act_policy);
          }
        }
        if (++stage == Cfg::kStages) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
    cur = nxt;
#pragma unroll
    for (int r = 0; r < kRows; ++r) cur_weight[r] = nxt_weight[r];
    nxt = after;
  }
  // End marker: consumers stop when they see item -1.
  ptx::mbarrier_wait(empty0 + stage * 8, phase ^ 1);
  if (lane == 0) {
    headers[stage].item = -1;
    ptx::mbarrier_arrive(full0 + stage * 8);
  }
}

// Shared-memory operands of one K group (32 K) for one consumer warp: B fragments of the token
// tiles and, per atom row, the two code words and the scale pair of this lane.
template <class Cfg>
struct GroupOperands {
  uint4 b[Cfg::kNT];
  uint2 w[Cfg::kMT];
  GroupScales sc[Cfg::kMT];  // group_scales
};

template <class Cfg, bool kFull, int kUse>
__device__ __forceinline__ void load_group(GroupOperands<Cfg>& op, int kg, const uint8_t* const (&wrow)[Cfg::kMT],
                                           const int (&row_in_tile)[Cfg::kMT], const int (&run_rows)[Cfg::kMT],
                                           const uint8_t* act, int nkg, int lane) {
#pragma unroll
  for (int j = 0; j < kUse; ++j) {
    // Matrix i = K columns 8i..8i+7 of the group: registers x, y are K step 0 (k 2t and 2t + 8),
    // z, w K step 1.
    ptx::ldmatrix_x4(ptx::smem_addr(act + j * 8 * Cfg::kActRowBytes + kg * 64), op.b[j].x, op.b[j].y, op.b[j].z,
                     op.b[j].w);
  }
#pragma unroll
  for (int mt = 0; mt < Cfg::kMT; ++mt) {
    // K tile kt = kg / 8 of the run starts after kt tiles of run_rows x 8 atoms; inside it rows
    // are `width` atoms wide (8 except in a short last tile).
    const int kt = kg / kTileGroups;
    const int width = kFull ? kTileGroups : min(kTileGroups, nkg - kt * kTileGroups);
    const uint8_t* atom =
        wrow[mt] + (run_rows[mt] * kt * kTileGroups + row_in_tile[mt] * width + kg % kTileGroups) * kAtomBytes;
    op.w[mt] = *reinterpret_cast<const uint2*>(atom + lane * 8);
    op.sc[mt] = group_scales<Cfg::kDequant>(*reinterpret_cast<const uint32_t*>(atom + 256 + (lane / 4) * 4));
  }
}

template <class Cfg, int kUse>
__device__ __forceinline__ void mma_group(float (&acc)[Cfg::kChains][Cfg::kMT][Cfg::kNT][4],
                                          const GroupOperands<Cfg>& op, int chain) {
#pragma unroll
  for (int mt = 0; mt < Cfg::kMT; ++mt) {
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      const uint32_t a0 = scaled_pair<Cfg::kDequant, false>(op.w[mt].x, 8 * ks, op.sc[mt]);  // row g: s_g
      const uint32_t a2 = scaled_pair<Cfg::kDequant, false>(op.w[mt].x, 8 * ks + 4, op.sc[mt]);
      const uint32_t a1 = scaled_pair<Cfg::kDequant, true>(op.w[mt].y, 8 * ks, op.sc[mt]);  // row g + 8: s_g+8
      const uint32_t a3 = scaled_pair<Cfg::kDequant, true>(op.w[mt].y, 8 * ks + 4, op.sc[mt]);
#pragma unroll
      for (int j = 0; j < kUse; ++j) {
        mma::m16n8k16_bf16(acc[chain][mt][j], a0, a1, a2, a3, ks ? op.b[j].z : op.b[j].x,
                           ks ? op.b[j].w : op.b[j].y);
      }
    }
  }
}

// One stage of MMAs for one consumer warp. kFull: the stage holds kBKG whole-width K groups
// (every stage but a short last one), so shared offsets are constants plus a per-row base and
// nothing branches inside the unrolled loop; operands of group kg + 1 are loaded while group kg
// is dequantized and multiplied. Only the first kUse token tiles are multiplied (row widths).
template <class Cfg, bool kFull, int kUse = Cfg::kNT>
__device__ __forceinline__ void mma_stage(float (&acc)[Cfg::kChains][Cfg::kMT][Cfg::kNT][4],
                                          const uint8_t* const (&wrow)[Cfg::kMT],
                                          const int (&row_in_tile)[Cfg::kMT],
                                          const int (&run_rows)[Cfg::kMT], const uint8_t* act, int nkg,
                                          int lane) {
  if constexpr (!Cfg::kPrefetchB) {
    // Many token tiles x atoms: the accumulators fill the register file, so the operands are
    // loaded for the current group only (the group's MMAs hide the loads of the next one).
#pragma unroll
    for (int kg = 0; kg < Cfg::kBKG; ++kg) {
      if (!kFull && kg >= nkg) break;
      GroupOperands<Cfg> op;
      load_group<Cfg, kFull, kUse>(op, kg, wrow, row_in_tile, run_rows, act, nkg, lane);
      mma_group<Cfg, kUse>(acc, op, kg % Cfg::kChains);
    }
    return;
  }
  GroupOperands<Cfg> op[2];
  load_group<Cfg, kFull, kUse>(op[0], 0, wrow, row_in_tile, run_rows, act, nkg, lane);
#pragma unroll
  for (int kg = 0; kg < Cfg::kBKG; ++kg) {
    if (!kFull && kg >= nkg) break;
    if (kg + 1 < Cfg::kBKG && (kFull || kg + 1 < nkg)) {
      load_group<Cfg, kFull, kUse>(op[(kg + 1) % 2], kg + 1, wrow, row_in_tile, run_rows, act, nkg, lane);
    }
    mma_group<Cfg, kUse>(acc, op[kg % 2], kg % Cfg::kChains);
  }
}

// A whole K stage over the token tiles up to row `rows` (kUse from 1 up: the narrowest that holds it).
template <class Cfg, int kUse = 1>
__device__ __forceinline__ void mma_stage_rows(float (&acc)[Cfg::kChains][Cfg::kMT][Cfg::kNT][4], int rows,
                                               const uint8_t* const (&wrow)[Cfg::kMT],
                                               const int (&row_in_tile)[Cfg::kMT],
                                               const int (&run_rows)[Cfg::kMT], const uint8_t* act, int lane) {
  if constexpr (kUse < Cfg::kNT) {
    if (rows <= 8 * kUse) {
      mma_stage<Cfg, true, kUse>(acc, wrow, row_in_tile, run_rows, act, Cfg::kBKG, lane);
    } else {
      mma_stage_rows<Cfg, kUse + 1>(acc, rows, wrow, row_in_tile, run_rows, act, lane);
    }
  } else {
    mma_stage<Cfg, true>(acc, wrow, row_in_tile, run_rows, act, Cfg::kBKG, lane);
  }
}

// Balanced schedule, split items. Every part of an item cut by a CTA range boundary (the owner's,
// which holds K stage 0, and each later CTA's) writes this warp's fp32 partial (chains summed, no
// top-k weight) to its own workspace slot and counts itself in on the item's counter; the LAST
// part to arrive adds all partials in CTA order (owner first) and runs the epilogue. No part ever
// waits for another, so the kernel makes progress however many of its CTAs are resident (another
// kernel may share the SMs), and the fixed summation order keeps results bit-identical run to run.
// Slots: (cta * kWarps + warp) * 2 + {0: the part at the start of a CTA's range, 1: the part at
// its end}; a CTA whose range lies inside one item has a single part (slot 0).
template <class Cfg>
__device__ __forceinline__ float4* partial_slot(const Args& args, int cta, int warp, int end_part) {
  return reinterpret_cast<float4*>(args.partials) +
         static_cast<int64_t>((cta * Cfg::kWarps + warp) * 2 + end_part) * (Cfg::kPartialFloats / 4);
}

// The CTA whose range holds unit `u` (the largest c with balanced_start(c) <= u).
__device__ __forceinline__ int owner_of_unit(int64_t u, int64_t units, int grid) {
  int c = static_cast<int>(min(static_cast<int64_t>(grid - 1), (u + 1) * grid / units));
  while (c > 0 && balanced_start(units, c, grid) > u) --c;
  while (c + 1 < grid && balanced_start(units, c + 1, grid) <= u) ++c;
  return c;
}

// Returns true in the warp of the last part to arrive, with the item's full sum in `sum`.
template <class Cfg>
__device__ __forceinline__ bool finish_split_part(const Args& args, float (&sum)[Cfg::kMT][Cfg::kNT][4],
                                                  int item, int num_kc, int total, bool starts_late,
                                                  int warp, int lane) {
  const int grid = static_cast<int>(gridDim.x);
  const int64_t units = static_cast<int64_t>(total) * num_kc;
  const int64_t first_unit = static_cast<int64_t>(item) * num_kc;
  const int64_t last_unit = first_unit + num_kc - 1;
  const int owner = owner_of_unit(first_unit, units, grid);
  float4* mine = partial_slot<Cfg>(args, static_cast<int>(blockIdx.x), warp, starts_late ? 0 : 1);
#pragma unroll
  for (int mt = 0; mt < Cfg::kMT; ++mt)
#pragma unroll
    for (int j = 0; j < Cfg::kNT; ++j) {
      const float(&v)[4] = sum[mt][j];
      __stcg(mine + (mt * Cfg::kNT + j) * 32 + lane, make_float4(v[0], v[1], v[2], v[3]));
    }
  int parts = 1;  // the owner, then every later CTA whose (non-empty) range starts inside the item
  for (int c = owner + 1; c < grid; ++c) {
    const int64_t start = balanced_start(units, c, grid);
    if (start > last_unit) break;
    parts += balanced_start(units, c + 1, grid) != start;
  }
  __threadfence();  // this lane's partial is visible device-wide before the warp counts itself in
  __syncwarp();
  int* counter = args.flags + owner * Cfg::kWarps + warp;
  int arrived = 0;
  if (lane == 0) arrived = atomicAdd(counter, 1);
  arrived = __shfl_sync(0xffffffffu, arrived, 0);
  if (arrived != parts - 1) return false;
  if (lane == 0) ptx::st_relaxed_gpu(counter, 0);  // every part has counted: reset for the next launch
  __threadfence();  // the other parts' partials are read after their arrivals
  const float4* src = partial_slot<Cfg>(args, owner, warp, 1);
  for (int c = owner;;) {
#pragma unroll
    for (int mt = 0; mt < Cfg::kMT; ++mt)
#pragma unroll
      for (int j = 0; j < Cfg::kNT; ++j) {
        const float4 p = __ldcg(src + (mt * Cfg::kNT + j) * 32 + lane);
        float(&v)[4] = sum[mt][j];
        if (c == owner) {
          v[0] = p.x, v[1] = p.y, v[2] = p.z, v[3] = p.w;
        } else {
          v[0] += p.x, v[1] += p.y, v[2] += p.z, v[3] += p.w;
        }
      }
    int64_t start;
    do {
      ++c;
      start = c < grid ? balanced_start(units, c, grid) : last_unit + 1;
    } while (start <= last_unit && balanced_start(units, c + 1, grid) == start);
    if (start > last_unit) break;
    src = partial_slot<Cfg>(args, c, warp, 0);
  }
  return true;
}

template <class Cfg>
__device__ __forceinline__ void consumer_loop(const Args& args, uint8_t* smem, int warp, int total) {
  using Header = typename Cfg::Header;
  constexpr int kMT = Cfg::kMT, kNT = Cfg::kNT, kChains = Cfg::kChains;
  const int lane = threadIdx.x % 32;
  const int t = lane % 4;
  const int n16 = (args.n + kAtomN - 1) / kAtomN;
  const int kgroups = args.k / kAtomK;
  const int num_kc = (kgroups + Cfg::kBKG - 1) / Cfg::kBKG;
  const uint32_t smem_base = ptx::smem_addr(smem);
  const uint32_t full0 = smem_base + Cfg::kBarOffset;
  const uint32_t empty0 = full0 + Cfg::kStages * 8;
  const Header* headers = reinterpret_cast<const Header*>(smem + Cfg::kHeaderOffset);

  uint8_t* staging = smem + Cfg::kOutOffset + warp * Cfg::kWarpOutBytes;

  float acc[kChains][kMT][kNT][4];
  int stage = 0;
  uint32_t phase = 0;
  for (;;) {
    ptx::mbarrier_wait(full0 + stage * 8, phase);
    const Header& h = headers[stage];
    const int item = h.item;
    if (item < 0) break;
    const int kc = h.kc, ntile = h.ntile, flags = h.flags;
    if (flags & kFirstStage) {
#pragma unroll
      for (int c = 0; c < kChains; ++c)
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int j = 0; j < kNT; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[c][mt][j][r] = 0.0f;
    }
    const int nkg = min(Cfg::kBKG, kgroups - kc * Cfg::kBKG);
    const uint8_t* stage_ptr = smem + stage * Cfg::kStageBytes;
    // Atom row r = warp * kMT + mt of the CTA tile lives in run r / 4 (a 64-channel tile), row r % 4.
    // Rows past N read stale shared memory; their results are never stored.
    int row_in_tile[kMT], run_rows[kMT];
    const uint8_t* wrow[kMT];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      const int r = warp * kMT + mt;
      const int run = r / kTileRows;
      row_in_tile[mt] = r % kTileRows;
      run_rows[mt] = Cfg::kSiluMul ? kTileRows : max(1, min(kTileRows, n16 - Cfg::run_row0(ntile, run, n16)));
      wrow[mt] = stage_ptr + run * Cfg::kRunBytes;
    }
    // ldmatrix row addresses: lane 8i + r reads token row r, K columns 8i..8i+7 of each group.
    const uint8_t* act = stage_ptr + Cfg::kStageWeightBytes + (lane % 8) * Cfg::kActRowBytes + (lane / 8) * 16;
    if (nkg == Cfg::kBKG) {
      if constexpr (Cfg::kRowWidths) {
        mma_stage_rows<Cfg>(acc, h.rows, wrow, row_in_tile, run_rows, act, lane);
      } else {
        mma_stage<Cfg, true>(acc, wrow, row_in_tile, run_rows, act, nkg, lane);
      }
    } else {  // a short last K stage (K not a multiple of kBK) at the full width
      mma_stage<Cfg, false>(acc, wrow, row_in_tile, run_rows, act, nkg, lane);
    }
    const bool last = (flags & kLastStage) != 0;
    // Epilogue inputs are read from this stage's header (output slots, top-k weights) and the
    // chains summed before the stage is released, so no shared load is still in flight when the
    // producer may overwrite the header.
    int out_slots[OutChunks<Cfg>::kPerLane];  // this lane's 16-byte output chunks
    float weights[kNT][2];                      // tokens 2t, 2t + 1 of each token tile
    if (last) {
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int i = 0; i < 2; ++i) weights[j][i] = h.weights[j * 8 + 2 * t + i];
      chunk_slots<Cfg>(out_slots, h.slots, args.num_slots, lane, Cfg::kSiluMul ? 2 * warp / Cfg::kWarps : 0);
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            float sum = acc[0][mt][j][r];
#pragma unroll
            for (int c = 1; c < kChains; ++c) sum += acc[c][mt][j][r];
            acc[0][mt][j][r] = sum;
          }
    }
    __syncwarp();
    if (lane == 0) ptx::mbarrier_arrive(empty0 + stage * 8);
    if (++stage == Cfg::kStages) {
      stage = 0;
      phase ^= 1;
    }
    if (last) {
      if constexpr (Cfg::kBalancedSchedule) {
        const bool starts_late = (flags & kPartialItem) != 0;
        if ((starts_late || kc != num_kc - 1) &&
            !finish_split_part<Cfg>(args, acc[0], item, num_kc, total, starts_late, warp, lane)) {
          continue;  // a later part finishes this item
        }
      }
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
          for (int r = 0; r < 4; ++r) acc[0][mt][j][r] *= weights[j][r & 1];  // regs 0/2: token 2t
      if constexpr (Cfg::kSiluMul) {
        store_silu_mul_block<Cfg>(args, acc[0], smem + Cfg::kOutOffset, out_slots, ntile, warp, lane);
      } else {
        store_block<Cfg>(args, acc[0], staging, out_slots, (ntile * Cfg::kAtomsN + warp * kMT) * kAtomN, lane);
      }
    }
  }
}

template <class Cfg>
__device__ __forceinline__ void decode_kernel(const Args& args) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0 && ptx::dynamic_smem_bytes() < static_cast<uint32_t>(Cfg::smem_bytes(args.list_cap))) {
    __trap();  // launched with less shared memory than the plan's list_cap needs (never by indexed.gemm)
  }
  const uint32_t smem_base = ptx::smem_addr(smem);
  const uint32_t full0 = smem_base + Cfg::kBarOffset;
  const uint32_t empty0 = full0 + Cfg::kStages * 8;
  if (threadIdx.x == 0) {
    auto* headers = reinterpret_cast<typename Cfg::Header*>(smem + Cfg::kHeaderOffset);
    for (int s = 0; s < Cfg::kStages; ++s) {
      headers[s].act_block = -1;  // no activations in any slot yet
      ptx::mbarrier_init(full0 + s * 8, 1);
      ptx::mbarrier_init(empty0 + s * 8, Cfg::kWarps);
    }
    ptx::fence_mbarrier_init();
  }
  uint32_t* list = reinterpret_cast<uint32_t*>(smem + Cfg::kListOffset);
  int* scratch = reinterpret_cast<int*>(smem + Cfg::kScratchOffset);
  const int used = used_blocks(args, Cfg::kBM);
  int valid_blocks = 0;
  if (args.list_cap > 0) valid_blocks = compact_items<Cfg::kThreads, 1>(args, used, Cfg::kBM, list, scratch);
  __syncthreads();  // barrier initialisation (and the list) visible to every warp
  const int n16 = (args.n + kAtomN - 1) / kAtomN;
  const int ntiles = (n16 + Cfg::kAtomsN - 1) / Cfg::kAtomsN;
  const int total = (args.list_cap > 0 ? valid_blocks : used) * ntiles;  // work items
  if (warp == Cfg::kWarps) {
    producer_loop<Cfg>(args, smem, list, total);
  } else {
    zero_invalid_blocks(args, Cfg::kSiluMul ? args.n / 2 : args.n, used, Cfg::kBM, warp, Cfg::kWarps);
    consumer_loop<Cfg>(args, smem, warp, total);
  }
  if constexpr (Cfg::kDynamic) {
    __syncthreads();
    if (threadIdx.x == 0) release_item_counter(args, static_cast<int>(gridDim.x));
  }
}

}  // namespace chord::indexed
