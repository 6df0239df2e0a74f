// The reduce kernel of reduced tiles (plan.h share_reduce): the GEMM's CTA b = tile x parts + part stored
// its part's fp32 sums (sm90_share.cuh write_partial: per consumer warp, float4 j of lane l holds B rows
// r, r + 8 x A rows a, a + 1 of the tile, wgmma's accumulator layout); this kernel sums each tile's
// parts and stores C (fp16, any alignment: element by element, consecutive lanes on consecutive
// columns).
//
// Grid (tiles, kConsumerWarps, kJChunks): CTA (t, cwarp, z) sums consumer warp cwarp's partial sums of
// tile t for the float4s j = 8 z .. 8 z + 7 that hold valid A rows (8 j < the tile's rows; CTAs with
// none return at once). Each such float4's parts are shared out among `ways` of the CTA's 32 warps
// (parts i = slice, slice + ways, ...; one 512-byte load per part and warp), added through shared
// memory, and the first warp of each float4 stores its C elements. Few CTAs with many loads in flight
// each: a CTA per float4 and consumer warp (the first form) took ~8 us on 26 wide tiles of 5 parts
// (~5000 CTAs of one load per warp).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "nvfp4.cuh"
#include "ptx/griddep.cuh"
#include "ptx/memorder.cuh"
#include "sm90_params.cuh"
#include "sm90_share.cuh"

namespace fl::sm90 {

constexpr int kReduceThreads = 1024;
constexpr int kReduceWarps = kReduceThreads / 32;
constexpr int kJPerChunk = 8;                                        // float4s per CTA
constexpr int kJChunks = (kMaxWidth / 8 + kJPerChunk - 1) / kJPerChunk;  // CTAs per tile and consumer warp

template <int MAXG>
__global__ void __launch_bounds__(kReduceThreads) reduce_partials(const __grid_constant__ Params<MAXG> p) {
  __shared__ float4 sums[kReduceWarps][32];
  // The next grid in the stream (the next call's conversion) may start; it waits for this one.
  ptx::griddep_launch_dependents();
  const int t = blockIdx.x, cwarp = blockIdx.y, z = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const Tile tile = decode_tile<kBlockN>(p, t, 0);
  const Group& gr = p.groups[tile.g];
  const int rows = min(gr.width, gr.m - tile.m0);         // the tile's valid A rows
  const int jc = min(kJPerChunk, (rows + 7) / 8 - kJPerChunk * z);  // valid float4s of this CTA (<= width / 8)
  if (jc <= 0) return;
  const int tiles = p.groups[p.num_groups - 1].tile_end;
  const int parts = p.num_ctas / tiles;  // share_reduce: the same number for every tile
  const int ways = max(1, min(kReduceWarps / jc, parts));  // warps per float4 (CTA-uniform)
  const int slice = warp % ways, jl = warp / ways;
  const bool active = jl < jc;
  const int j = kJPerChunk * z + jl;
  const float* src = p.partials + (size_t)t * parts * (kPartialBytes / 4) +
                     (active ? partial_index(gr.width, cwarp, lane, j) : 0);
  // the GEMM's partial sums: complete and visible once it has completed
  ptx::griddep_wait();
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
  if (active) {
#pragma unroll 4
    for (int i = slice; i < parts; i += ways) {
      const float4 v = ptx::ld_cg_v4(src + (size_t)i * (kPartialBytes / 4));
      s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
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
