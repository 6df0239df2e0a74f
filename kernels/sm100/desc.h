// Host-side encoders and planning for the sm_100a kernel: the tcgen05 instruction descriptor
// (kind::mxf4nvf4), shared-memory matrix descriptors, tensor-memory addresses of accumulators and
// scale factors, and the tile table. Plain C++ (no CUDA types), so CPU tests reach it; the kernel
// uses the same functions on the device.
//
// Roles: the kernel computes C^T = B . A^T. The MMA's A operand ("M" side, 128 rows) is a tile of
// B's rows (C's columns); the MMA's B operand ("N" side, up to 128 rows) a tile of A's rows (C's
// rows). Both are K-major, packed E2M1, 256 K values (128 bytes) per row and stage.
#pragma once
#include <cstdint>

#include "common/limits.h"

#if defined(__CUDACC__)
#define FL_HD __host__ __device__ __forceinline__
#else
#define FL_HD inline
#endif

namespace fl::sm100 {

constexpr int kTileB = 128;        // B rows per tile: MMA M (cta_group::1)
constexpr int kTileA = 128;        // most A rows per tile: the largest MMA N used
constexpr int kMmaNStep = 16;      // MMA N = valid A rows rounded up to this
constexpr int kBlockK = 256;       // K per pipeline stage: one 128-byte swizzled row per operand row
constexpr int kMmaK = 64;          // K per MMA instruction; one 512-byte scale block per 128 rows
constexpr int kChunks = kBlockK / kMmaK;  // MMAs (and scale blocks per operand) per full stage
constexpr int kStages = 6;
constexpr int kMapRing = kStages + 1;     // tensor-map pairs per CTA slot (see kernels/sm100/gemm.cuh)
constexpr int kThreads = 192;             // warps 0-3 epilogue, warp 4 TMA, warp 5 MMA
constexpr int kGroupsSmall = 16;          // kernel variant with a small parameter block
constexpr int kGroupsPerLaunch = 256;     // larger G is split into several launches
constexpr uint32_t kSfBlockBytes = 512;   // 128 rows x 4 scales (one 64-wide K chunk)

// ---------------------------------------------------------------- instruction descriptor
// tcgen05.mma .kind::mxf4nvf4: bit fields of the 32-bit instruction descriptor.
constexpr uint32_t kFmtE2M1 = 1;    // atype / btype code of E2M1 for kind::mxf4nvf4
constexpr uint32_t kScaleUE4M3 = 0; // scale type: E4M3 (NVFP4); 1 would be UE8M0 (MXFP4)

// Both operands K-major, no negation, dense, scale-factor ids 0 (each 32-bit tensor-memory column
// holds four scales). mma_m: 128; mma_n: a multiple of 8 in 8..256.
constexpr uint32_t idesc_mxf4nvf4(uint32_t mma_m, uint32_t mma_n) {
  return (kFmtE2M1 << 7) | (kFmtE2M1 << 10) | ((mma_n >> 3) << 17) | (kScaleUE4M3 << 23) | ((mma_m >> 4) << 24);
}

// ---------------------------------------------------------------- shared-memory descriptors
enum Swizzle : uint32_t { kSwizzleNone = 0, kSwizzle128B = 2 };

constexpr uint64_t desc_field(uint32_t bytes) { return (uint64_t)((bytes & 0x3FFFFu) >> 4); }

// sm_100 matrix descriptor: start address, leading/stride byte offsets, the fixed 0b001 at bits
// 46-48, base offset 0 (stages start on 1024-byte boundaries), swizzle mode in bits 61-63.
constexpr uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo, Swizzle swz) {
  return desc_field(addr) | (desc_field(lbo) << 16) | (desc_field(sbo) << 32) | (uint64_t{1} << 46) |
         ((uint64_t)swz << 61);
}

// A K-major operand tile as TMA writes it with 128-byte swizzle: rows of 128 bytes, 8-row atoms
// 1024 bytes apart (SBO); LBO is unused for swizzled K-major layouts (encoded 16 bytes = 1).
// The MMA for K chunk c of the stage starts 32 * c bytes into the atom.
constexpr uint64_t smem_desc_operand(uint32_t tile_addr, int chunk) {
  return smem_desc(tile_addr + 32u * (uint32_t)chunk, 16, 1024, kSwizzle128B);
}

