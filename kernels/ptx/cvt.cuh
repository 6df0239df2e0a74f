// Conversions and packed half arithmetic used by the NVFP4 dequantisation.
#pragma once
#include <cstdint>

namespace fl::ptx {

// Two E4M3 bytes -> two fp16 (exact: every E4M3 value is an fp16 value). Low byte -> low half.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint16_t v) {
  uint32_t out;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(out) : "h"(v));
  return out;
}

// One E4M3 byte -> (s, s) as f16x2.
__device__ __forceinline__ uint32_t e4m3_to_f16x2_bcast(uint32_t byte) {
  return e4m3x2_to_f16x2(static_cast<uint16_t>((byte & 0xFFu) * 0x0101u));
}

// Two bf16 -> two fp16, each to nearest (exact where |x| is in fp16's normal range, 2^-14 .. 65504; smaller values
// round to fp16's subnormal step 2^-24, larger ones to +-inf; NaN stays NaN). Low half -> low half.
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t v) {
  uint32_t out;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(out) : "f"(__uint_as_float(v & 0xFFFF0000u)), "f"(__uint_as_float(v << 16)));
  return out;
}

// f16x2 multiply, round to nearest; fp16 subnormals are kept (no flush).
__device__ __forceinline__ uint32_t mul_f16x2(uint32_t a, uint32_t b) {
  uint32_t out;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(out) : "r"(a), "r"(b));
  return out;
}

// f16x2 fused multiply-add a * b + c, round to nearest; subnormals kept.
__device__ __forceinline__ uint32_t fma_f16x2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t out;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(out) : "r"(a), "r"(b), "r"(c));
  return out;
}

}  // namespace fl::ptx
