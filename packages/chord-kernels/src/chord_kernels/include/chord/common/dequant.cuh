// Exact int4 -> bf16 dequantization primitives (the numerics contract of docs/formats.md).
//
// A 32-bit word holds eight 4-bit codes q (value q - 8). OR-ing a nibble into the mantissa of
// 128.0 (0x4300, ulp 1) gives the bf16 value 128 + q exactly; subtracting 136 gives q - 8
// exactly; one bf16 multiply by the scale rounds once. That is bit-identical to the reference
// bf16(bf16(q - 8) * s). An fma(128 + q, s, -136 s) would save an instruction but round
// differently, so it is deliberately not used.
#pragma once

#include <cstdint>

namespace chord {

// Pair of bf16 (128 + q_lo, 128 + q_hi) from the nibbles at bit 0 and bit 16 of `word`.
__device__ __forceinline__ uint32_t nibble_pair_to_bf16x2(uint32_t word) {
  uint32_t out;
  // lop3 with immLut 0xEA computes (a & b) | c.
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(out) : "r"(word), "r"(0x000F000Fu), "r"(0x43004300u));
  return out;
}

// (128 + q) - 136 = q - 8, exact in bf16.
__device__ __forceinline__ uint32_t bf16x2_minus_136(uint32_t x) {
  uint32_t out;
  asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(out) : "r"(x), "r"(0x43084308u));
  return out;
}

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  uint32_t out;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(out) : "r"(a), "r"(b));
  return out;
}

// Dequantize the eight codes of one compressed-tensors word (code k at bits 4k) with one scale
// pair (s, s) into four bf16x2 registers holding columns (0,1), (2,3), (4,5), (6,7).
__device__ __forceinline__ void dequant_word_in_order(uint32_t word, uint32_t scale2, uint32_t out[4]) {
  // Shifts give the pairs (k, k + 4) for k = 0..3.
  uint32_t v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[i] = bf16x2_mul(bf16x2_minus_136(nibble_pair_to_bf16x2(word >> (4 * i))), scale2);
  }
  // Re-pair into column order with byte permutes: (k0,k1) (k2,k3) from the low halves,
  // (k4,k5) (k6,k7) from the high halves.
  out[0] = __byte_perm(v[0], v[1], 0x5410);
  out[1] = __byte_perm(v[2], v[3], 0x5410);
  out[2] = __byte_perm(v[0], v[1], 0x7632);
  out[3] = __byte_perm(v[2], v[3], 0x7632);
}

// bf16x2 a * (s, s) with s the low (kHigh false) or high half of `scales`. Written as a PTX
// half-select so that ptxas folds it into the HMUL2 operand (.H0_H0 / .H1_H1) instead of
// spending an ALU PRMT per scale pair (the ALU pipe is the kernel's busiest, docs/optimization.md).
template <bool kHigh>
__device__ __forceinline__ uint32_t bf16x2_mul_by_half(uint32_t a, uint32_t scales) {
  uint32_t out;
  if constexpr (kHigh) {
    asm("{\n\t.reg .b16 lo, hi;\n\t.reg .b32 s;\n\tmov.b32 {lo, hi}, %2;\n\tmov.b32 s, {hi, hi};\n\t"
        "mul.rn.bf16x2 %0, %1, s;\n\t}"
        : "=r"(out)
        : "r"(a), "r"(scales));
  } else {
    asm("{\n\t.reg .b16 lo, hi;\n\t.reg .b32 s;\n\tmov.b32 {lo, hi}, %2;\n\tmov.b32 s, {lo, lo};\n\t"
        "mul.rn.bf16x2 %0, %1, s;\n\t}"
        : "=r"(out)
        : "r"(a), "r"(scales));
  }
  return out;
}

// One A-fragment register: the nibble pair at bit `shift` of `word` (a lane's code word of row g
// or g + 8) dequantized with that row's scale, the kHigh half of the scale word (g | g+8 << 16).
template <bool kHigh>
__device__ __forceinline__ uint32_t dequant_pair(uint32_t word, int shift, uint32_t scales) {
  return bf16x2_mul_by_half<kHigh>(bf16x2_minus_136(nibble_pair_to_bf16x2(word >> shift)), scales);
}

