// A -> fp16 workspace, once per launch, before the sm_90a GEMM (sm90_group_gemm.cuh) reads it.
//
// One unit = one row and one 64-wide K step of one group: 32 packed bytes and the row's four scales
// of that step in, 64 fp16 (128 bytes) out, scale folded in (exact: nvfp4.cuh), K permuted inside
// the step as the GEMM's B fragments expect (sm90_group_gemm.cuh, "K permutation"): output word
// 8s + 4b + c (s, c in 0..3, b in 0..1) holds A's K values 16c + 8b + s and 16c + 8b + s + 4.
// Consecutive threads take consecutive K steps of a row, so a warp writes 4 KB of a row at once.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "nvfp4.cuh"
#include "ptx/cvt.cuh"
#include "ptx/griddep.cuh"
#include "sm90_group_gemm.cuh"

namespace fl::sm90 {

template <int MAXG>
__global__ void __launch_bounds__(kConvertThreads) convert_a(const __grid_constant__ Params<MAXG> p) {
  // The workspace may still be read by the previous grid in the stream (the last GEMM).
  ptx::griddep_wait();
  ptx::griddep_launch_dependents();
  int g = 0;
  for (int u = blockIdx.x * kConvertThreads + threadIdx.x; u < p.num_units; u += gridDim.x * kConvertThreads) {
    while (u >= p.groups[g].unit_end) ++g;
    const Group& gr = p.groups[g];
    const int local = u - (g ? p.groups[g - 1].unit_end : 0);
    const int steps = gr.k / kBlockK;
    const int row = local / steps, kc = local % steps;
    const uint4* src = reinterpret_cast<const uint4*>(gr.a + (int64_t)row * (gr.k / 2) + kc * (kBlockK / 2));
    const uint4 lo = src[0], hi = src[1];
    const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    const uint32_t sf = *reinterpret_cast<const uint32_t*>(
        gr.sfa + ((int64_t)(row / 128) * steps + kc) * kSfBlockBytes + sf_row_offset(row));
    uint32_t sc[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) sc[c] = ptx::e4m3_to_f16x2_bcast(sf >> (8 * c));
    uint4* dst = reinterpret_cast<uint4*>(gr.a16 + (int64_t)row * gr.k + kc * kBlockK);
#pragma unroll
    for (int s4 = 0; s4 < 4; ++s4) {
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        uint4 v;
        v.x = ptx::mul_f16x2(e2m1_pair(w[0 + b], s4), sc[0]);
        v.y = ptx::mul_f16x2(e2m1_pair(w[2 + b], s4), sc[1]);
        v.z = ptx::mul_f16x2(e2m1_pair(w[4 + b], s4), sc[2]);
        v.w = ptx::mul_f16x2(e2m1_pair(w[6 + b], s4), sc[3]);
        dst[2 * s4 + b] = v;
      }
    }
  }
}

}  // namespace fl::sm90
