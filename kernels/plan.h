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
constexpr int kBlockN = 128;   // B rows (C columns) per block of a tile (1 or 2 blocks); 2 warpgroups x 64
constexpr int kBlockK = 64;    // K per pipeline stage: one 512-byte scale block per 128 rows
constexpr int kMaxStages = 8;  // TMA stages (fp16 A tile, packed B tile, B scale block); fewer for wide tiles
constexpr int kMapRing = kMaxStages + 1;  // B tensor maps per CTA: see sm90_group_gemm.cuh
constexpr int kWgmmaNStep = 16;        // tile widths are multiples of this (wgmma N)
constexpr int kThreads = 384;          // producer warpgroup + 2 consumer warpgroups
constexpr int kConvertThreads = 256;   // threads per CTA of the A conversion kernel
constexpr int kGroupsSmall = 16;       // kernel variant with a small parameter block
constexpr int kGroupsPerLaunch = 256;  // larger G is split into several launches

constexpr int64_t tiles_n(int64_t n, int64_t tile_n) { return ceil_div(n, tile_n); }
constexpr int64_t tiles_m(int64_t m, int64_t tile_m) { return ceil_div(m, tile_m); }
constexpr int64_t tiles(int64_t m, int64_t n, int64_t tile_m, int64_t tile_n) {
  return tiles_m(m, tile_m) * tiles_n(n, tile_n);
}

// The A operand goes through a workspace: a conversion kernel writes each group's A as fp16 (scale
// folded in, K permuted inside each 64-wide step as the GEMM reads it). A launch's groups are
// stacked row after row with one row pitch, the launch's largest K, so one tensor map covers them
// all; launches (of up to kGroupsPerLaunch groups) are kWorkspaceAlign bytes apart.
constexpr int64_t kWorkspaceAlign = 1024;

// Bytes of one launch's fp16 A: `rows` (the sum of its groups' M, < 2^31) rows of `kmax` (< 2^31)
// elements; no overflow.
constexpr int64_t a16_launch_bytes(int64_t rows, int64_t kmax) { return round_up(rows * kmax * 2, kWorkspaceAlign); }

// Persistent grid: one CTA per SM (the kernel's shared memory allows no more), never more CTAs
// than tiles.
constexpr int grid_size(int64_t total_tiles, int sm_count) {
  return (int)(total_tiles < sm_count ? total_tiles : sm_count);
}

// Tile shapes with a compiled kernel: W A rows (wgmma N, fixed per kernel) x BM B rows, and the
// cost model that picks one per launch. step_cycles: cycles per 64-wide K step of one tile, fitted
// (rounded) to the H200 tile-shape sweep (tools/sweep_sm90.py; docs/sm90_kernel_notes.md, v9), with
// kTileCycles per tile for prologue and epilogue. With them the planner picks the fastest measured
// shape on all four benchmark shapes.
struct TileShape {
  int w, bm;
  double step_cycles;
};
constexpr TileShape kShapes[] = {{64, 128, 780}, {128, 128, 920}, {192, 128, 1500},
                                 {256, 128, 2080}, {64, 256, 950}, {128, 256, 1500}};
constexpr int kNumShapes = sizeof(kShapes) / sizeof(kShapes[0]);
constexpr double kTileCycles = 10000;
constexpr int kNarrowestShape = 0;  // kShapes[0] cuts a launch into the most tiles

// Estimated cycles of a launch with tile shape `sh`: the persistent grid takes tiles round-robin, so
// the busiest SM runs ceil(tiles / SMs) average tiles, and never less than the longest tile.
inline double plan_cost(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count, int sh) {
  const TileShape& s = kShapes[sh];
  double total = 0, longest = 0;
  int64_t count = 0;
  for (int g = 0; g < groups; ++g) {
    const double per_tile = (double)(k[g] / kBlockK) * s.step_cycles + kTileCycles;
    const int64_t t = tiles(m[g], n[g], s.w, s.bm);
    count += t;
    total += per_tile * (double)t;
    if (per_tile > longest) longest = per_tile;
  }
  const double rounds = (double)ceil_div(count, sm_count);
  const double spread = rounds * total / (double)count;
  return spread > longest ? spread : longest;
}

// The tile shape (index into kShapes) with the lowest estimated cost; ties go to the earlier shape.
inline int plan_shape(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count) {
  int best = 0;
  double best_cost = plan_cost(m, n, k, groups, sm_count, 0);
  for (int i = 1; i < kNumShapes; ++i) {
    const double c = plan_cost(m, n, k, groups, sm_count, i);
    if (c < best_cost * 0.999) best = i, best_cost = c;
  }
  return best;
}

}  // namespace sm90
}  // namespace fl
