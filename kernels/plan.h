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

// Tiles: `width` A rows (wgmma N, C^T = B A^T) x kBlockN B rows. The width is chosen per group
// from kWidths (one compiled main loop each, one TMA box each); a group wider than the widest is cut
// into `chunks` tiles of equal width along M. Below 128 rows a K step costs about the same at any
// width (B's dequantisation bounds it); a fourth main loop in the kernel made ptxas serialise the
// wgmma (C7512); a 192-wide A stage leaves room for 7 stages, not 8, which cost ~10% per K step on
// every shape (docs/sm90_kernel_notes.md, v15). So two widths.
constexpr int kWidths[] = {128, 160};
constexpr int kNumWidths = sizeof(kWidths) / sizeof(kWidths[0]);
constexpr int kMaxWidth = kWidths[kNumWidths - 1];  // the A stage is sized for it
constexpr int kBlockN = 128;    // B rows (C columns) per tile: 2 consumer warpgroups x 64
constexpr int kBlockK = 64;     // K per pipeline stage: one 512-byte scale block per 128 rows
constexpr int kMaxStages = 8;   // TMA stages (fp16 A tile, packed B tile, B scale block)
constexpr int kMapRing = kMaxStages + 1;  // B tensor maps per CTA: see sm90_group_gemm.cuh
constexpr int kWgmmaNStep = 16;        // wgmma N granularity (the generated wgmma table)
constexpr int kThreads = 384;          // producer warpgroup + 2 consumer warpgroups
constexpr int kConvertThreads = 256;   // threads per CTA of the A conversion kernel
constexpr int kGroupsSmall = 16;       // kernel variant with a small parameter block
constexpr int kGroupsPerLaunch = 256;  // larger G is split into several launches
constexpr bool widths_ok() {
  for (int i = 0; i < kNumWidths; ++i)
    if (kWidths[i] % kWgmmaNStep || (i && kWidths[i] <= kWidths[i - 1])) return false;
  return true;
}
static_assert(widths_ok(), "widths: increasing multiples of wgmma N's step (and so of the 8-row swizzle atom)");

constexpr int64_t tiles_n(int64_t n) { return ceil_div(n, kBlockN); }

// The A operand goes through a workspace: a conversion kernel writes each group's A as fp16 (scale
// folded in, K permuted inside each 64-wide step as the GEMM reads it). A launch's groups are
// stacked row after row with one row pitch, the launch's largest K, so one tensor map covers them
// all; launches (of up to kGroupsPerLaunch groups) are kWorkspaceAlign bytes apart.
constexpr int64_t kWorkspaceAlign = 1024;

// Bytes of one launch's fp16 A: `rows` (the sum of its groups' M, < 2^31) rows of `kmax` (< 2^31)
// elements; no overflow.
constexpr int64_t a16_launch_bytes(int64_t rows, int64_t kmax) { return round_up(rows * kmax * 2, kWorkspaceAlign); }

// Cost model (ns on the H200) of one 64-wide K step of a tile `w` A rows wide: B's dequantisation
// bounds a step below ~128 rows (390 ns at W = 64, 400 at W = 128: tools/ksweep_sm90.py --tile,
// docs/sm90_kernel_notes.md), the MMA above (2.77 ns per A row at the measured fp16 rate, plus issue).
constexpr double kStepNsDequant = 390;
constexpr double kStepNsPerRow = 2.9;
constexpr double kStepNsMma = 30;
constexpr double kTileNs = 1000;  // per tile: the epilogue, and the pipeline's turn to the next tile
constexpr double step_ns(int w) {
  return kStepNsPerRow * w + kStepNsMma > kStepNsDequant ? kStepNsPerRow * w + kStepNsMma : kStepNsDequant;
}

// One group's tiles: `chunks` tiles of `width` A rows along M, tiles_n(n) along N, each estimated
// at `tile_ns`.
struct GroupTiles {
  int width;
  int64_t chunks, tiles_n;
  double tile_ns;
};

// The narrowest compiled width of at least `rows` (rows <= kMaxWidth).
constexpr int fit_width(int64_t rows) {
  for (int i = 0; i < kNumWidths; ++i)
    if (kWidths[i] >= rows) return kWidths[i];
  return kMaxWidth;
}

// The widest tiles of at most `cap` rows (a compiled width) that cut M evenly.
inline GroupTiles group_tiles(int64_t m, int64_t n, int64_t k, int cap) {
  const int64_t c = ceil_div(m, cap);
  const int w = fit_width(ceil_div(m, c));
  return {w, c, tiles_n(n), (double)(k / kBlockK) * step_ns(w) + kTileNs};
}

