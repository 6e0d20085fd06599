// Warp-level tensor-core MMA used by the decode kernels (sm_80+ instruction, used on sm_90a and
// Blackwell where it is the same MMA family).
#pragma once

#include <cstdint>

namespace chord::mma {

// D = A * B + D, A 16x16 bf16 (4 regs, row), B 16x8 bf16 (2 regs, col), D 16x8 fp32 (4 regs).
// Fragment ownership (PTX ISA): with g = lane / 4 and t = lane % 4, A reg 0 holds (row g, k 2t..2t+1),
// reg 1 (row g+8, k 2t..), reg 2 (row g, k 2t+8..), reg 3 (row g+8, k 2t+8..); B reg 0 holds
// (k 2t..2t+1, col g), reg 1 (k 2t+8.., col g); D regs (row g, cols 2t, 2t+1), (row g+8, ...).
__device__ __forceinline__ void m16n8k16_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                              uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace chord::mma
