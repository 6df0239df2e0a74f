// A's fp16 chunks in the GEMM's K order (kernels/sm90/gemm.cuh, "K permutation"), made by the conversion kernel
// (kernels/sm90/convert_a.cuh) into the workspace, or by the GEMM's own producer warps straight into an A stage
// (stage_row below: the masked form's decode launches, one launch a call).
//
// A 64-wide K step of one row is eight 16-byte chunks; chunk q = 2s + b holds, in word c (0..3), the K values
// 16c + 8b + s (low half) and 16c + 8b + s + 4 (high half).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "common/nvfp4.cuh"
#include "ptx/cvt.cuh"
#include "ptx/stmatrix.cuh"

namespace fl::sm90 {

// Chunk q of an NVFP4 row's step: `w` its 32 packed bytes (nibble t of word i: K 8i + t), `sc` its four block
// scales, each broadcast to an f16x2 (ptx::e4m3_to_f16x2_bcast); values * 2^-14 * scale (kernels/common/nvfp4.cuh).
__device__ __forceinline__ uint4 nvfp4_chunk(const uint32_t (&w)[8], const uint32_t (&sc)[4], int q) {
  const int s = q / 2, b = q % 2;
  uint32_t v[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) v[c] = ptx::mul_f16x2(e2m1_pair(w[2 * c + b], s), sc[c]);
  return make_uint4(v[0], v[1], v[2], v[3]);
}

// Chunk q = 2s + b of an fp16 row's step from the four natural-order 16-byte chunks it draws on: `in[c]` is the
// row's chunk 2c + b (K 16c + 8b .. 16c + 8b + 7, two values a word, the lower K in the low half).
__device__ __forceinline__ uint4 fp16_chunk(const uint4 (&in)[4], int s) {
  const uint32_t sel = s % 2 ? 0x7632u : 0x5410u;
  uint32_t v[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const uint32_t lo = s / 2 ? in[c].y : in[c].x, hi = s / 2 ? in[c].w : in[c].z;
    v[c] = byte_perm(lo, hi, sel);
  }
  return make_uint4(v[0], v[1], v[2], v[3]);
}

__device__ __forceinline__ void sts128u(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// The raw A tile a producer loads by TMA for the GEMM's own staging: kNarrowN rows of one step, NVFP4 (32 bytes a
// row, then the step's 512-byte scale block of the rows' 128-row block) or fp16 / bf16 (128 bytes a row, in the
// 128-byte swizzle: chunk j of row r at 16-byte slot j ^ (r % 8)).
constexpr uint32_t kRawNvfp4RowBytes = 32, kRawFp16RowBytes = 128;

// Row r of a step into the fp16 stage `dst` (rows of 128 bytes, 128-byte swizzle: chunk q of row r at slot
// q ^ (r % 8)), from the raw tile at `raw`. NVFP4 (`nvfp4`): the row's packed bytes at raw + 32 r, its scale word
// at raw + kRawScaleOffset + `sf_off` (the row's place in the scale block). Else fp16 or bf16 (`bf16`: rounded to
// fp16 first, as the conversion kernel does).
constexpr uint32_t kRawScaleOffset = 32 * kRawNvfp4RowBytes;
__device__ __forceinline__ void stage_row(uint32_t raw, uint32_t dst, int r, uint32_t sf_off, bool nvfp4, bool bf16) {
  const uint32_t row = dst + (uint32_t)r * 128, x = (uint32_t)(r % 8);
  if (nvfp4) {
    const uint4 lo = ptx::lds128(raw + r * kRawNvfp4RowBytes), hi = ptx::lds128(raw + r * kRawNvfp4RowBytes + 16);
    const uint32_t sf = ptx::lds32(raw + kRawScaleOffset + sf_off);
    const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    uint32_t sc[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) sc[c] = ptx::e4m3_to_f16x2_bcast(sf >> (8 * c));
#pragma unroll
    for (int q = 0; q < 8; ++q) sts128u(row + ((q ^ x) << 4), nvfp4_chunk(w, sc, q));
    return;
  }
  const uint32_t src = raw + (uint32_t)r * kRawFp16RowBytes;
#pragma unroll
  for (int b = 0; b < 2; ++b) {
    uint4 in[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      in[c] = ptx::lds128(src + (((2 * c + b) ^ x) << 4));
      if (bf16) {
        in[c].x = ptx::bf16x2_to_f16x2(in[c].x), in[c].y = ptx::bf16x2_to_f16x2(in[c].y);
        in[c].z = ptx::bf16x2_to_f16x2(in[c].z), in[c].w = ptx::bf16x2_to_f16x2(in[c].w);
      }
    }
#pragma unroll
    for (int s = 0; s < 4; ++s) sts128u(row + (((2 * s + b) ^ x) << 4), fp16_chunk(in, s));
  }
}

}  // namespace fl::sm90
