// How a CTA of the sm_90a GEMM walks its share of the launch (plan.h, stream-K: one unit per tile it
// touches, from its last tile backwards) and hands the partial sums of a split tile to the CTA that
// finishes it (sm90_group_gemm.cuh, top comment).
#pragma once
#include <cstdint>

#include "plan.h"
#include "ptx/memorder.cuh"
#include "sm90_params.cuh"

namespace fl::sm90 {

struct Tile {
  int g;       // group (index into Params::groups)
  int m0, n0;  // first A row, first B row
  int kstages;
};

// Tile t (BN B rows: kBlockN, or kHalfBlockN for half tiles). Inside a group the M chunks of one
// B block are adjacent, so CTAs running at the same time share B tiles in L2. `g` is a hint (the group
// of a nearby tile).
template <int BN, int MAXG>
__device__ __forceinline__ Tile decode_tile(const Params<MAXG>& p, int t, int g) {
  while (g > 0 && t < p.groups[g - 1].tile_end) --g;
  while (t >= p.groups[g].tile_end) ++g;
  const Group& gr = p.groups[g];
  const int local = t - (g ? p.groups[g - 1].tile_end : 0);
  Tile tile;
  tile.g = g;
  tile.m0 = (local % gr.chunks) * gr.width;
  tile.n0 = (local / gr.chunks) * BN;
  tile.kstages = gr.k / kBlockK;
  return tile;
}

// A CTA's work on one tile: its K steps k0 .. k1 - 1.
struct Unit {
  Tile tile;
  int t, k0, k1;
  __device__ bool ends_tile() const { return k1 == tile.kstages; }
};

// CTA b's share (Params::start_tile/start_k), one unit per tile, taken from the last tile backwards.
struct Share {
  int first_t, first_k;  // the share's first step
  int last_t, end_k;     // its last tile, and where its steps end in it (0: at the tile's end)
  int g = 0;             // decode hint
  template <int MAXG>
  __device__ Share(const Params<MAXG>& p, int b)
      : first_t(p.start_tile[b]), first_k(p.start_k[b]),
        last_t(p.start_k[b + 1] > 0 ? p.start_tile[b + 1] : p.start_tile[b + 1] - 1), end_k(p.start_k[b + 1]) {}
  __device__ int units() const { return last_t - first_t + 1; }
  template <int BN = kBlockN, int MAXG>
  __device__ Unit unit(const Params<MAXG>& p, int u) {
    Unit w;
    w.t = last_t - u;
    w.tile = decode_tile<BN>(p, w.t, g);
    g = w.tile.g;
    w.k1 = u == 0 && end_k > 0 ? end_k : w.tile.kstages;
    w.k0 = w.t == first_t ? first_k : 0;
    return w;
  }
};

// Barrier arrival counts: one arrival per consumer warp (lane 0 after __syncwarp).
constexpr uint32_t kConsumerWarps = 8;

// Partial sums of a split tile: per consumer warp, its threads' W / 2 accumulators as W / 8 float4
// per thread, thread-major (float4 j of lane l at (j * 32 + l) * 16 bytes), so every access of a
// warp is 512 contiguous bytes and reader and writer threads hold the same fragments.
constexpr uint32_t kPartialBytes = kConsumerWarps * 32 * (kMaxWidth / 2) * 4;

template <int W>
__device__ __forceinline__ float* partial_of(float* slot, int cwarp, int lane) {
  return slot + (cwarp * (W / 8) * 32 + lane) * 4;
}

// A consumer warp's sums of a tile it does not finish, for the CTA that does. Its flag is raised
// later (raise_flag): the stores drain while the warp goes on.
template <int W>
__device__ __forceinline__ void write_partial(const float (&acc)[W / 2], float* slot, int cwarp, int lane) {
  float* dst = partial_of<W>(slot, cwarp, lane);
#pragma unroll
  for (int j = 0; j < W / 8; ++j) ptx::st_cg_v4(dst + j * 128, acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
}

// Raises a consumer warp's flag once its partial sums are written (a release: lane 0's store waits
// for the warp's stores before it, ordered by the __syncwarp).
__device__ __forceinline__ void raise_flag(int32_t*& pending, int lane) {
  if (pending) {
    __syncwarp();
    if (lane == 0) ptx::st_release_gpu(pending, 1);
    pending = nullptr;
  }
}

// Adds to a consumer warp's sums of tile t (CTA b holds its last step) those of the CTAs of lower
// index that hold its other steps, waiting for each one's flag.
template <int W, int MAXG>
__device__ __forceinline__ void add_partials(const Params<MAXG>& p, float (&acc)[W / 2], int b, int t, int cwarp,
                                             int lane) {
  for (int c = b - 1; c >= 0 && p.start_tile[c + 1] == t && p.start_k[c + 1] > 0; --c) {
    const int32_t* flag = p.flags + c * kConsumerWarps + cwarp;
    while (ptx::ld_acquire_gpu(flag) == 0) {
    }
    const float* src = partial_of<W>(p.partials + (size_t)c * (kPartialBytes / 4), cwarp, lane);
    constexpr int kBatch = W / 16;  // float4 loads in flight before their adds: two batches
    static_assert(W % 16 == 0, "whole batches");
#pragma unroll
    for (int j0 = 0; j0 < W / 8; j0 += kBatch) {
      float4 v[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) v[j] = ptx::ld_cg_v4(src + (j0 + j) * 128);
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int e = 4 * (j0 + j);
        acc[e] += v[j].x, acc[e + 1] += v[j].y, acc[e + 2] += v[j].z, acc[e + 3] += v[j].w;
      }
    }
  }
}

}  // namespace fl::sm90
