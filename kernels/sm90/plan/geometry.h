// Geometry of the sm_90a kernels: tile widths and blocks, the compiled builds, thread counts, parameter-block
// sizes, the A workspace's layout and the reduce kernel's grid. Plain C++ (no CUDA types): the planner, the
// launcher, the kernels and the CPU tests all read it.
#pragma once
#include <cstdint>

#include "common/limits.h"

namespace fl::sm90 {

// Tiles: `width` A rows (wgmma N; the kernel computes C^T = B A^T) x kBlockN B rows. The width is chosen per
// group from kWidths (one compiled K loop and one TMA box each); a group wider than the widest is cut into
// `chunks` tiles of equal width along M. Two widths: a third K loop made every call 6-13% slower (ptxas
// spills in the code run once per tile), and a fourth made ptxas serialise the wgmma (its C7512 advisory);
// 128 and 192 measured 1.7% faster than 128 and 160 over the four benchmark shapes.
constexpr int kWidths[] = {128, 192};
constexpr int kNumWidths = sizeof(kWidths) / sizeof(kWidths[0]);
constexpr int kMaxWidth = kWidths[kNumWidths - 1];  // the A stage is sized for it
constexpr int kBlockN = 128;    // B rows (C columns) per tile: 2 consumer warpgroups x 64
constexpr int kBlockK = 64;     // K per pipeline stage: one 512-byte scale block per 128 rows
constexpr int kMaxStages = 6;   // TMA stages (fp16 A tile, packed B tile, B scale block); 7 fit beside
                                // 192-wide A tiles, 6 measured 0.7% faster
constexpr int kWgmmaNStep = 16;        // wgmma N granularity (the generated wgmma table)
constexpr int kThreads = 384;          // producer warpgroup + 2 consumer warpgroups
constexpr int kConvertThreads = 128;   // threads per CTA of the A conversion kernel (one unit each)
// The conversion's grid: at most this many CTAs per SM, all resident at once (its 48 registers and 16 KB of
// shared memory per CTA allow 10), grid-stride past that.
constexpr int kConvertCtasPerSm = 8;
// CTAs of the conversion for `units` units on `sm_count` SMs (B maps aside: the launcher adds those).
constexpr int64_t convert_ctas(int64_t units, int sm_count) {
  const int64_t need = ceil_div(units, kConvertThreads), most = (int64_t)kConvertCtasPerSm * sm_count;
  return need < most ? need : most;
}
// Parameter-block sizes: a launch takes the smallest that holds its groups (the GPU's cost of a launch grows
// with its parameter bytes).
constexpr int kGroupsSmall = 16;       // kernel variant with a small parameter block
constexpr int kGroupsMid = 64;         // ... and one with a middle one
constexpr int kGroupsLarge = 128;      // ... and a larger one
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

// The A tensor map (and the workspace) reach kA16PadRows rows past the launch's last row, never written:
// a group's tile reads `width` rows from its first, past the group's M into the next group's rows, and past
// the launch's last row for the last group's last tile. A box that runs out of the map is zero-filled by
// the TMA unit, and such loads made every K step of those tiles slower (one group of M = 40 with N = 16384,
// K = 7168: 77.8 against 47.2 us at M = 128, the same plan). The rows read past a group's M only feed sums
// of rows no epilogue stores.
constexpr int64_t kA16PadRows = kMaxWidth;
// The rows the A map and the workspace are sized for: the launch's rows rounded up to a step of an eighth of
// their largest power of two (at least 64; at most 12.5% more). Launches whose rows differ a little (a serving
// step routes other numbers of tokens every step) then ask the caching allocator for the same bytes, get the
// same block back, and find their A maps encoded. The rows past the launch's are never written, as the padding.
constexpr int64_t a16_extent_rows(int64_t rows) {
  int64_t p = 1;
  while (p * 2 <= rows) p *= 2;
  const int64_t step = p / 8 > 64 ? p / 8 : 64;
  return rows >= (int64_t{1} << 30) ? rows : round_up(rows, step);
}
constexpr int64_t a16_map_rows(int64_t rows) { return a16_extent_rows(rows) + kA16PadRows; }
static_assert(a16_extent_rows(1) == 64 && a16_extent_rows(1000) == 1024 && a16_extent_rows(1024) == 1024 &&
                  a16_extent_rows(1025) == 1152,
              "rows rounded up to an eighth of their power of two, at least 64");

// Bytes of one launch's fp16 A: `rows` (the sum of its groups' M, < 2^31) rows of `kmax` (< 2^31)
// elements as a16_map_rows sizes them (rounded up, and the padding rows); no overflow.
constexpr int64_t a16_launch_bytes(int64_t rows, int64_t kmax) {
  return round_up(a16_map_rows(rows) * kmax * 2, kWorkspaceAlign);
}

// The narrow build runs, inside the narrowest width's K loop, the wgmma at N = kNarrowN where every tile of
// a group holds at most that many A rows (a decode step: a few rows per group, whose 128-wide step is bound
// by B's dequantisation beside an MMA that is mostly padding). The tile keeps its width (its epilogue); only
// the MMA of the rows past kNarrowN is skipped, and only kNarrowN A rows are loaded, through a tensor map of
// their own after the widths' (Params::map_a16[kNumWidths]). One narrow N only: a second made ptxas
// serialise the wgmma.
constexpr int kNarrowN = 32;
constexpr int kNumA16Maps = kNumWidths + 1;
static_assert(kNarrowN % 16 == 0 && kNarrowN < kWidths[0], "a wgmma N (Group::mma_n16 holds N / 16) below every width");

// The mid build runs the widest K loop's wgmma at N = kMidN in place of the width, for launches whose every
// tile of that width holds at most kMidN A rows (benchmarks 1 and 2: their 192-wide tiles hold 148-176).
// The widest step is bound by its MMA, so its cost falls with N. Compiled as that loop's only N: a run-time
// choice of two Ns there gave the build a third copy of a tile's code (K loop, hand-over, epilogue), which
// starved the hand-over's registers or serialised the wgmma. The tile keeps its width (A box, epilogue,
// hand-over); the sums past N are not computed.
constexpr int kMidN = 176;
static_assert(kMidN % 16 == 0 && kMidN > kWidths[kNumWidths - 2] && kMidN < kMaxWidth,
              "a wgmma N between the two widest widths");

// The builds of the whole / split-tile GEMM a plan may run (LaunchPlan::build): the main build, the
// narrow build (kNarrowN in the narrowest width's loop) and the mid build (kMidN in the widest's).
constexpr int kBuildMain = 0, kBuildNarrow = 1, kBuildMid = 2;
constexpr int kNumBuilds = 3;

// Half tiles (launches of up to kGroupsSmall groups with few tiles; a kernel of their own): kHalfBlockN
// B rows per tile instead of kBlockN, both consumer warpgroups on the same 64 B rows, each taking every
// other K step, their sums added through shared memory before the epilogue. Twice the CTAs for a
// launch whose tiles leave SMs idle, each tile's K loop in half the time; whole tiles only (no split).
constexpr int kHalfBlockN = 64;

// The index of compiled width `w` in kWidths, -1 if it is none.
constexpr int width_index(int w) {
  for (int i = 0; i < kNumWidths; ++i)
    if (kWidths[i] == w) return i;
  return -1;
}

// The narrowest compiled width of at least `rows` (rows <= kMaxWidth).
constexpr int fit_width(int64_t rows) {
  for (int i = 0; i < kNumWidths; ++i)
    if (kWidths[i] >= rows) return kWidths[i];
  return kMaxWidth;
}

// The one wgmma N the mid build compiles into width w's K loop (the kernel's consumer_dispatch takes it too).
constexpr int mid_loop_n(int w) { return w == kMaxWidth ? kMidN : w; }

// The wgmma N of width w's tiles of at most `rows` A rows in build `build`: in the narrow build kNarrowN
// where it covers them in the narrowest width; in the mid build mid_loop_n(w) where it covers them (tiles
// of more rows in the widest width cannot run in it: mid_fits); else w.
constexpr int build_n(int build, int w, int64_t rows) {
  if (build == kBuildNarrow) return w == kWidths[0] && rows <= kNarrowN ? kNarrowN : w;
  if (build == kBuildMid) return rows <= mid_loop_n(w) ? mid_loop_n(w) : w;
  return w;
}

// The most tiles a group can be planned into (all tiles of the narrowest width): the limits are
// checked on it.
constexpr int64_t max_tiles(int64_t m, int64_t n) { return ceil_div(m, kWidths[0]) * tiles_n(n); }

constexpr int kMaxCtas = 144;  // GEMM CTAs per launch: at most one per SM, and at most this many

// A split tile's partial sums move in two halves of W / 2 A rows, a half with no valid row not at all
// (stream_k.cuh): the rows a part moves for a tile of `rows` valid rows.
constexpr int64_t part_rows(int64_t rows, int w) { return rows <= w / 2 ? w / 2 : w; }

// Reduced tiles (split-K with a reduction kernel): at most this many parts per tile.
constexpr int kMaxReduceParts = 64;

// The reduce kernel's grid (tiles, consumer warps, chunks): each CTA of kReduceWarps warps sums the
// parts of ceil(jv / chunks) float4s of one consumer warp's sums (jv: the launch's most float4s of
// valid A rows in a tile, 8 rows each), every float4's parts shared out among kReduceWarps / that many
// warps. The fewest float4s per CTA (the fewest loads per warp) whose grid fits in one round of
// kReduceCtasPerSm CTAs per SM; at most kReduceWarps float4s per CTA.
constexpr int kReduceWarps = 8;
// CTAs resident per SM (the kernel's launch bounds: up to 51 registers, room for 4 loads in flight)
constexpr int kReduceCtasPerSm = 5;
constexpr int kTileConsumerWarps = (kThreads - 128) / 32;
inline int reduce_chunks(int64_t tiles, int jv, int sm_count) {
  for (int per = 1; per < kReduceWarps; per *= 2) {
    const int chunks = (jv + per - 1) / per;
    if (tiles * kTileConsumerWarps * chunks <= (int64_t)sm_count * kReduceCtasPerSm) return chunks;
  }
  return (jv + kReduceWarps - 1) / kReduceWarps;
}

}  // namespace fl::sm90