// The one-fma form, exact where every scale s is below 2^-5 in magnitude (PackedWeight.small_scales,
// docs/formats.md): the nibble q alone, as bf16 bits, is the subnormal q * 2^-133, and one fma with
// s * 2^133 (exact: a power-of-two multiple of s that stays finite) and -8 s (exact) gives the
// exact (q - 8) s rounded once -- the reference's bf16(bf16(q - 8) * s), bit for bit (checked on the
// GPU for every bf16 scale and code). One bf16x2 instruction per A register instead of two.
// Bits 4-7 of a bf16 are as linear (bit 7, the exponent's lowest, continues the subnormal range:
// q << 4 is q * 2^-129 for every q), so a pair at bits 4 and 20 of a word needs no shift when it
// meets s * 2^129: one shift per code word (by 8, for the upper two pairs) instead of three.
//
// How a kernel dequantizes (its Cfg::kDequant): kSubMul, the two-instruction form (any scale);
// kFmaInPlace, the one-fma form with the pairs at bit 4 read in place; kFmaShifted, the one-fma
// form with every pair shifted to bit 0 (the per-step loops of the widest one-block items keep it:
// docs/optimization.md, session 32).
enum class Dequant { kSubMul, kFmaShifted, kFmaInPlace };

// The scale registers of one K group of a tile or atom row (row g's scale in the low half, row
// g + 8's in the high half): the scale word itself (s), or in the one-fma forms s * 2^133 (s),
// -8 s (neg8) and, in place, s * 2^129 (s4).
struct GroupScales {
  uint32_t s;
  uint32_t neg8;
  uint32_t s4;
};

template <Dequant kForm>
__device__ __forceinline__ GroupScales group_scales(uint32_t word) {
  if constexpr (kForm == Dequant::kSubMul) {
    return {word, 0u, 0u};
  } else {
    const uint32_t s66 = bf16x2_mul(word, 0x60806080u);  // x 2^66
    return {bf16x2_mul(s66, 0x61006100u),                // x 2^67
            bf16x2_mul(word, 0xC100C100u),               // x -8
            kForm == Dequant::kFmaInPlace ? bf16x2_mul(s66, 0x5F005F00u) : 0u};  // x 2^63
  }
}

// fma(q, b, c) of bf16x2 q with the kHigh halves of b and c broadcast (half-selects that ptxas folds
// into the HFMA2 operands, .H0_H0 / .H1_H1, as bf16x2_mul_by_half).
template <bool kHigh>
__device__ __forceinline__ uint32_t fma_by_half(uint32_t q, uint32_t b, uint32_t c) {
  uint32_t out;
  if constexpr (kHigh) {
    asm("{\n\t.reg .b16 bl, bh, cl, ch;\n\t.reg .b32 b, c;\n\tmov.b32 {bl, bh}, %2;\n\tmov.b32 b, {bh, bh};\n\t"
        "mov.b32 {cl, ch}, %3;\n\tmov.b32 c, {ch, ch};\n\tfma.rn.bf16x2 %0, %1, b, c;\n\t}"
        : "=r"(out)
        : "r"(q), "r"(b), "r"(c));
  } else {
    asm("{\n\t.reg .b16 bl, bh, cl, ch;\n\t.reg .b32 b, c;\n\tmov.b32 {bl, bh}, %2;\n\tmov.b32 b, {bl, bl};\n\t"
        "mov.b32 {cl, ch}, %3;\n\tmov.b32 c, {cl, cl};\n\tfma.rn.bf16x2 %0, %1, b, c;\n\t}"
        : "=r"(out)
        : "r"(q), "r"(b), "r"(c));
  }
  return out;
}

// One A-fragment register in form kForm: the nibble pair at bit `shift` (0, 4, 8 or 12) of `word`
// (a lane's code word of row g or g + 8) dequantized with the kHigh halves of sc (from group_scales).
template <Dequant kForm, bool kHigh>
__device__ __forceinline__ uint32_t scaled_pair(uint32_t word, int shift, const GroupScales& sc) {
  if constexpr (kForm == Dequant::kSubMul) {
    return dequant_pair<kHigh>(word, shift, sc.s);
  } else if constexpr (kForm == Dequant::kFmaInPlace) {
    if (shift & 4) return fma_by_half<kHigh>((word >> (shift & 8)) & 0x00F000F0u, sc.s4, sc.neg8);
  }
  return fma_by_half<kHigh>((word >> shift) & 0x000F000Fu, sc.s, sc.neg8);
}

__device__ __forceinline__ uint32_t broadcast_bf16(uint16_t bits) {
  return static_cast<uint32_t>(bits) * 0x00010001u;
}

}  // namespace chord
