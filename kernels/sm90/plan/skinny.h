// The skinny kernel's plan (kernels/sm90/skinny.cuh): launches whose every group holds a few A rows, as a decode
// step sends a mixture-of-experts layer (a few tokens per expert), run on the CUDA cores instead of the
// wgmma GEMM. Such a launch is bound by B: its bytes, and the dequantisation of every B element, which the
// wgmma GEMM pays per 128 x 64 B elements whatever the rows, and
// which this kernel pays once per element, then M fp16 multiply-adds per element. Plain C++: the CPU tests
// reach it.
#pragma once
#include <cstdint>

#include "sm90/plan/planner.h"

namespace fl::sm90 {

constexpr int kSkinnyThreads = 512;
// Lanes per B row: a lane takes every L-th unit of its row's K. 8 (a warp holds 4 rows, items of 64 B rows:
// a unit's A entries read once for 4 rows) or 32 (a warp per row, items of 16 B rows: 4x the items, and CTAs,
// for launches of few, each A entry read by one lane only). A build per (rows, lanes).
constexpr int kSkinnyLanes[] = {8, 32};
constexpr int kNumSkinnyLanes = sizeof(kSkinnyLanes) / sizeof(kSkinnyLanes[0]);
constexpr int skinny_lanes_index(int lanes) { return lanes == kSkinnyLanes[1] ? 1 : 0; }
constexpr bool skinny_lanes_valid(int lanes) { return lanes == kSkinnyLanes[skinny_lanes_index(lanes)]; }
constexpr int skinny_rows(int lanes) { return kSkinnyThreads / lanes; }  // B rows per item
constexpr int kSkinnyUnitK = 32;  // K values per lane and load: 16 bytes of B, two scale blocks
// K split: a launch of few items may cut every item's K into `split` parts, one CTA each, the CTAs of an item
// one thread-block cluster (at most 8 CTAs: the portable cluster size) whose partial sums meet in shared
// memory. Parts are whole chunks of `lanes` units (each lane of a row the same units).
constexpr int kSkinnyMaxSplit = 8;
// The compiled row counts (A rows held in shared memory, rows past M zero): a launch takes the smallest
// that holds its largest M.
constexpr int kSkinnyBuilds[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16};
constexpr int kNumSkinnyBuilds = sizeof(kSkinnyBuilds) / sizeof(kSkinnyBuilds[0]);
constexpr int kSkinnyMaxM = kSkinnyBuilds[kNumSkinnyBuilds - 1];
// Shared memory per (unit, A row) entry: 32 fp16 values and two fp32 scales, 16-byte aligned. A unit's
// entries take an odd number of 16-byte chunks, so the 8 units a warp's lanes read at once start in
// different banks.
constexpr int64_t kSkinnyEntryBytes = 80;
constexpr int64_t kSkinnySmemMax = 227 * 1024;  // sm_90's opt-in dynamic shared memory per CTA
constexpr int64_t skinny_unit_stride(int mb) { return 16 * ((mb * kSkinnyEntryBytes / 16) | 1); }

// The build index for a launch whose largest group has `max_m` rows, or -1 past kSkinnyMaxM.
constexpr int skinny_build(int64_t max_m) {
  for (int i = 0; i < kNumSkinnyBuilds; ++i)
    if (max_m <= kSkinnyBuilds[i]) return i;
  return -1;
}

// Part r of `split` of a K of `units` units: units [*u0, *u1), whole chunks of `lanes` units but the last
// (empty where the K has fewer chunks than parts). The kernel and the planner share it. `units` <
// kSkinnyMaxUnits (K < 2^31 values, kernels/sm90/plan/planner.h kMaxExtent), so chunks x split stays below 2^31: 32-bit products
// and one 32-bit division each, cheaper in the kernel's prologue than 64-bit ones.
constexpr int64_t kSkinnyMaxUnits = int64_t{1} << 28;
constexpr void skinny_part(int64_t units, int split, int lanes, int r, int64_t* u0, int64_t* u1) {
  const uint32_t chunks = (uint32_t)((units + lanes - 1) / lanes);
  const int64_t c0 = chunks * (uint32_t)r / (uint32_t)split, c1 = chunks * (uint32_t)(r + 1) / (uint32_t)split;
  *u0 = c0 * lanes < units ? c0 * lanes : units;
  *u1 = c1 * lanes < units ? c1 * lanes : units;
}

// The most units a part of `split` holds, over a K of `units` units, in chunks of `lanes` units.
constexpr int64_t skinny_part_units(int64_t units, int split, int lanes) {
  int64_t most = 0;
  for (int r = 0; r < split; ++r) {
    int64_t u0 = 0, u1 = 0;
    skinny_part(units, split, lanes, r, &u0, &u1);
    if (u1 - u0 > most) most = u1 - u0;
  }
  return most;
}

// Bytes of a split CTA's partial sums (fp32, one per A row and B row of the item), after its A rows.
constexpr int64_t skinny_sums_bytes(int mb, int lanes) { return (int64_t)mb * skinny_rows(lanes) * 4; }

// B's scales at 32 lanes: a warp holds one row, so its lanes' scales (every K step's 4 bytes of the row, 512
// bytes apart) touch 16 lines per load, which bound the B stream. There the CTA copies each item's
// scales into shared memory instead (its 16 rows' scales of a K step lie in 256 bytes: 2 lines), one item
// ahead, into two buffers taking turns: per K step of the part a row of skinny_rows(lanes) + 1 words (the
// extra word keeps a warp's 16 K steps in different banks).
constexpr bool skinny_shared_scales(int lanes) { return lanes == kSkinnyLanes[1]; }
constexpr int skinny_scale_row_words(int lanes) { return skinny_rows(lanes) + 1; }
// Bytes of one buffer for parts of up to `part_units` units (0 where the scales are not in shared memory).
constexpr int64_t skinny_scale_buf_bytes(int64_t part_units, int lanes) {
  return skinny_shared_scales(lanes) ? round_up((part_units + 1) / 2 * skinny_scale_row_words(lanes) * 4, 16) : 0;
}

// CTAs per SM: two where the registers (the builds of up to kSkinnyTwoCtaRows rows are bound to 64 per
// thread; at 4 rows that spilled) and shared memory (`smem` per CTA) allow.
constexpr int kSkinnyTwoCtaRows = 3;
constexpr int skinny_ctas_per_sm(int mb, int64_t smem) {
  return mb <= kSkinnyTwoCtaRows && 2 * (smem + 1024) <= 228 * 1024 ? 2 : 1;
}

// Cost model (ns on the H200; SkinnyCosts, fitted by tools/tuning/skinny_fit.py to the kernel's times forced on 28
// launches at each lanes per row and split; tools/tuning/data/skinny_forced.json holds 34 launches, each at every
// lanes and split, timed on the kernel as it is): a lane issues unit_base[lanes] +
// unit_per_row x mb instructions per unit of 32 K values of its B row (the dequantisation, loads and loop,
// then per A row 32 fp16 multiply-adds and their scaling); an SM issues issue_one lane-instructions per ns
// with one CTA (16 warps), issue_two with two; its shared memory serves smem_waves_per_ns wavefronts per ns,
// a warp's unit taking 2 x 3 per A row at 8 lanes per row (two 16-byte loads and a scale per scale block, the
// warp's 4 rows reading the same 8 entries) and four times that at 32 (32 entries, the scales' 4-byte loads
// 4-way bank conflicts); B (bytes and scales) streams at bytes_per_ns[lanes] over the chip; a launch costs
// fixed_ns more (launch, A rows into shared memory, first loads). A CTA runs its items one after the other;
// each of an item's warps the units of its busiest lane. A CTA streams its own B at cta_bytes_per_ns at most
// (its loads in flight over the memory's latency), which bounds launches of few CTAs. A launch that splits K
// costs split_ns more: the cluster launch, its partial sums through shared memory and two cluster barriers.
struct SkinnyCosts {
  double unit_base[kNumSkinnyLanes];
  double unit_per_row;
  double issue_one, issue_two;
  double smem_waves_per_ns;
  double bytes_per_ns[kNumSkinnyLanes];
  double cta_bytes_per_ns;
  double fixed_ns, split_ns;
};
constexpr int kSkinnyCostFields = 2 * kNumSkinnyLanes + 7;  // the doubles above, in order
// unit_base[8 lanes] and unit_per_row are the SASS's counts (the builds of 1 and 2 rows), the rest fitted;
// unit_base[32 lanes] takes in what 32 lanes per row cost besides. Fitted before B's scales went through shared
// memory at 32 lanes; on the times of the kernel as it is (every launch of the data file at every lanes and
// split) these costs choose within 0.2% of the fastest by geomean, and a refit on those times chose worse
// (1.2%), so they stay.
constexpr SkinnyCosts kSkinnyCosts = {{67, 116}, 32, 132, 145, 1.4, {2900, 3000}, 25, 5100, 1640};
constexpr double kSkinnySmemWavesPerUnitRow = 2 * 3;  // per warp, unit and A row, at 8 lanes per row

// Clusters of `split` CTAs of the skinny kernel's size (512 threads) that the H200 runs at once, per 132 SMs,
// with one CTA per SM ([0]) and two ([1]) (tools/cluster_occupancy.cu): a cluster takes SMs of one GPC, so
// past 2 CTAs the GPCs' leftover SMs go unused. The planner splits only where every item's cluster fits
// in one wave.
constexpr int kSkinnyClustersAtOnce[2][kSkinnyMaxSplit] = {{132, 66, 39, 30, 22, 17, 15, 15},
                                                           {264, 132, 79, 62, 47, 39, 32, 30}};

struct SkinnyPlan {
  int build = -1;      // index into kSkinnyBuilds
  int split = 1;       // CTAs per item (one cluster), each a part of K (skinny_part)
  int lanes = kSkinnyLanes[0];  // lanes per B row (kSkinnyLanes): items of skinny_rows(lanes) B rows
  int64_t items = 0;   // (group, skinny_rows(lanes) B rows) items of the launch
  int ctas = 0;        // the grid: ctas / split clusters, each taking a run of items (skinny_items)
  int64_t smem = 0;    // dynamic shared memory per CTA: the A rows, the scale buffers, the partial sums
  int64_t scales = 0;  // where the two scale buffers start in it (after the A rows), each scale_buf bytes
  int64_t scale_buf = 0;  // skinny_scale_buf_bytes (0: B's scales not through shared memory)
  int64_t sums = 0;    // where a split CTA's partial sums start in it (after the scale buffers)
  double est_ns = 0;   // estimated device time of the launch
  bool planners = true;  // a plan the planner itself may choose (skinny_split_open); false only where forced
};

// The clusters' runs of `items` items over `clusters` clusters, as the launcher passes them (the kernel then
// divides nothing): items / clusters each, and one more for the first items % clusters clusters (at most
// ceil(items / clusters) each, as the planner prices).
struct SkinnyItemRuns {
  int32_t per, extra;
};
constexpr SkinnyItemRuns skinny_item_runs(int64_t items, int64_t clusters) {
  return {(int32_t)(items / clusters), (int32_t)(items % clusters)};
}

// Cluster c's run: items [*first, *first + *count).
constexpr void skinny_items(int64_t c, SkinnyItemRuns runs, int64_t* first, int64_t* count) {
  *first = c * runs.per + (c < runs.extra ? c : runs.extra);
  *count = runs.per + (c < runs.extra ? 1 : 0);
}

// Whether the planner itself may split K into `split` parts (a forced split may be any of 1..kSkinnyMaxSplit):
// 1, 2, 4 or 8 (those timed), at most the longest K's chunks of `lanes` units, and only to fill the SMs in one
// wave, each item's cluster at once (`per_sm`: skinny_ctas_per_sm).
constexpr bool skinny_split_open(int split, int64_t kmax_units, int lanes, int64_t items, int per_sm, int sm_count) {
  if (split == 1) return true;
  if (split & (split - 1) || split > ceil_div(kmax_units, lanes)) return false;
  return items <= (int64_t)kSkinnyClustersAtOnce[per_sm - 1][split - 1] * sm_count / 132;
}

// Whether the launch of `groups` groups (sizes valid: check_group_sizes) may run on the skinny kernel, and
// its plan: the lanes per row and K split of the lowest estimate among those that leave one item per cluster
// (a split fills the SMs of a launch of few items), or `force_split` (1..kSkinnyMaxSplit; 0: the planner's)
// and `force_lanes` (one of kSkinnyLanes; 0: the planner's).
// Not allowed: more than kGroupsSmall groups (its parameter block), a group of more than kSkinnyMaxM rows,
// or A rows that do not fit shared memory.
inline bool skinny_plan(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count,
                        SkinnyPlan& out, int force_split = 0, int force_lanes = 0,
                        const SkinnyCosts& costs = kSkinnyCosts) {
  out = SkinnyPlan{};
  if (groups < 1 || groups > kGroupsSmall || sm_count < 1 || force_split < 0 || force_split > kSkinnyMaxSplit ||
      (force_lanes && !skinny_lanes_valid(force_lanes)))
    return false;
  int64_t max_m = 0, kmax = 0;
  for (int g = 0; g < groups; ++g) {
    if (m[g] > max_m) max_m = m[g];
    if (k[g] > kmax) kmax = k[g];
  }
  const int build = skinny_build(max_m);
  if (build < 0 || kmax / kSkinnyUnitK >= kSkinnyMaxUnits) return false;
  const int mb = kSkinnyBuilds[build];
  double bytes = 0;
  for (int g = 0; g < groups; ++g) bytes += (double)n[g] * (double)k[g] * (0.5 + 1.0 / 16);
  const int64_t kmax_units = kmax / kSkinnyUnitK;
  bool found = false;
  for (const int lanes : kSkinnyLanes) {
    if (force_lanes && lanes != force_lanes) continue;
    const int li = skinny_lanes_index(lanes);
    const double bytes_ns = bytes / costs.bytes_per_ns[li];
    int64_t items = 0;
    for (int g = 0; g < groups; ++g) items += ceil_div(n[g], skinny_rows(lanes));
    if (items > (int64_t{1} << 31) - 1) continue;  // item_end in 32 bits
    for (int split = 1; split <= kSkinnyMaxSplit; ++split) {
      if (force_split && split != force_split) continue;
      const int64_t part_units = skinny_part_units(kmax_units, split, lanes);
      const int64_t scales = part_units * skinny_unit_stride(mb), scale_buf = skinny_scale_buf_bytes(part_units, lanes);
      const int64_t sums = scales + 2 * scale_buf;
      const int64_t smem = sums + (split > 1 ? skinny_sums_bytes(mb, lanes) : 0);
      if (smem > kSkinnySmemMax) continue;
      double item_instr = 0, item_waves = 0;  // the costliest item's lane-instructions per lane, and wavefronts
      for (int g = 0; g < groups; ++g) {
        const double steps = (double)ceil_div(skinny_part_units(k[g] / kSkinnyUnitK, split, lanes), lanes);
        const double per_lane = steps * (costs.unit_base[li] + costs.unit_per_row * mb);
        if (per_lane > item_instr) item_instr = per_lane;
        const double waves = steps * (kSkinnyThreads / 32) * kSkinnySmemWavesPerUnitRow * mb * (lanes / 8);
        if (waves > item_waves) item_waves = waves;
      }
      const int per_sm = skinny_ctas_per_sm(mb, smem);
      const bool planners = skinny_split_open(split, kmax_units, lanes, items, per_sm, sm_count);
      if (!force_split && !planners) continue;
      const int64_t slots = (int64_t)sm_count * per_sm;
      const int64_t fit = slots / split > 1 ? slots / split : 1;
      const int64_t clusters = items < fit ? items : fit;
      const int64_t ctas = clusters * split;
      // CTAs sharing an SM share its issue rate and its shared memory.
      const bool shared = ctas > sm_count;
      const double cta_rate = shared ? costs.issue_two / 2 : costs.issue_one;
      const double run = (double)ceil_div(items, clusters);
      const double cta_ns = run * item_instr * kSkinnyThreads / cta_rate;
      const double smem_ns = run * item_waves / (shared ? costs.smem_waves_per_ns / 2 : costs.smem_waves_per_ns);
      const double cta_bytes_ns = bytes / (double)ctas / costs.cta_bytes_per_ns;
      double est = cta_ns > bytes_ns ? cta_ns : bytes_ns;
      if (smem_ns > est) est = smem_ns;
      if (cta_bytes_ns > est) est = cta_bytes_ns;
      est += costs.fixed_ns + (split > 1 ? costs.split_ns : 0);
      if (found && est >= out.est_ns) continue;
      found = true;
      out.build = build;
      out.split = split;
      out.lanes = lanes;
      out.items = items;
      out.ctas = (int)ctas;
      out.smem = smem;
      out.scales = scales;
      out.scale_buf = scale_buf;
      out.sums = sums;
      out.est_ns = est;
      out.planners = planners;
    }
  }
  return found;
}

// A launch of more groups runs the skinny kernel once per run of up to kGroupsSmall groups, one after the
// other in the stream (a mixture-of-experts decode step over many experts): run r holds groups
// r x kGroupsSmall .. The runs' plans into runs[] and their estimates summed into *est_ns; the number of
// runs, or 0 where a run may not take it. Groups up to kGroupsPerLaunch.
constexpr int kMaxSkinnyRuns = kGroupsPerLaunch / kGroupsSmall;
static_assert(kGroupsPerLaunch % kGroupsSmall == 0, "whole runs of kGroupsSmall groups");
constexpr int skinny_run_groups(int groups, int run) {
  return groups - run * kGroupsSmall < kGroupsSmall ? groups - run * kGroupsSmall : kGroupsSmall;
}
inline int skinny_runs(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count,
                       SkinnyPlan (&runs)[kMaxSkinnyRuns], double* est_ns, int force_split = 0, int force_lanes = 0) {
  *est_ns = 0;
  if (groups < 1 || groups > kGroupsPerLaunch) return 0;
  const int count = (int)ceil_div(groups, kGroupsSmall);
  for (int r = 0; r < count; ++r) {
    const int g0 = r * kGroupsSmall;
    if (!skinny_plan(m + g0, n + g0, k + g0, skinny_run_groups(groups, r), sm_count, runs[r], force_split, force_lanes))
      return 0;
    *est_ns += runs[r].est_ns;
  }
  return count;
}

// Each group's M as far as skinny_runs reads it, into cm: a run's plan reads its rows only through its largest M's
// build, so every group of a run takes the rows of that build (kSkinnyBuilds), or its largest M itself past
// kSkinnyMaxM (no build: the run may not take the kernel). skinny_runs(cm) plans exactly as skinny_runs(m).
inline void skinny_run_m(const int64_t* m, int groups, int64_t* cm) {
  for (int g0 = 0; g0 < groups; g0 += kGroupsSmall) {
    const int g1 = g0 + kGroupsSmall < groups ? g0 + kGroupsSmall : groups;
    int64_t max_m = 0;
    for (int g = g0; g < g1; ++g)
      if (m[g] > max_m) max_m = m[g];
    const int build = skinny_build(max_m);
    for (int g = g0; g < g1; ++g) cm[g] = build < 0 ? max_m : kSkinnyBuilds[build];
  }
}

// The launcher's choice (auto): the skinny kernel where its estimate (`skinny_est_ns`, all its runs) beats
// the wgmma plan's (`wgmma_est_ns`, kernels/sm90/plan/planner.h: its busiest CTA) with the two launches and the A conversion that
// path adds (kWgmmaFixedNs: event time of the decode launches beyond their plan's estimate).
constexpr double kWgmmaFixedNs = 6000;
inline bool skinny_wins(double skinny_est_ns, double wgmma_est_ns) {
  return skinny_est_ns < wgmma_est_ns + kWgmmaFixedNs;
}

}  // namespace fl::sm90
