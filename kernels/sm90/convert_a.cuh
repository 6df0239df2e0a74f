// A -> fp16 workspace, once per launch, before the sm_90a GEMM (kernels/sm90/gemm.cuh) reads it.
// The workspace stacks the launch's groups' rows with one pitch (the launch's largest K); a group
// with a smaller K leaves the rest of its rows unwritten (the GEMM never reads them).
//
// One unit = one row and one 64-wide K step of one group: 32 packed bytes and the row's four scales
// of that step in, 64 fp16 (128 bytes) out, scale folded in (exact: kernels/common/nvfp4.cuh); or, where the
// group's A is fp16 or bf16 (the weight-only forms, sfa null), its 64 values in, as fp16, not scaled. K is permuted inside
// the step as the GEMM's B fragments expect (kernels/sm90/gemm.cuh, "K permutation"): 16-byte chunk
// q = 2s + b (s in 0..3, b in 0..1) holds, in word c (0..3), A's K values 16c + 8b + s and +4.
// One thread per unit; consecutive units are consecutive K steps of a row (convert_units). In the masked form a
// row the GEMM never reads (past its group's count, rounded up to the group's tile width) is not converted.
//
// It also writes each group's B tensor map for the GEMM when they are not kernel parameters
// (Params::b_maps; warp w of the grid, counted across blocks, writes group w's). Launches of up to kGroupsSmall
// groups, whose B maps are GEMM parameters, run convert_a_small on their own small parameter block (ConvertParams).
// It lets the GEMM launch only after its own griddepcontrol.wait: the GEMM's B producer relies on that to read B, an
// input, without waiting itself.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "common/map_pool.cuh"
#include "common/nvfp4.cuh"
#include "ptx/cvt.cuh"
#include "ptx/griddep.cuh"
#include "sm90/gemm.cuh"

namespace fl::sm90 {

constexpr int kChunksPerUnit = 8;

// Both conversion kernels begin so. The workspace may still be read by the previous grid in the stream
// (the last GEMM): wait for it. Keep the order: the GEMM may launch only once the grids before this one
// completed (its B producer reads B without a wait of its own).
__device__ __forceinline__ void begin_conversion() {
  ptx::griddep_wait();
  ptx::griddep_launch_dependents();
}

// One unit of NVFP4 A (32 packed bytes and the row's four scales of the step) to its eight fp16 chunks, chunk q at
// slot q ^ (lane % 8) of `out`: chunk q = 2 s4 + b, word c holds K 16c + 8b + s4 (and + 4), scale folded in.
template <class G>
__device__ __forceinline__ void convert_nvfp4_unit(const G& gr, int row, int kc, int steps, uint4 (&out)[kChunksPerUnit],
                                                   int lane) {
  // 16-byte aligned: A's pointer is (the launcher checks it) and a row holds K / 2 bytes, K a multiple of 64
  const uint4* src = reinterpret_cast<const uint4*>(gr.a + (int64_t)row * (gr.k / 2) + kc * (kBlockK / 2));
  const uint32_t sf = *reinterpret_cast<const uint32_t*>(
      gr.sfa + ((int64_t)(row / 128) * steps + kc) * kSfBlockBytes + sf_row_offset(row));
  nvfp4_chunks(src[0], src[1], sf, [&](int q, uint4 v) { out[q ^ (lane % 8)] = v; });
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

// The rows of group g the GEMM reads (every row of tiles that hold rows; kernels/sm90/plan/row_schedule.h): where
// masked_m is given (the masked form) its count rounded up to the group's tile width, else all of them. Read
// after begin_conversion's wait, like the GEMM's.
__device__ __forceinline__ int read_rows(const int32_t* masked_m, int g, int width) {
  if (!masked_m) return INT32_MAX;
  const int m = __ldg(masked_m + g);
  return m <= 0 ? 0 : (int)round_up(m, width);
}

// The units of the launch, one per thread, grid-stride. P: MaskedParams<MAXG> or ConvertParams (the same field
// names). A thread loads its unit's 32 bytes (two 16-byte loads) and scale word and computes the unit's
// eight chunks; consecutive lanes take consecutive units (consecutive K steps of a row), so a warp's loads
// read up to 1 KB of a row at once. The chunks go through shared memory (chunk q of lane l at slot
// q ^ (l % 8): no bank conflicts either way), and each store instruction writes four units' 512
// contiguous bytes. On benchmark 1's A each thread storing its own unit's 128 bytes took 3.7x as long
// (each store instruction touching 32 lines), and eight threads per unit, one chunk each, 1.3x: a warp had
// 128 bytes of A in flight.
template <class P>
__device__ __forceinline__ void convert_units(const P& p) {
  __shared__ alignas(16) uint4 chunks[kConvertThreads / 32][32][kChunksPerUnit];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t stride = (int64_t)gridDim.x * kConvertThreads;
  int g = 0;
  // the whole warp runs each trip (it shares the stores); lanes past the last unit convert nothing
  for (int64_t first = (int64_t)blockIdx.x * kConvertThreads + warp * 32; first < p.num_units; first += stride) {
    const int u = (int)(first + lane);
    __half* dst = nullptr;
    if (u < p.num_units) {
      while (u >= p.groups[g].unit_end) ++g;
      const auto& gr = p.groups[g];
      const int local = u - (g ? p.groups[g - 1].unit_end : 0);
      const int steps = gr.k / kBlockK;
      const int row = local / steps, kc = local - row * steps;
      if (row < read_rows(p.masked_m, g, gr.width)) {
        dst = gr.a16 + (int64_t)row * p.a16_pitch + kc * kBlockK;
        if (gr.sfa) convert_nvfp4_unit(gr, row, kc, steps, chunks[warp][lane], lane);
        else permute_fp16_unit(gr, row, kc, p.a_bf16 != 0, chunks[warp][lane], lane);
      }
    }
    __syncwarp();
    const int q = lane % 8;
#pragma unroll
    for (int j = 0; j < 8; ++j) {  // store j: the warp's units 4j .. 4j + 3, lane l chunk l % 8
      const int from = 4 * j + lane / 8;
      const uint64_t d = __shfl_sync(0xFFFFFFFFu, reinterpret_cast<uint64_t>(dst), from);
      if (d) reinterpret_cast<uint4*>(d)[q] = chunks[warp][from][q ^ (from % 8)];
    }
    __syncwarp();  // the slots are rewritten next trip
  }
}

// Launches of more than kGroupsSmall groups, whose B maps it writes (they are not GEMM parameters).
template <int MAXG>
__global__ void __launch_bounds__(kConvertThreads) convert_a(const __grid_constant__ MaskedParams<MAXG> p) {
  static_assert(MAXG > kGroupsSmall, "up to kGroupsSmall groups: convert_a_small");
  begin_conversion();
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
  begin_conversion();
  convert_units(p);
}

}  // namespace fl::sm90
