// Host-side planning for the grouped GEMM kernels: tile sizes, tile counts, grid size, limits.
// Plain C++ with no CUDA types, so the CPU tests reach it (fastlaunch._C.plan) without a GPU.
#pragma once
#include <cstdint>

namespace fl {

// Shape limits checked before any launch (the unpacker reports them as ValueError).
constexpr int64_t kMaxExtent = (int64_t{1} << 31) - 1;  // M, N, K each fit int32 (TMA coordinates)
constexpr int64_t kKMultiple = 64;                      // K: four 16-element scale blocks per stage
constexpr int64_t kMaxTilesPerLaunch = int64_t{1} << 30;  // work items (tiles + split parts) stay int32

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

namespace sm90 {

constexpr int kBlockM = 256;   // most rows of A / C per tile (the widest tile); wgmma N (C^T = B A^T)
constexpr int kBlockN = 128;   // B rows (C columns) per block of a tile (1 or 2 blocks); 2 warpgroups x 64
constexpr int kBlockK = 64;    // K per pipeline stage: one 512-byte scale block per 128 rows
constexpr int kMaxStages = 8;  // TMA stages (fp16 A tile, packed B tile, B scale block); fewer for wide tiles
constexpr int kMapRing = kMaxStages + 1;  // tensor-map slots per CTA: see sm90_group_gemm.cuh
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
// cost model that picks one per launch. step_cycles: cycles per 64-wide K step of one tile, from the
// H200 (tools/ksweep_sm90.py --tile, v12: 64x128, 128x128, 64x256, 128x256 measured; 192x128 and
// 256x128 scaled from the v9 sweep), with kTileCycles per tile for its prologue and epilogue.
struct TileShape {
  int w, bm;
  double step_cycles;
};
constexpr TileShape kShapes[] = {{64, 128, 700}, {128, 128, 720}, {192, 128, 1170},
                                 {256, 128, 1620}, {64, 256, 1330}, {128, 256, 1480}};
constexpr int kNumShapes = sizeof(kShapes) / sizeof(kShapes[0]);
constexpr double kTileCycles = 2000;
constexpr int kNarrowestShape = 0;  // kShapes[0] cuts a launch into the most tiles

// Split-K of the last, partial round: with T tiles on P SMs, the first T - T % P tiles run whole
// (full rounds) and each of the T % P tail tiles is cut into S parts along K, so the tail takes
// ceil(tail * S / P) rounds of 1/S of a tile instead of one round of whole tiles (benchmark 1: 352
// tiles on 132 SMs: 2 whole rounds + 88 tiles in thirds = 2.67 tile times instead of 3). Each part
// writes its fp32 partial tile to the workspace; the last part to finish (a counter per tail tile)
// adds them in part order (the same sum whichever finishes last) and stores C.
constexpr int kMaxSplit = 4;
constexpr double kPartialBytesPerCycle = 48;  // one SM writing or reading a partial tile through L2
constexpr double kSplitCycles = 2000;         // per part: the counter atomic, fences and barriers

struct Plan {
  int shape = 0;        // index into kShapes
  int split = 1;        // parts per tail tile (1: no split)
  int64_t tiles = 0;    // all tiles of the launch
  int64_t tail = 0;     // tiles cut into `split` parts (the last ones), 0 when split == 1
  double cost = 0;      // estimated cycles
};

// Estimated cycles of a launch with tile shape `sh` and tail split S: the persistent grid takes work
// round-robin, so the busiest SM runs the full rounds of average tiles and then ceil(tail * S / P)
// parts, each 1/S of an average tile plus moving S partial tiles; never less than the longest tile.
inline Plan plan_cost(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count, int sh,
                      int split) {
  const TileShape& s = kShapes[sh];
  double total = 0, longest = 0;
  int64_t count = 0, min_steps = INT64_MAX;
  for (int g = 0; g < groups; ++g) {
    const int64_t steps = k[g] / kBlockK;
    const double per_tile = (double)steps * s.step_cycles + kTileCycles;
    const int64_t t = tiles(m[g], n[g], s.w, s.bm);
    count += t;
    total += per_tile * (double)t;
    if (per_tile > longest) longest = per_tile;
    if (steps < min_steps) min_steps = steps;
  }
  Plan p;
  p.shape = sh;
  p.tiles = count;
  const double avg = total / (double)count;
  const int64_t full = count / sm_count, tail = count % sm_count;
  if (split > 1 && (tail == 0 || split > min_steps)) split = 1;  // nothing to split, or parts of no K step
  double cost;
  if (split == 1) {
    cost = (double)ceil_div(count, sm_count) * avg;
  } else {
    const double partial = (double)s.w * s.bm * 4 / kPartialBytesPerCycle;
    cost = (double)full * avg + (double)ceil_div(tail * split, sm_count) * (avg / split + split * partial + kSplitCycles);
    p.tail = tail;
  }
  p.split = split;
  p.cost = cost > longest / split ? cost : longest / split;
  return p;
}

// The tile shape and tail split with the lowest estimated cost; ties go to the earlier shape and
// the smaller split. `force_shape` / `force_split` (>= 0 / >= 1) fix one of them (experiments).
inline Plan plan_launch(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count,
                        int force_shape = -1, int force_split = 0) {
  Plan best;
  best.cost = -1;
  for (int i = 0; i < kNumShapes; ++i) {
    if (force_shape >= 0 && i != force_shape) continue;
    for (int s = 1; s <= kMaxSplit; ++s) {
      if (force_split >= 1 && s != force_split) continue;
      const Plan c = plan_cost(m, n, k, groups, sm_count, i, s);
      if (best.cost < 0 || c.cost < best.cost * 0.999) best = c;
    }
  }
  return best;
}

// Workspace bytes of one launch beyond its fp16 A: a counter per tail tile, then the partial tiles.
constexpr int64_t split_bytes(const Plan& p) {
  return p.split > 1 ? round_up(p.tail * 4, kWorkspaceAlign) +
                           round_up(p.tail * p.split * kShapes[p.shape].w * kShapes[p.shape].bm * 4, kWorkspaceAlign)
                     : 0;
}

}  // namespace sm90
}  // namespace fl
