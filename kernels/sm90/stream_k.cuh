// How a CTA of the sm_90a GEMM walks its share of the launch (kernels/sm90/plan/planner.h, stream-K: one unit per tile it
// touches, from its last tile backwards) and hands the partial sums of a split tile to the CTA that
// finishes it (kernels/sm90/gemm.cuh, top comment).
#pragma once
#include <cstdint>

#include "sm90/plan/planner.h"
#include "sm90/plan/row_schedule.h"
#include "ptx/memorder.cuh"
#include "sm90/params.cuh"

namespace fl::sm90 {

struct Tile {
  int g;       // group (index into Params::groups)
  int m0, n0;  // first A row, first B row
  int kstages;
};

// Tile t (BN B rows: kBlockN, or kHalfBlockN for half tiles). NFAST false (the stream-K shares of a plan): the M
// chunks of one B block are adjacent inside a group, so a CTA's run of tiles reads each B block once; NFAST (a wave
// plan, Params::wave_tiles, and every schedule of the masked form, kernels/sm90/plan/row_schedule.h) the B blocks of
// one M chunk are, so the CTAs running at one time read one band of A chunks (kernels/sm90/plan/planner.h
// share_wave). `g` is a hint (the group of a nearby, earlier tile). `tile_end`: the groups' tile ends
// (Params::tile_end, or in the masked form those of the tiles that hold rows this call).
template <int BN, int MAXG>
__device__ __forceinline__ Tile decode_tile(const Params<MAXG>& p, int t, int g, const int32_t* tile_end, bool nfast) {
  while (g > 0 && t < tile_end[g - 1]) --g;
  while (t >= tile_end[g]) ++g;
  const Group& gr = p.groups[g];
  const int local = t - (g ? tile_end[g - 1] : 0);
  Tile tile;
  tile.g = g;
  if (nfast) {
    const int tn = (gr.n + BN - 1) / BN;
    tile.m0 = (local / tn) * gr.width;
    tile.n0 = (local % tn) * BN;
  } else {
    tile.m0 = (local % gr.chunks) * gr.width;
    tile.n0 = (local / gr.chunks) * BN;
  }
  tile.kstages = gr.k / kBlockK;
  return tile;
}

// A CTA's work on one tile: its K steps k0 .. k1 - 1.
struct Unit {
  Tile tile;
  int t, k0, k1;
  __device__ bool ends_tile() const { return k1 == tile.kstages; }
};

// The masked form's schedule (kernels/sm90/plan/row_schedule.h): the groups' tile ends of the tiles that hold rows this
// call, and the schedule made of their count, in shared memory (kernels/sm90/gemm.cuh writes them before any Share is
// made): the tile ends, and this CTA's part of the schedule (RowCta), at addresses known when compiling.
__device__ __forceinline__ int32_t* row_tile_ends();
__device__ __forceinline__ RowCta* row_cta_smem();

// CTA b's share: in a stream-K plan (Params::start_tile/start_k) one unit per tile, taken from the last tile
// backwards; in a wave plan (Params::wave_tiles) tiles b, b + num_ctas, ... whole, in that order (the grid and
// the wave flag read from the parameters where used). ROWS: the masked form, whose shares come from its schedule
// of the tiles that hold rows this call (row_cta_smem(): wave or split, the split runs taken like stream-K shares).
// WAVE: the kernel runs wave walks (the main build's; the narrow build's K loops have no register to spare for
// the walk).
template <bool ROWS = false, bool WAVE = true>
struct Share {
  int first_t, first_k;  // the share's first step (a wave plan: its first tile, and 0)
  int count, end_k;      // its units, and where its steps end in its last tile (0: at the tile's end)
  int stride = 0;        // wave walks: the grid (tile after tile, so many apart); 0: stream-K (backwards)
  int g = 0;             // decode hint
  template <int MAXG>
  __device__ Share(const Params<MAXG>& p, int b) {
    if constexpr (ROWS) {
      const RowCta& c = *row_cta_smem();
      first_t = c.share.first_t, first_k = c.share.first_k, count = c.share.count, end_k = c.share.end_k;
      if (WAVE) stride = c.stride;
    } else if (WAVE && p.wave_tiles) {
      first_t = b, first_k = 0, end_k = 0;
      count = b < p.wave_tiles ? (p.wave_tiles - 1 - b) / p.num_ctas + 1 : 0;
      stride = p.num_ctas;
    } else {
      first_t = p.start_tile[b], first_k = p.start_k[b], end_k = p.start_k[b + 1];
      count = (end_k > 0 ? p.start_tile[b + 1] : p.start_tile[b + 1] - 1) - first_t + 1;
    }
  }
  __device__ int units() const { return count; }
  template <int BN = kBlockN, int MAXG>
  __device__ Unit unit(const Params<MAXG>& p, int u) {
    Unit w;
    const bool wave = WAVE && stride != 0;
    w.t = wave ? first_t + u * stride : first_t + count - 1 - u;
    w.tile = decode_tile<BN>(p, w.t, g, ROWS ? row_tile_ends() : p.tile_end, ROWS || wave);
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

// Partial sums move in two halves of kPiece float4 per thread (W / 16 A rows each): a half with no valid
// row is neither written nor read (finer, per-float4 conditions made ptxas rematerialise values inside
// the K loops).
template <int W>
constexpr int kPiece = W / 16;

// The float index of float4 j of consumer warp cwarp's lane `lane` in a CTA's slot, for tiles `w` A rows
// wide (also read by the reduce kernel of reduced tiles, kernels/sm90/reduce.cuh, with the group's width).
__device__ __forceinline__ int partial_index(int w, int cwarp, int lane, int j) {
  return ((cwarp * (w / 8) + j) * 32 + lane) * 4;
}

template <int W>
__device__ __forceinline__ float* partial_of(float* slot, int cwarp, int lane) {
  return slot + partial_index(W, cwarp, lane, 0);
}

// A consumer warp's sums of a tile it does not finish, for the CTA that does: float4 j holds A rows
// 8j .. 8j + 7 of the tile (wgmma's accumulator layout: N = A rows), so a half (kPiece) past the tile's
// `rows` valid rows is not written: narrow groups' tiles move half. Its flag is raised later
// (raise_flag): the stores drain while the warp goes on.
template <int W>
__device__ __forceinline__ void write_partial(const float (&acc)[W / 2], float* slot, int rows, int cwarp, int lane) {
  float* dst = partial_of<W>(slot, cwarp, lane);
#pragma unroll
  for (int j0 = 0; j0 < W / 8; j0 += kPiece<W>)
    if (8 * j0 < rows) {
#pragma unroll
      for (int j = j0; j < j0 + kPiece<W>; ++j)
        ptx::st_cg_v4(dst + j * 128, acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
    }
}

// The flags' raised value: a 64-bit mix of the flags' address, never 0, which no other data left in a reused workspace
// holds but by a 2^-64 chance. Every flag raised is put back to 0 by the launch that raised it (its one waiter), so
// a later launch on the same workspace (a graph replayed, the caching allocator handing the same block back) starts
// from flags that do not read as raised; no launch zeroes them first.
__device__ __forceinline__ uint64_t flag_epoch(const uint64_t* flags) {
  uint64_t x = reinterpret_cast<uintptr_t>(flags) * 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x ? x : 1;
}

// The partial-sum flags: one per CTA (up to kMaxCtas) and consumer warp.
constexpr int64_t kFlagWords = int64_t{kMaxCtas} * kConsumerWarps;

// Raises a consumer warp's flag once its partial sums are written (a release: lane 0's store waits
// for the warp's stores before it, ordered by the __syncwarp), to flag_epoch; the one CTA that waits for it puts it
// back to 0 (add_partials).
__device__ __forceinline__ void raise_flag(uint64_t*& pending, uint64_t epoch, int lane) {
  if (pending) {
    __syncwarp();
    if (lane == 0) ptx::st_release_gpu(pending, epoch);
    pending = nullptr;
  }
}

// Adds to a consumer warp's sums of tile t (CTA b holds its last step; `rows` valid A rows) those of
// the CTAs of lower index that hold its other steps: b - 1 down to b - n. The warp's lanes wait for
// their flags at once (lane i for CTA b - 1 - i), then it reads the halves they wrote (write_partial).
// ROWS: the masked form's schedule counted them (RowCta::before), else the plan's arrays give the shares' starts.
template <int W, bool ROWS, int MAXG>
__device__ __forceinline__ void add_partials(const Params<MAXG>& p, float (&acc)[W / 2], int b, int t, int rows,
                                             int cwarp, int lane) {
  int n = 0;  // CTA b - 1 - n ends inside tile t: its start's successor does
  if constexpr (ROWS) {
    n = row_cta_smem()->before;  // (only b's first tile is finished with others' sums)
  } else {
    while (n < b && p.start_tile[b - n] == t && p.start_k[b - n] > 0) ++n;
  }
  for (int i0 = 0; i0 < n; i0 += 32) {
    const int i = i0 + lane;
    uint64_t* flag = p.flags + (b - 1 - i) * kConsumerWarps + cwarp;
    bool ready = i >= n;
    while (!__all_sync(0xffffffffu, ready))
      if (!ready) ready = ptx::ld_acquire_gpu(flag) == flag_epoch(p.flags);
    if (i < n) ptx::st_u64(flag, 0);  // its one waiter: back to 0 for later launches (read after this grid)
  }
  __syncwarp();  // orders each lane's acquire before every lane's loads below
  static_assert(W % 16 == 0, "whole halves");
  for (int c = b - 1; c >= b - n; --c) {
    const float* src = partial_of<W>(p.partials + (size_t)c * (kPartialBytes / 4), cwarp, lane);
#pragma unroll
    for (int j0 = 0; j0 < W / 8; j0 += kPiece<W>) {
      if (8 * j0 < rows) {  // the halves write_partial wrote: a half's loads in flight, then its adds
        float4 v[kPiece<W>];
#pragma unroll
        for (int j = 0; j < kPiece<W>; ++j) v[j] = ptx::ld_cg_v4(src + (j0 + j) * 128);
#pragma unroll
        for (int j = 0; j < kPiece<W>; ++j) {
          const int e = 4 * (j0 + j);
          acc[e] += v[j].x, acc[e + 1] += v[j].y, acc[e + 2] += v[j].z, acc[e + 3] += v[j].w;
        }
      }
    }
  }
}

}  // namespace fl::sm90
