// Host-side planning for the grouped GEMM kernels: tile sizes, tile counts, grid size, limits.
// Plain C++ with no CUDA types, so the CPU tests reach it (fastlaunch._C.plan) without a GPU.
#pragma once
#include <cstdint>

namespace fl {

// Shape limits checked before any launch (the unpacker reports them as ValueError).
constexpr int64_t kMaxExtent = (int64_t{1} << 31) - 1;  // M, N, K each fit int32 (TMA coordinates)
constexpr int64_t kKMultiple = 64;                      // K: four 16-element scale blocks per stage
constexpr int64_t kMaxTilesPerLaunch = (int64_t{1} << 31) - 1;

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

namespace sm90 {

constexpr int kBlockM = 256;   // most rows of A / C per tile (the widest tile); wgmma N (C^T = B A^T)
constexpr int kBlockN = 128;   // rows of B / columns of C per tile; 2 consumer warpgroups x 64
constexpr int kBlockK = 64;    // K per pipeline stage: one 512-byte scale block per 128 rows
constexpr int kMaxStages = 8;  // TMA stages (fp16 A tile, packed B tile, B scale block); fewer for wide tiles
constexpr int kMapRing = kMaxStages + 1;  // tensor-map slots per CTA: see sm90_group_gemm.cuh
constexpr int kWgmmaNStep = 16;        // tile widths are multiples of this (wgmma N)
constexpr int kThreads = 384;          // producer warpgroup + 2 consumer warpgroups
constexpr int kConvertThreads = 256;   // threads per CTA of the A conversion kernel
constexpr int kGroupsSmall = 16;       // kernel variant with a small parameter block
constexpr int kGroupsPerLaunch = 256;  // larger G is split into several launches

constexpr int64_t tiles_n(int64_t n) { return ceil_div(n, kBlockN); }

constexpr int64_t tiles_m(int64_t m, int64_t tile_m) { return ceil_div(m, tile_m); }
constexpr int64_t tiles(int64_t m, int64_t n, int64_t tile_m) { return tiles_m(m, tile_m) * tiles_n(n); }

// The A operand goes through a workspace: a conversion kernel writes each group's A as fp16 (scale
// folded in, K permuted inside each 64-wide step as the GEMM reads it), [m, k] row-major, groups
// kWorkspaceAlign bytes apart; the GEMM loads its tiles from there with TMA.
constexpr int64_t kWorkspaceAlign = 1024;

// Byte offset of each group's fp16 A in the workspace (offsets[g], g < groups) and the total size.
inline int64_t workspace_layout(const int64_t* m, const int64_t* k, int groups, int64_t* offsets) {
  int64_t total = 0;
  for (int g = 0; g < groups; ++g) {
    offsets[g] = total;
    total += round_up(m[g] * k[g] * 2, kWorkspaceAlign);
  }
  return total;
}

// Persistent grid: one CTA per SM (the kernel's shared memory allows no more), never more CTAs
// than tiles.
constexpr int grid_size(int64_t total_tiles, int sm_count) {
  return (int)(total_tiles < sm_count ? total_tiles : sm_count);
}

// Tile widths with a compiled kernel (wgmma N is fixed per kernel) and the cost model that picks one
// per launch. A K step of a tile costs about (kStepOverheadRows + W) row-units: the MMA grows with W,
// the B dequantisation, barriers and A conversion overhead do not.
constexpr int kWidths[] = {64, 128, 192, 256};
constexpr int kNumWidths = sizeof(kWidths) / sizeof(kWidths[0]);
constexpr int64_t kStepOverheadRows = 128;

// Estimated time of a launch with tile width W, in row-units: the work spread over the SMs, or the
// slowest single tile when there are fewer tiles than SMs.
inline double plan_cost(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count, int w) {
  double total = 0, longest = 0;
  int64_t tiles_all = 0;
  for (int g = 0; g < groups; ++g) {
    const double per_tile = (double)(k[g] / kBlockK) * (double)(kStepOverheadRows + w);
    const int64_t t = tiles(m[g], n[g], w);
    tiles_all += t;
    total += per_tile * (double)t;
    if (per_tile > longest) longest = per_tile;
  }
  const double spread = total / (double)(tiles_all < sm_count ? tiles_all : sm_count);
  return spread > longest ? spread : longest;
}

// The width (index into kWidths) with the lowest estimated cost; ties go to the wider tile.
inline int plan_width(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count) {
  int best = kNumWidths - 1;
  double best_cost = plan_cost(m, n, k, groups, sm_count, kWidths[best]);
  for (int i = kNumWidths - 2; i >= 0; --i) {
    const double c = plan_cost(m, n, k, groups, sm_count, kWidths[i]);
    if (c < best_cost * 0.999) best = i, best_cost = c;
  }
  return best;
}

}  // namespace sm90
}  // namespace fl
