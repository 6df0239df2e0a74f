// The reduce kernel of reduced tiles (plan.h share_reduce): the GEMM's CTA b = tile x parts + part stored
// its part's fp32 sums (sm90_share.cuh write_partial: per consumer warp, float4 j of lane l holds B rows
// r, r + 8 x A rows a, a + 1 of the tile, wgmma's accumulator layout); this kernel sums each tile's
// parts and stores C (fp16, any alignment: element by element, consecutive lanes on consecutive
// columns).
//
// Grid (tiles, kMaxWidth / 8, kConsumerWarps): CTA (t, j, cwarp) takes float4 j of consumer warp
// cwarp's 32 lanes of tile t; its warp w sums parts w, w + kReduceWarps, ... (512 contiguous bytes per
// part and warp), the warps' sums are added through shared memory, and warp 0 stores them. CTAs whose
// float4 j holds no valid A row (8 j >= the tile's rows, or j past its width) return at once.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "nvfp4.cuh"
#include "ptx/griddep.cuh"
#include "ptx/memorder.cuh"
#include "sm90_params.cuh"
#include "sm90_share.cuh"

namespace fl::sm90 {

constexpr int kReduceThreads = 256;
constexpr int kReduceWarps = kReduceThreads / 32;

template <int MAXG>
__global__ void __launch_bounds__(kReduceThreads) reduce_partials(const __grid_constant__ Params<MAXG> p) {
  __shared__ float4 sums[kReduceWarps][32];
  // The next grid in the stream (the next call's conversion) may start; it waits for this one.
  ptx::griddep_launch_dependents();
  const int t = blockIdx.x, j = blockIdx.y, cwarp = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const Tile tile = decode_tile<kBlockN>(p, t, 0);
  const Group& gr = p.groups[tile.g];
  const int rows = min(gr.width, gr.m - tile.m0);  // the tile's valid A rows
  if (8 * j >= rows) return;                       // also j >= width / 8 (rows <= width)
  const int tiles = p.groups[p.num_groups - 1].tile_end;
  const int parts = p.num_ctas / tiles;  // share_reduce: the same number for every tile
  const int at = partial_index(gr.width, cwarp, lane, j);  // write_partial's float4 j
  // the GEMM's partial sums: complete and visible once it has completed
  ptx::griddep_wait();
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
  for (int i = warp; i < parts; i += kReduceWarps) {
    const float4 v = ptx::ld_cg_v4(p.partials + (size_t)(t * parts + i) * (kPartialBytes / 4) + at);
    s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
  }
  sums[warp][lane] = s;
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int w = 1; w < kReduceWarps; ++w) {
    const float4 v = sums[w][lane];
    s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
  }
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
