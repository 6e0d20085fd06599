// Every bf16 scale bit pattern x every 4-bit code at every nibble position of a word: the one-fma
// forms (pairs shifted to bit 0; pairs at bit 4 in place, session 32; both reading scale words that
// hold s * 2^133, session 33) against the sub-then-multiply form, bit for bit, on the GPU's own bf16x2
// arithmetic. The other nibbles of the word hold other codes.
#include <cstdio>
#include <cstdint>
#include "chord/common/dequant.cuh"

using chord::Dequant;

template <Dequant kForm>
__global__ void check(unsigned long long* bad, uint32_t* first_bad) {
  const uint32_t s16 = blockIdx.x * blockDim.x + threadIdx.x;  // 0..65535
  if (s16 >= 65536) return;
  const uint32_t scales = s16 | (((s16 * 40503u) & 0xFFFFu) << 16);  // low half every pattern, high half another
  const uint32_t limit = 0x3D00u;  // 2^-5
  const chord::GroupScales ref = chord::group_scales<Dequant::kSubMul>(scales);
  // The biased forms read s * 2^133 (as the tiles would hold it: s * 2^66 * 2^67, exact below 2^-5).
  const uint32_t held = chord::biased_scales(kForm) ? chord::group_scales<Dequant::kFmaShifted>(scales).s : scales;
  const chord::GroupScales sc = chord::group_scales<kForm>(held);
  for (int shift = 0; shift < 16; shift += 4) {
    for (uint32_t q = 0; q < 16; ++q) {
      uint32_t word = 0;
      for (int p = 0; p < 8; ++p) word |= ((q * (2 * p + 1) + p) & 15u) << (4 * p);  // other codes elsewhere
      word = (word & ~((0xFu << shift) | (0xFu << (16 + shift)))) | (q << shift) | ((15u - q) << (16 + shift));
      const uint32_t pairs[2][2] = {
          {chord::scaled_pair<Dequant::kSubMul, false>(word, shift, ref), chord::scaled_pair<kForm, false>(word, shift, sc)},
          {chord::scaled_pair<Dequant::kSubMul, true>(word, shift, ref), chord::scaled_pair<kForm, true>(word, shift, sc)}};
      for (int h = 0; h < 2; ++h) {
        const uint32_t sbits = h ? (scales >> 16) : (scales & 0xFFFFu);
        if (((sbits >> 7) & 0xFF) == 0xFF) continue;  // NaN / infinity scales
        for (int half = 0; half < 2; ++half) {
          const uint16_t w = (pairs[h][0] >> (16 * half)) & 0xFFFF, g = (pairs[h][1] >> (16 * half)) & 0xFFFF;
          if (w == g || ((w & 0x7FFF) == 0 && (g & 0x7FFF) == 0)) continue;  // +0 and -0 are one number
          const bool small = (sbits & 0x7FFF) < limit;
          atomicAdd(bad + (small ? 0 : 1), 1ull);
          if (small) atomicCAS(first_bad, 0xFFFFFFFFu, (sbits << 16) | (q << 8) | (shift << 1) | half);
        }
      }
    }
  }
}

template <Dequant kForm>
int run(const char* name) {
  unsigned long long* d;
  uint32_t* f;
  cudaMalloc(&d, 16);
  cudaMalloc(&f, 4);
  cudaMemset(d, 0, 16);
  cudaMemset(f, 0xFF, 4);
  check<kForm><<<256, 256>>>(d, f);
  unsigned long long h[2];
  uint32_t hf;
  cudaMemcpy(h, d, 16, cudaMemcpyDeviceToHost);
  cudaMemcpy(&hf, f, 4, cudaMemcpyDeviceToHost);
  printf("%s: err=%s mismatches below 2^-5: %llu, above: %llu, first below %08x\n", name,
         cudaGetErrorString(cudaGetLastError()), h[0], h[1], hf);
  return h[0] != 0;
}

int main() {
  return run<Dequant::kFmaShifted>("shifted") | run<Dequant::kFmaInPlace>("in place") |
         run<Dequant::kFmaShiftedBiased>("shifted, biased scales") | run<Dequant::kFmaInPlaceBiased>("in place, biased scales");
}
