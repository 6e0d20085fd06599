// Warpgroup MMA (sm_90a): fences, groups, shared-memory descriptors and register pinning.
//
// The instruction itself (`wgmma.mma_async ... m64nNk16`) has N / 2 accumulator registers per
// thread, so each kernel instantiation gets a generated specialisation of `RegisterA<N>`
// (chord_kernels/indexed/wgmma.py writes it into the translation unit): a template cannot vary
// the operand list of an asm statement.
#pragma once

#include <cstdint>

namespace chord::wgmma {

// Before the first wgmma that reads registers written by ordinary instructions (A fragments,
// accumulators), and to order earlier shared-memory writes seen by the async proxy.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

__device__ __forceinline__ void commit_group() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

// Wait until at most kPending committed groups of this warpgroup are still in flight.
template <int kPending>
__device__ __forceinline__ void wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Keep the compiler from moving reads/writes of a register across an async wgmma that uses it.
__device__ __forceinline__ void pin(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void pin(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

// Descriptor of a K-major bf16 operand in shared memory with the 128-byte swizzle: each row (one
// token) holds 64 K values in 128 bytes whose 16-byte chunks are XOR-ed with (row % 8), and
// 8-row groups are 1024 bytes apart (SBO). The tile must start 1024-byte aligned; the k-th K step
// of 16 inside the 64 starts `32 k` bytes further (the hardware applies the swizzle on the
// address bits).
__device__ __forceinline__ uint64_t desc_k_major_sw128(uint32_t smem_addr) {
  uint64_t desc = (smem_addr & 0x3FFFFu) >> 4;  // start address (16-byte units)
  desc |= uint64_t{1} << 16;                    // leading byte offset: unused for swizzled K-major
  desc |= uint64_t{1024 >> 4} << 32;            // stride byte offset: next 8-row group
  desc |= uint64_t{1} << 62;                    // layout: 128-byte swizzle
  return desc;
}

// Byte offset of the 16-byte chunk `chunk` (0..7) of row `row` in a 128-byte-swizzled tile.
__device__ __forceinline__ uint32_t sw128_offset(int row, int chunk) {
  return static_cast<uint32_t>(row * 128 + ((chunk ^ (row & 7)) << 4));
}

// D (64 x N fp32, N / 2 registers per thread) += A (64 x 16 bf16 from registers, the mma.m16n8k16
// A fragment of each warp's 16 rows) x B (16 x N bf16, K-major in shared memory); specialised per N.
template <int N>
struct RegisterA;

}  // namespace chord::wgmma
