// A -> fp16 workspace, once per launch, before the sm_90a GEMM (sm90_group_gemm.cuh) reads it.
// The workspace stacks the launch's groups' rows with one pitch (the launch's largest K); a group
// with a smaller K leaves the rest of its rows unwritten (the GEMM never reads them).
//
// One unit = one row and one 64-wide K step of one group: 32 packed bytes and the row's four scales
// of that step in, 64 fp16 (128 bytes) out, scale folded in (exact: nvfp4.cuh), K permuted inside
// the step as the GEMM's B fragments expect (sm90_group_gemm.cuh, "K permutation"): 16-byte chunk
// q = 2s + b (s in 0..3, b in 0..1) holds, in word c (0..3), A's K values 16c + 8b + s and +4.
// Eight consecutive threads share a unit, one chunk each, and consecutive units are consecutive K
// steps of a row, so each warp store writes 512 contiguous bytes (the loads of a unit's 32 bytes
// are shared by its eight threads).
//
// It also writes each group's B tensor map for the GEMM when they are not kernel parameters
// (Params::b_maps; warp w of the grid, counted across blocks, writes group w's) and zeroes the GEMM's
// partial-sum flags. Launches of up to kGroupsSmall groups, whose B maps are GEMM parameters, run
// convert_a_small on their own small parameter block (ConvertParams). It lets the GEMM launch only
// after its own griddepcontrol.wait: the GEMM's B producer relies on that to read B, an input, without
// waiting itself.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "map_pool.cuh"
#include "nvfp4.cuh"
#include "ptx/cvt.cuh"
#include "ptx/griddep.cuh"
#include "sm90_group_gemm.cuh"

namespace fl::sm90 {

constexpr int kChunksPerUnit = 8;

// Both conversion kernels begin so. The workspace may still be read by the previous grid in the stream
// (the last GEMM): wait for it. Keep the order: the GEMM may launch only once the grids before this one
// completed (its B producer reads B without a wait of its own). Then zero the GEMM's partial-sum flags
// (read by the GEMM only after its griddepcontrol.wait, i.e. after this grid).
template <class P>
__device__ __forceinline__ void begin_conversion(const P& p) {
  ptx::griddep_wait();
  ptx::griddep_launch_dependents();
  if (blockIdx.x == 0)
    for (int i = threadIdx.x; i < p.num_ctas * (int)kConsumerWarps; i += kConvertThreads) p.flags[i] = 0;
}

// The units of the launch, grid-stride. P: Params<MAXG> or ConvertParams (the same field names).
template <class P>
__device__ __forceinline__ void convert_units(const P& p) {
  const int q = threadIdx.x % kChunksPerUnit, s4 = q / 2, b = q % 2;
  const int units_per_block = kConvertThreads / kChunksPerUnit;
  int g = 0;
  for (int u = blockIdx.x * units_per_block + threadIdx.x / kChunksPerUnit; u < p.num_units;
       u += gridDim.x * units_per_block) {
    while (u >= p.groups[g].unit_end) ++g;
    const auto& gr = p.groups[g];
    const int local = u - (g ? p.groups[g - 1].unit_end : 0);
    const int steps = gr.k / kBlockK;
    const int row = local / steps, kc = local % steps;
    const uint32_t* src = reinterpret_cast<const uint32_t*>(gr.a + (int64_t)row * (gr.k / 2) + kc * (kBlockK / 2));
    const uint32_t sf = *reinterpret_cast<const uint32_t*>(
        gr.sfa + ((int64_t)(row / 128) * steps + kc) * kSfBlockBytes + sf_row_offset(row));
    uint32_t v[4];
#pragma unroll
    for (int c = 0; c < 4; ++c)
      v[c] = ptx::mul_f16x2(e2m1_pair(src[2 * c + b], s4), ptx::e4m3_to_f16x2_bcast(sf >> (8 * c)));
    uint4* dst = reinterpret_cast<uint4*>(gr.a16 + (int64_t)row * p.a16_pitch + kc * kBlockK);
    dst[q] = make_uint4(v[0], v[1], v[2], v[3]);
  }
}

// Launches of more than kGroupsSmall groups, whose B maps it writes (they are not GEMM parameters).
template <int MAXG>
__global__ void __launch_bounds__(kConvertThreads) convert_a(const __grid_constant__ Params<MAXG> p) {
  static_assert(MAXG > kGroupsSmall, "up to kGroupsSmall groups: convert_a_small");
  begin_conversion(p);
  {
    __shared__ alignas(128) uint8_t stage[kConvertThreads / 32][kMapBytes];
    const int warp = threadIdx.x / 32, g = blockIdx.x * (kConvertThreads / 32) + warp;
    if (g < p.num_groups) {
      const Group& gr = p.groups[g];
      pool::publish_map_2d(stage[warp], p.tmpl_b, p.b_maps + (size_t)g * kMapBytes, gr.b, gr.k / 2, gr.n,
                           threadIdx.x % 32);
    }
  }
  convert_units(p);
}

// Launches of up to kGroupsSmall groups (B maps in the GEMM's parameters): the same work on ConvertParams.
__global__ void __launch_bounds__(kConvertThreads) convert_a_small(const __grid_constant__ ConvertParams p) {
  begin_conversion(p);
  convert_units(p);
}

}  // namespace fl::sm90
