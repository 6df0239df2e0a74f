// NVFP4 (E2M1) -> fp16 with shifts and masks, no table.
//
// An E2M1 nibble s.e1e0.m placed so that e1e0.m lands on fp16 bits 11..9 and s on bit 15 is read
// by fp16 as exactly value * 2^-14 (e = 0 becomes an fp16 subnormal, e > 0 a normal with the
// same mantissa bit). Multiplying by the block scale (fp16) is exact as well: value * scale has at
// most 6 significant bits and is a multiple of 2^-10, so value * scale * 2^-14 is a multiple of
// 2^-24, the fp16 subnormal step, and below 6 * 448 * 2^-14 < 1. Both operands carry the 2^-14,
// so the accumulator holds the true product times 2^-28; the epilogue multiplies by 2^28 (exact).
#pragma once
#include <cstdint>

// Device code, also built by the host compiler for the CPU tests (tests/cpp/nvfp4_probe.cpp).
#ifdef __CUDACC__
#define FL_NVFP4_FN __host__ __device__ __forceinline__
#else
#define FL_NVFP4_FN inline
#endif

namespace fl {

// __byte_perm (PRMT): byte i of the result is byte (sel >> 4i) & 7 of the 8 bytes b:a (a the low 4).
FL_NVFP4_FN uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t sel) {
#ifdef __CUDA_ARCH__
  return __byte_perm(a, b, sel);
#else
  const uint64_t ab = (uint64_t)b << 32 | a;
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) out |= (uint32_t)(ab >> (8 * ((sel >> (4 * i)) & 7)) & 0xFFu) << (8 * i);
  return out;
#endif
}

constexpr float kNvfp4Unscale = 268435456.0f;  // 2^28
constexpr float kFp16AUnscale = 16384.0f;      // 2^14: A given as fp16 (only B carries 2^-14)

// Nibbles j and j+4 of an 8-nibble word, as (low, high) halves of an f16x2, each value * 2^-14.
template <int J>
FL_NVFP4_FN uint32_t e2m1_pair_j(uint32_t w) {
  static_assert(J >= 0 && J < 4, "nibble pair index is 0..3");
  constexpr int kMag = 9 - 4 * J;   // nibble bits 0..2 -> fp16 bits 9..11 (and 25..27 for nibble J+4)
  constexpr int kSign = 12 - 4 * J; // nibble bit 3   -> fp16 bit 15 (and 31)
  const uint32_t mag = (kMag >= 0 ? (w << kMag) : (w >> -kMag)) & 0x0E000E00u;
  const uint32_t sign = (w << kSign) & 0x80008000u;
  return mag | sign;
}

// The same pairs from a word's bytes: every nibble turned into the high byte of its fp16 once per
// word (even nibbles into `lo`, odd ones into `hi`, byte i holding nibble 2i resp. 2i + 1), so a
// pair is one byte permute (bytes to the halves' high bytes, zeros below) instead of two shifts and
// two masks each.
struct E2m1Bytes {
  uint32_t lo, hi;
};

FL_NVFP4_FN E2m1Bytes e2m1_bytes(uint32_t w) {
  E2m1Bytes b;
  b.lo = ((w << 1) & 0x0E0E0E0Eu) | ((w << 4) & 0x80808080u);  // nibble bits 0..2 -> 1..3, bit 3 -> 7
  b.hi = ((w >> 3) & 0x0E0E0E0Eu) | (w & 0x80808080u);         // nibble bits 4..6 -> 1..3, bit 7 stays
  return b;
}

// Nibbles j and j + 4 (bytes j / 2 and j / 2 + 2 of lo or hi) -> bytes 1 and 3; bytes 0 and 2 zero.
template <int J>
FL_NVFP4_FN uint32_t e2m1_pair_bytes(const E2m1Bytes& b) {
  static_assert(J >= 0 && J < 4, "nibble pair index is 0..3");
  constexpr uint32_t kSel = (J / 2) == 0 ? 0x2404u : 0x3414u;  // zero from the second operand
  return byte_perm(J % 2 == 0 ? b.lo : b.hi, 0u, kSel);
}

FL_NVFP4_FN uint32_t e2m1_pair(uint32_t w, int j) {
  switch (j) {
    case 0: return e2m1_pair_j<0>(w);
    case 1: return e2m1_pair_j<1>(w);
    case 2: return e2m1_pair_j<2>(w);
    default: return e2m1_pair_j<3>(w);
  }
}

// One word of the K order below: the halves s % 2 of words `lo` (K j) and `hi` (K j + 4, two words on), as fp16 values
// of a row in natural order (K 2i in the low half of word i; j = 2i + s % 2).
FL_NVFP4_FN uint32_t k_order_pair(uint32_t lo, uint32_t hi, int s) {
  return byte_perm(lo, hi, s % 2 ? 0x7632u : 0x5410u);
}

// The GEMM's K order inside a 64-wide step, for a row of fp16 A given in natural order (the weight-only forms): in
// 16-byte chunk q = 2s + b, word c holds K values 16c + 8b + s (low half) and 16c + 8b + s + 4 (high half), the
// order in which e2m1_pair(w[2c + b], s) decodes a packed row's nibbles (nibble t of word i: K 8i + t). `w`: the
// row's 64 fp16 values, two a word (K 2i in the low half of w[i]).
FL_NVFP4_FN uint32_t k_order_word(const uint32_t* w, int q, int c) {
  const int s = q / 2, j = 16 * c + 8 * (q % 2) + s;  // K j and j + 4: half s % 2 of words j / 2 and j / 2 + 2
  return k_order_pair(w[j / 2], w[j / 2 + 2], s);
}

}  // namespace fl
