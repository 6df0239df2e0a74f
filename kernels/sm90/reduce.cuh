// The reduce kernel of reduced tiles (kernels/sm90/plan/planner.h share_reduce): the GEMM's CTAs of each tile's parts stored
// its part's fp32 sums (kernels/sm90/stream_k.cuh write_partial: per consumer warp, float4 j of lane l holds B rows
// r, r + 8 x A rows a, a + 1 of the tile, wgmma's accumulator layout); this kernel sums each tile's
// parts and stores C (fp16, any alignment: element by element, consecutive lanes on consecutive
// columns).
//
// Grid (tiles, kConsumerWarps, chunks: kernels/sm90/plan/planner.h reduce_chunks): CTA (t, cwarp, z) sums consumer warp
// cwarp's partial sums of tile t for `per` float4s j = per z .. per z + per - 1 (those that hold valid
// A rows: 8 j < the tile's rows; CTAs with none return at once), each float4's parts shared out among
// kReduceWarps / per warps (parts i = slice, slice + ways, ...; 512 bytes per part and warp, four
// loads in flight), added through shared memory; the first warp of each float4 stores its C elements.
// The grid is sized for one round of CTAs: a CTA per float4 and consumer warp (the first form) took
// ~8 us on 26 wide tiles of 5 parts (~5000 CTAs). The launch bounds (5 CTAs per SM, 51 registers) leave
// room for the four loads: at full occupancy (32 registers) ptxas added each load's sums before issuing
// the next, and at 6 CTAs per SM (42) before issuing the fourth.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "common/nvfp4.cuh"
#include "ptx/griddep.cuh"
#include "ptx/memorder.cuh"
#include "sm90/params.cuh"
#include "sm90/stream_k.cuh"

namespace fl::sm90 {

constexpr int kReduceThreads = 32 * kReduceWarps;
static_assert(kTileConsumerWarps == (int)kConsumerWarps, "kernels/sm90/plan/planner.h's count of consumer warps");

// The launch's most float4s (8 A rows each) of valid rows in one tile: the launcher sizes the grid's
// chunks by it (kernels/sm90/plan/planner.h reduce_chunks) and the kernel reads its float4s per CTA back from it.
template <int MAXG>
__host__ __device__ __forceinline__ int most_valid_float4s(const Params<MAXG>& p) {
  int jv = 1;
  for (int g = 0; g < p.num_groups; ++g) jv = max(jv, (min(p.groups[g].width, p.groups[g].m) + 7) / 8);
  return jv;
}

template <int MAXG>
__global__ void __launch_bounds__(kReduceThreads, kReduceCtasPerSm)
    reduce_partials(const __grid_constant__ Params<MAXG> p) {
  __shared__ float4 sums[kReduceWarps][32];
  // The next grid in the stream (the next call's conversion) may start; it waits for this one.
  ptx::griddep_launch_dependents();
  const int t = blockIdx.x, cwarp = blockIdx.y, z = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int jv = most_valid_float4s(p);
  const int per = (jv + (int)gridDim.z - 1) / (int)gridDim.z;  // float4s per CTA (<= kReduceWarps)
  const int ways = kReduceWarps / per;                          // warps per float4
  const Tile tile = decode_tile<kBlockN>(p, t, 0, p.tile_end, p.wave_tiles != 0);
  const Group& gr = p.groups[tile.g];
  const int rows = min(gr.width, gr.m - tile.m0);  // the tile's valid A rows
  if (8 * per * z >= rows) return;
  // tile t's parts: consecutive CTAs, the same number for every tile of a group (share_reduce: tiles
  // with fewer K steps than the launch's parts per tile take one part per step)
  const int tile0 = tile.g ? p.tile_end[tile.g - 1] : 0;
  const int next0 = tile.g + 1 < p.num_groups ? p.groups[tile.g + 1].cta0 : p.num_ctas;
  const int parts = (next0 - gr.cta0) / (p.tile_end[tile.g] - tile0);
  const int first = gr.cta0 + (t - tile0) * parts;
  const int slice = warp % ways, jl = warp / ways;
  const int j = per * z + jl;
  const bool active = jl < per && 8 * j < rows;
  const float* src = p.partials + (size_t)first * (kPartialBytes / 4) +
                     (active ? partial_index(gr.width, cwarp, lane, j) : 0);
  // the GEMM's partial sums: complete and visible once it has completed
  ptx::griddep_wait();
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
  if (active) {
    // the warp's parts four at a time, all of a round's loads in flight at once (loads past the last
    // part are not issued: clamped repeats of it cost narrow tiles' two loads per warp +0.8 us)
    for (int i0 = slice; i0 < parts; i0 += 4 * ways) {
      const float* q0 = src + (size_t)i0 * (kPartialBytes / 4);
      const size_t step = (size_t)ways * (kPartialBytes / 4);
      float4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = make_float4(0.f, 0.f, 0.f, 0.f);
      ptx::ld_cg_v4_upto4(q0, q0 + step, q0 + 2 * step, q0 + 3 * step, (parts - i0 + ways - 1) / ways, v);
#pragma unroll
      for (int u = 0; u < 4; ++u) s.x += v[u].x, s.y += v[u].y, s.z += v[u].z, s.w += v[u].w;
    }
  }
  if (ways > 1) {
    sums[warp][lane] = s;
    __syncthreads();
    if (!active || slice != 0) return;
#pragma unroll 4
    for (int w = warp + 1; w < warp + ways; ++w) {
      const float4 v = sums[w][lane];
      s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
    }
  }
  if (!active) return;
  // wgmma's accumulator layout (consumer warp cwarp = 4 cw + wq, lane l): B rows 64 cw + 16 wq + l / 4
  // and 8 more, A rows 8 j + 2 (l % 4) and the next
  const int r = 64 * (cwarp / 4) + 16 * (cwarp % 4) + lane / 4;
  const int a = 8 * j + 2 * (lane % 4);
  const float v[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int ai = a + (e % 2), ri = r + 8 * (e / 2);
    if (ai < rows && tile.n0 + ri < gr.n)
      gr.c[(int64_t)(tile.m0 + ai) * gr.n + tile.n0 + ri] = __float2half_rn(v[e] * kNvfp4Unscale);
  }
}

}  // namespace fl::sm90
