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

constexpr int kBlockM = 256;   // most rows of A / C per tile; becomes wgmma N (C^T = B A^T)
constexpr int kBlockN = 128;   // rows of B / columns of C per tile; 2 consumer warpgroups x 64
constexpr int kBlockK = 64;    // K per pipeline stage: one 512-byte scale block per 128 rows
constexpr int kRawStages = 8;  // TMA stages (packed A/B tiles + scale blocks)
constexpr int kA16Stages = 3;  // fp16 A tiles between the converter and the consumers
constexpr int kMapRing = kRawStages + 1;  // tensor-map slots per CTA: see sm90_group_gemm.cuh
constexpr int kWgmmaNStep = 16;        // tile widths (valid A rows) are padded to this
constexpr int kThreads = 384;          // producer/converter warpgroup + 2 consumer warpgroups
constexpr int kGroupsSmall = 16;       // kernel variant with a small parameter block
constexpr int kGroupsPerLaunch = 256;  // larger G is split into several launches

constexpr int64_t tiles_n(int64_t n) { return ceil_div(n, kBlockN); }

// A group's rows are cut into tiles of `tile_m` rows (a multiple of kWgmmaNStep, at most kBlockM).
constexpr int64_t tile_m_for(int64_t m, int64_t splits) { return round_up(ceil_div(m, splits), kWgmmaNStep); }
constexpr int64_t tiles_m(int64_t m, int64_t tile_m) { return ceil_div(m, tile_m); }
constexpr int64_t tiles(int64_t m, int64_t n, int64_t tile_m) { return tiles_m(m, tile_m) * tiles_n(n); }

// wgmma N of the tile starting at row m0 (the last tile of a group may be narrower).
constexpr int tile_width(int64_t m, int64_t m0, int64_t tile_m) {
  return (int)round_up((m - m0) < tile_m ? (m - m0) : tile_m, kWgmmaNStep);
}

// Rows per tile for each group. Start from the widest tiles (kBlockM rows). While all tiles fit in one
// wave (at most sm_count), the launch takes as long as its slowest tile, so keep splitting the group
// whose tiles carry the most work (width x K) as long as the wave still fits.
inline void plan_tile_m(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count,
                        int32_t* tile_m) {
  int64_t total = 0;
  for (int g = 0; g < groups; ++g) {
    tile_m[g] = (int32_t)tile_m_for(m[g], ceil_div(m[g], kBlockM));
    total += tiles(m[g], n[g], tile_m[g]);
  }
  while (total < sm_count) {
    int best = -1;
    int64_t best_work = 0;
    for (int g = 0; g < groups; ++g) {
      const int64_t work = (int64_t)tile_m[g] * k[g];
      if (tile_m[g] > kWgmmaNStep && work > best_work) best = g, best_work = work;
    }
    if (best < 0) break;
    const int64_t splits = tiles_m(m[best], tile_m[best]);
    int64_t next = tile_m[best];
    for (int64_t s = splits + 1; next == tile_m[best]; ++s) next = tile_m_for(m[best], s);
    const int64_t grown = total - tiles(m[best], n[best], tile_m[best]) + tiles(m[best], n[best], next);
    if (grown > sm_count) break;
    tile_m[best] = (int32_t)next;
    total = grown;
  }
}

// Persistent grid: one CTA per SM (the kernel's shared memory allows no more), never more CTAs
// than tiles.
constexpr int grid_size(int64_t total_tiles, int sm_count) {
  return (int)(total_tiles < sm_count ? total_tiles : sm_count);
}

}  // namespace sm90
}  // namespace fl
