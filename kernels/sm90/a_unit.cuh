// One unit of A, a row's 64-wide K step, to the fp16 the sm_90a GEMM reads: 32 packed NVFP4 bytes and the row's
// four scales of the step (or 64 fp16 or bf16 values) in, 64 fp16 (128 bytes) out, in the K order of the GEMM's B
// fragments (kernels/sm90/gemm.cuh, "K permutation"), as the conversion kernel (kernels/sm90/convert_a.cuh) writes it.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "common/nvfp4.cuh"
#include "ptx/cvt.cuh"
#include "sm90/plan/geometry.h"

namespace fl::sm90 {

constexpr uint32_t kSfBlockBytes = 512;  // 128 rows x 4 scale blocks
constexpr int kChunksPerUnit = 8;        // 16-byte chunks of a unit's fp16 output

// Byte offset of row r's four scales (K blocks 0..3 of the stage) inside a 512-byte scale block.
__host__ __device__ __forceinline__ uint32_t sf_row_offset(int r) { return (r % 32) * 16 + ((r % 128) / 32) * 4; }

// One unit of NVFP4 A (32 packed bytes and the row's four scales of the step) to its eight fp16 chunks, chunk q at
// slot q ^ (lane % 8) of `out`: chunk q = 2 s4 + b, word c holds K 16c + 8b + s4 (and + 4), scale folded in.
template <class G>
__device__ __forceinline__ void convert_nvfp4_unit(const G& gr, int row, int kc, int steps,
                                                   uint4 (&out)[kChunksPerUnit], int lane) {
  // 16-byte aligned: A's pointer is (the launcher checks it) and a row holds K / 2 bytes, K a multiple of 64
  const uint4* src = reinterpret_cast<const uint4*>(gr.a + (int64_t)row * (gr.k / 2) + kc * (kBlockK / 2));
  const uint4 lo = src[0], hi = src[1];
  const uint32_t sf = *reinterpret_cast<const uint32_t*>(
      gr.sfa + ((int64_t)(row / 128) * steps + kc) * kSfBlockBytes + sf_row_offset(row));
  const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  uint32_t sc[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) sc[c] = ptx::e4m3_to_f16x2_bcast(sf >> (8 * c));
#pragma unroll
  for (int q = 0; q < kChunksPerUnit; ++q) {
    const int s4 = q / 2, b = q % 2;
    uint32_t v[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) v[c] = ptx::mul_f16x2(e2m1_pair(w[2 * c + b], s4), sc[c]);
    out[q ^ (lane % 8)] = make_uint4(v[0], v[1], v[2], v[3]);
  }
}

// One unit of fp16 or bf16 A (the weight-only forms: sfa null; 64 values of a row in natural K order, rows 2K bytes
// apart) to the same chunk order (k_order_word), not scaled: the epilogue unscales such a launch by 2^14, not 2^28.
// bf16 is rounded to fp16 first (ptx::bf16x2_to_f16x2: exact in fp16's normal range).
template <class G>
__device__ __forceinline__ void permute_fp16_unit(const G& gr, int row, int kc, bool bf16, uint4 (&out)[kChunksPerUnit],
                                                  int lane) {
  // 16-byte aligned: A's pointer is (the extension checks it) and a row holds 2K bytes, K a multiple of 64
  const uint4* src = reinterpret_cast<const uint4*>(gr.a + (int64_t)row * (gr.k * 2) + kc * (kBlockK * 2));
  uint32_t w[32];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint4 t = src[i];
    w[4 * i] = t.x, w[4 * i + 1] = t.y, w[4 * i + 2] = t.z, w[4 * i + 3] = t.w;
  }
  if (bf16) {
#pragma unroll
    for (int i = 0; i < 32; ++i) w[i] = ptx::bf16x2_to_f16x2(w[i]);
  }
#pragma unroll
  for (int q = 0; q < kChunksPerUnit; ++q)
    out[q ^ (lane % 8)] =
        make_uint4(k_order_word(w, q, 0), k_order_word(w, q, 1), k_order_word(w, q, 2), k_order_word(w, q, 3));
}

// Stores a warp's 32 converted units from their slots (unit l's chunk q at slots[l][q ^ (l % 8)]), four whole
// 128-byte rows per store instruction: store j writes units 4j .. 4j + 3, lane l chunk l % 8 of unit 4j + l / 8, as
// store(unit, chunk q, its 16 bytes), which writes it where that unit goes (or not at all). Every lane of the warp
// calls it (store may exchange values across the warp).
template <class S>
__device__ __forceinline__ void store_units(const uint4 (&slots)[32][kChunksPerUnit], int lane, S store) {
  const int q = lane % 8;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int from = 4 * j + lane / 8;
    store(from, q, slots[from][q ^ (from % 8)]);
  }
}

}  // namespace fl::sm90