// One 512-byte scale block for tcgen05.cp .32x128b: 32 rows of 16 bytes, no swizzle, 8-row core
// matrices 128 bytes apart (SBO); a single 16-byte column, so LBO is unused (0).
constexpr uint64_t smem_desc_scales(uint32_t block_addr) { return smem_desc(block_addr, 0, 128, kSwizzleNone); }

// ---------------------------------------------------------------- tensor memory
constexpr uint32_t tmem_addr(uint32_t lane, uint32_t col) { return (lane << 16) | col; }

constexpr uint32_t kAccCols = kTileA;              // fp32 accumulator: one column per A row
constexpr uint32_t kAccBuffers = 2;                // the epilogue drains one while the MMA fills the other
constexpr uint32_t kSfCols = 4;                    // columns per scale block after .32x128b.warpx4
constexpr uint32_t kSfColsPerStage = 2 * kChunks * kSfCols;  // B's then A's blocks of one stage
constexpr uint32_t kSfColBase = kAccBuffers * kAccCols;
constexpr uint32_t kTmemCols = 512;                // allocation: a power of two >= everything below
static_assert(kSfColBase + kStages * kSfColsPerStage <= kTmemCols, "tensor-memory columns");

// Column offset (from the allocation's base) of the accumulator buffer `buf`.
constexpr uint32_t acc_col(uint32_t buf) { return buf * kAccCols; }
// Column of the scale block of K chunk `chunk` in stage `stage`; operand 0 = B (the MMA's A side),
// 1 = A (the MMA's B side).
constexpr uint32_t sf_col(uint32_t stage, uint32_t operand, uint32_t chunk) {
  return kSfColBase + stage * kSfColsPerStage + operand * (kChunks * kSfCols) + chunk * kSfCols;
}

// ---------------------------------------------------------------- tile table
// Tiles are numbered group by group; inside a group the A-row tiles of one B-row tile are
// adjacent (CTAs running together share B tiles in L2). The table is each group's exclusive end
// in that numbering (tile_end), built on the host; the device walks it from a hint.
constexpr int64_t tiles_a(int64_t m) { return ceil_div(m, kTileA); }
constexpr int64_t tiles_b(int64_t n) { return ceil_div(n, kTileB); }
constexpr int64_t group_tiles(int64_t m, int64_t n) { return tiles_a(m) * tiles_b(n); }

// K stages of a group and the 64-wide chunks of its last stage (K is a positive multiple of 64;
// written so that K near 2^31 does not overflow int32).
constexpr int32_t kstages(int32_t k) { return (k - 1) / kBlockK + 1; }
constexpr int32_t last_chunks(int32_t k) { return ((k / kMmaK) - 1) % kChunks + 1; }

// MMA N of a tile whose first A row is m0: the valid rows, rounded up to kMmaNStep.
constexpr int32_t mma_n(int32_t m, int32_t m0) {
  const int32_t rows = m - m0 < kTileA ? m - m0 : kTileA;
  return (rows + kMmaNStep - 1) / kMmaNStep * kMmaNStep;
}

struct TileCoord {
  int32_t g;   // group
  int32_t m0;  // first A row (C row)
  int32_t n0;  // first B row (C column)
};

// `groups[i]` needs members m and tile_end (int32). `g` is a starting hint (tiles only grow).
template <class Group>
FL_HD TileCoord decode_tile(const Group* groups, int32_t t, int32_t g) {
  while (t >= groups[g].tile_end) ++g;
  const int32_t local = t - (g ? groups[g - 1].tile_end : 0);
  const int32_t ta = (groups[g].m - 1) / kTileA + 1;  // m >= 1; no overflow near 2^31
  return TileCoord{g, (local % ta) * kTileA, (local / ta) * kTileB};
}

// Persistent grid: one CTA per SM (the shared memory allows no more), never more CTAs than tiles.
constexpr int grid_size(int64_t total_tiles, int sm_count) {
  return (int)(total_tiles < sm_count ? total_tiles : sm_count);
}

// The one-tile-per-CTA variant runs when every tile gets its own SM.
constexpr bool one_tile_per_cta(int64_t total_tiles, int sm_count) { return total_tiles <= sm_count; }

}  // namespace fl::sm100
