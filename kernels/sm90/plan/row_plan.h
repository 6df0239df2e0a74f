// The task form's launches without the planner: each group tiled from its own M under fixed rules, its tiles shared
// out on the device as the masked form's are (row_schedule.h), so a launch costs the host O(groups) where
// plan_launch costs 10-80 us (tools/tuning/plan_time.py). The launcher (FASTLAUNCH_SM90_ROWS=first, the default)
// takes it for a launch whose plan the memo of plans (plan_memo.h) does not hold, but at the second call of its sizes
// (SizesSeen), which plans; a later call whose plan the memo no longer holds (more sizes in turn than it keeps) runs
// here again rather than plan again. So sizes that change every call never wait for a plan, while a benchmark's
// repeats and the task's 15 rotating test inputs get theirs. Plain C++: the launcher and the CPU tests
// (fastlaunch._C.row_plan, sizes_seen) read it.
//
// The rules: one launch (at most kGroupsPerLaunch groups) of one K, every N a multiple of 8 (the masked kernels store
// C rows in 16-byte chunks; the launcher checks C's addresses too). Each group's widest even tiles of at most
// kMaxWidth rows (group_tiles: 128 rows in one tile of 128, 129-192 in one of 192, 320 in two of 192, ...); the narrow
// build where every group is one tile of the narrowest width (a decode step: groups of at most kNarrowN rows run the
// wgmma at N = kNarrowN), else the main build, whose wave walks serve launches past L2. No half, reduced or mid-build
// tiles, no group cuts: those are the planner's, for sizes called again.
#pragma once
#include <cstdint>

#include "sm90/plan/planner.h"

namespace fl::sm90 {

// Whether a launch of valid sizes may run on the device schedule.
inline bool row_plan_fits(const int64_t* m, const int64_t* n, const int64_t* k, int groups) {
  if (groups < 1 || groups > kGroupsPerLaunch) return false;
  for (int g = 0; g < groups; ++g)
    if (k[g] != k[0] || n[g] % 8 != 0 || m[g] < 1) return false;
  return true;
}

// The build of such a launch: narrow where every group is one tile of the narrowest width.
inline int row_plan_build(const int64_t* m, int groups) {
  for (int g = 0; g < groups; ++g)
    if (m[g] > kWidths[0]) return kBuildMain;
  return kBuildNarrow;
}

// Its plan, as the launcher reads a plan: the groups in their own order, each tiled by its own M; the grid one CTA
// (the launcher's row_grid widens it to the SMs the steps can fill); tiles and steps the launch's. The shares are
// the device's: start arrays and estimates are not filled. `cap` (a compiled width, experiments:
// FASTLAUNCH_SM90_WCAP with FASTLAUNCH_SM90_ROWS=1), or 0: the rules' widest tile.
inline void row_plan(const int64_t* m, const int64_t* n, const int64_t* k, int groups, LaunchPlan& p, int cap = 0) {
  p.groups = groups;
  p.build = row_plan_build(m, groups);
  p.half = false, p.reduce = 0, p.wave = false, p.splits = 0, p.est_ns = 0;
  p.tiles = 0, p.steps = 0;
  if (cap == 0) cap = p.build == kBuildNarrow ? kWidths[0] : kMaxWidth;
  for (int g = 0; g < groups; ++g) {
    p.order[g] = g;
    p.group[g] = group_tiles(m[g], n[g], k[g], cap, false, p.build);
    const int64_t tiles = p.group[g].chunks * p.group[g].tiles_n;
    p.tiles += tiles;
    p.steps += tiles * p.group[g].kst;
  }
  p.ctas = 1;
  p.start_tile[0] = 0, p.start_k[0] = 0;
  p.start_tile[1] = (int32_t)p.tiles, p.start_k[1] = 0;
}

// Entries of the launcher's table of sizes seen (SizesSeen): far more than a serving loop's or a benchmark set's
// distinct launches, at 8 bytes each.
constexpr int kSizesSeenEntries = 1024;

// How often a launch's exact sizes were called before: a table of their 64-bit hashes in sets of kSizesSeenWays, each
// with the count of its sightings (up to "later"), the set's most recent first. A launch pushed out of its set by
// kSizesSeenWays others since its last call is new again (the device schedule), and two whose hashes are equal count
// as one; either costs time, never correctness. (In a direct-mapped table two of 15 launches share a slot about one
// time in ten, and taken in turn they would push each other out at every call.)
constexpr int kSizesSeenWays = 4;
enum Sighting { kSightFirst = 0, kSightSecond = 1, kSightLater = 2 };
template <int N>
class SizesSeen {
  static_assert(N % kSizesSeenWays == 0, "whole sets");

 public:
  // This call's sighting of `count` sizes; counts it.
  Sighting sight(const int64_t* sizes, int count) {
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)count;
    for (int i = 0; i < count; ++i) {
      h ^= (uint64_t)sizes[i];
      h *= 0x100000001b3ull;
      h ^= h >> 32;
    }
    h = (h & ~uint64_t{3}) | 4;  // the low two bits hold the sighting; never an empty slot's 0
    uint64_t* set = table_ + (h >> 3) % (N / kSizesSeenWays) * kSizesSeenWays;  // (bit 2 is always set)
    int way = 0;
    while (way < kSizesSeenWays && (set[way] & ~uint64_t{3}) != h) ++way;
    Sighting s = kSightFirst;
    if (way < kSizesSeenWays) s = (set[way] & 3) == kSightFirst ? kSightSecond : kSightLater;
    else way = kSizesSeenWays - 1;  // the set's least recent goes
    for (; way > 0; --way) set[way] = set[way - 1];
    set[0] = h | (uint64_t)s;
    return s;
  }

 private:
  uint64_t table_[N] = {};
};

}  // namespace fl::sm90