// The most tiles a group can be planned into (all tiles of the narrowest width): the limits are
// checked on it.
constexpr int64_t max_tiles(int64_t m, int64_t n) { return ceil_div(m, kWidths[0]) * tiles_n(n); }

// A launch's plan: every group's tiles, and the order the kernel takes them in: groups by tile
// cost, costliest first (the kernel's CTAs take tiles in this order, each its next tile when it
// is done with the last: longest-processing-time-first list scheduling).
struct LaunchPlan {
  int groups = 0;
  int64_t tiles = 0;
  double est_ns = 0;       // estimated time of the busiest CTA
  int order[kGroupsPerLaunch];        // launch order -> group index (launch-local)
  GroupTiles group[kGroupsPerLaunch];  // by group index
};

// Up to this many tiles the planner simulates the schedule; beyond, every CTA runs many tiles and
// total / CTAs + the longest tile bounds it.
constexpr int64_t kSimTiles = 2048;

// Estimated time of the busiest CTA when `ctas` CTAs take the plan's tiles in order, each the next
// one when it is free (the first `ctas` tiles go one to each CTA).
inline double schedule_ns(const LaunchPlan& p, int64_t ctas) {
  if (p.tiles > kSimTiles) {
    double total = 0, longest = 0;
    for (int i = 0; i < p.groups; ++i) {
      const GroupTiles& g = p.group[i];
      total += g.tile_ns * (double)(g.chunks * g.tiles_n);
      if (g.tile_ns > longest) longest = g.tile_ns;
    }
    return total / (double)ctas + longest;
  }
  double load[kSimTiles];  // a min-heap of the CTAs' busy-until times
  const int n = (int)ctas;
  for (int i = 0; i < n; ++i) load[i] = 0;
  double busiest = 0;
  for (int i = 0; i < p.groups; ++i) {
    const GroupTiles& g = p.group[p.order[i]];
    for (int64_t t = 0; t < g.chunks * g.tiles_n; ++t) {
      // take the least busy CTA (the heap's root), add the tile, sift it down
      const double v = load[0] + g.tile_ns;
      if (v > busiest) busiest = v;
      int at = 0;
      for (;;) {
        const int l = 2 * at + 1, r = l + 1;
        int low = at;
        double lv = v;
        if (l < n && load[l] < lv) low = l, lv = load[l];
        if (r < n && load[r] < lv) low = r, lv = load[r];
        if (low == at) break;
        load[at] = load[low];
        at = low;
      }
      load[at] = v;
    }
  }
  return busiest;
}

// The plan for a launch of `groups` groups (sizes m, n, k each) on `sm_count` SMs: for every cap
// on the tile width (each compiled width, widest first; only `forced_cap` if it is not 0), each group's
// widest even tiles under it, groups ordered by tile cost; the cap with the lowest estimated
// busiest CTA wins, ties to the wider cap.
inline void plan_launch(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count,
                        int forced_cap, LaunchPlan& out) {
  LaunchPlan cand;
  double best = 0;
  bool have = false;
  for (int i = kNumWidths - 1; i >= 0; --i) {
    const int cap = kWidths[i];
    if (forced_cap && cap != forced_cap) continue;
    cand.groups = groups;
    cand.tiles = 0;
    for (int g = 0; g < groups; ++g) {
      cand.group[g] = group_tiles(m[g], n[g], k[g], cap);
      cand.tiles += cand.group[g].chunks * cand.group[g].tiles_n;
      // insertion sort by tile cost, costliest first; equal costs keep group order
      int at = g;
      while (at > 0 && cand.group[cand.order[at - 1]].tile_ns < cand.group[g].tile_ns) {
        cand.order[at] = cand.order[at - 1];
        --at;
      }
      cand.order[at] = g;
    }
    cand.est_ns = schedule_ns(cand, cand.tiles < sm_count ? cand.tiles : sm_count);
    if (!have || cand.est_ns < best * 0.999) out = cand, best = cand.est_ns, have = true;
  }
}

// Persistent grid: one CTA per SM (the kernel's shared memory allows no more), never more CTAs
// than tiles.
constexpr int grid_size(int64_t total_tiles, int sm_count) {
  return (int)(total_tiles < sm_count ? total_tiles : sm_count);
}

}  // namespace sm90
}  // namespace fl
