// Which M's the sm_90a planner plans alike, so that the launcher's memo of plans serves a launch whose group
// sizes it has not seen: a decode step routes a few tokens to each expert, a different few every step, and
// every such step is one plan. Plain C++ (the CPU tests check the claim against plan_launch itself).
//
// plan_launch reads a group's M only through group_tiles (kernels/sm90/plan/planner.h): for each cap on the
// tile width, half tiles or not, and each build, the tiles along M (`chunks`), their width, the wgmma N of the
// build (which depends on the first tile's rows), and the rows of each tile (which its partial sums' costs
// depend on only through part_rows: whether they fill more than half the tile). Every full tile holds `width`
// rows, so the last tile's class is the only one that varies. Two M's with the same of all these plan alike:
// the same tiles, order, shares and estimates, the group's own M aside.
#pragma once
#include <cstdint>

#include "sm90/plan/planner.h"

namespace fl::sm90 {

// The plan-relevant facts of M: every (cap, half, build) combination's chunks, width, wgmma N and the last
// tile's part_rows. Compared as a whole.
struct PlanClass {
  static constexpr int kCombos = kNumWidths * 2 * kNumBuilds;
  int64_t chunks[kCombos];
  int width[kCombos], mma_n[kCombos];
  int64_t last_part[kCombos];
  bool operator==(const PlanClass& o) const {
    for (int i = 0; i < kCombos; ++i)
      if (chunks[i] != o.chunks[i] || width[i] != o.width[i] || mma_n[i] != o.mma_n[i] ||
          last_part[i] != o.last_part[i])
        return false;
    return true;
  }
};

inline PlanClass plan_class(int64_t m) {
  PlanClass c{};
  int i = 0;
  for (int w = 0; w < kNumWidths; ++w)
    for (int half = 0; half < 2; ++half)
      for (int build = 0; build < kNumBuilds; ++build, ++i) {
        // N and K do not change how M is tiled: any valid pair
        const GroupTiles t = group_tiles(m, kBlockN, kBlockK, kWidths[w], half != 0, half ? kBuildMain : build);
        c.chunks[i] = t.chunks;
        c.width[i] = t.width;
        c.mma_n[i] = t.mma_n;
        c.last_part[i] = part_rows(m - (t.chunks - 1) * t.width, t.width);
      }
  return c;
}

// M's up to kPlanClassMax have a representative: the largest M of the run of consecutive M's of its class that
// holds it. Larger M's are their own representative (their launches are long beside planning them).
constexpr int64_t kPlanClassMax = 4096;

// The representative of m's class (m itself above kPlanClassMax). A table of kPlanClassMax entries, made on
// first use.
inline int64_t plan_m(int64_t m) {
  struct Table {
    int32_t rep[kPlanClassMax + 1];
    Table() {
      rep[kPlanClassMax] = (int32_t)kPlanClassMax;
      PlanClass next = plan_class(kPlanClassMax);
      for (int64_t x = kPlanClassMax - 1; x >= 1; --x) {
        const PlanClass here = plan_class(x);
        rep[x] = here == next ? rep[x + 1] : (int32_t)x;
        next = here;
      }
      rep[0] = 0;
    }
  };
  static const Table table;
  return m >= 0 && m <= kPlanClassMax ? table.rep[m] : m;
}

}  // namespace fl::sm90
