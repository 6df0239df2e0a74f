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

constexpr int kBlockM = 256;   // rows of A / C per tile; becomes wgmma N (C^T = B A^T)
constexpr int kBlockN = 128;   // rows of B / columns of C per tile; 2 consumer warpgroups x 64
constexpr int kBlockK = 64;    // K per pipeline stage: one 512-byte scale block per 128 rows
constexpr int kStages = 4;
constexpr int kMapRing = kStages + 1;  // tensor-map slots per CTA: see sm90_group_gemm.cuh
constexpr int kWgmmaNStep = 16;        // tile widths (valid A rows) are padded to this
constexpr int kThreads = 384;          // producer/converter warpgroup + 2 consumer warpgroups
constexpr int kGroupsSmall = 16;       // kernel variant with a small parameter block
constexpr int kGroupsPerLaunch = 256;  // larger G is split into several launches

constexpr int64_t tiles_m(int64_t m) { return ceil_div(m, kBlockM); }
constexpr int64_t tiles_n(int64_t n) { return ceil_div(n, kBlockN); }
constexpr int64_t tiles(int64_t m, int64_t n) { return tiles_m(m) * tiles_n(n); }

// wgmma N for a tile starting at row m0 of a group with m rows.
constexpr int tile_width(int64_t m, int64_t m0) {
  return (int)round_up((m - m0) < kBlockM ? (m - m0) : kBlockM, kWgmmaNStep);
}

// Persistent grid: one CTA per SM (the kernel's shared memory allows no more), never more CTAs
// than tiles.
constexpr int grid_size(int64_t total_tiles, int sm_count) {
  return (int)(total_tiles < sm_count ? total_tiles : sm_count);
}

}  // namespace sm90
}  // namespace fl
