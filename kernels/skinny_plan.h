// The skinny kernel's plan (sm90_skinny.cuh): launches whose every group holds a few A rows, as a decode
// step sends a mixture-of-experts layer (a few tokens per expert), run on the CUDA cores instead of the
// wgmma GEMM. Such a launch is bound by B: its bytes, and the dequantisation of every B element, which the
// wgmma GEMM pays per 128 x 64 B elements whatever the rows (docs/sm90_kernel_notes.md, v108-v112), and
// which this kernel pays once per element, then M fp16 multiply-adds per element. Plain C++: the CPU tests
// reach it.
#pragma once
#include <cstdint>

#include "plan.h"

namespace fl::sm90 {

constexpr int kSkinnyThreads = 512;
constexpr int kSkinnyLanesPerRow = 8;  // the lanes of a warp that share a B row (each every 8th unit of K)
constexpr int kSkinnyRows = kSkinnyThreads / kSkinnyLanesPerRow;  // B rows per item
constexpr int kSkinnyUnitK = 32;  // K values per lane and load: 16 bytes of B, two scale blocks
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

// Bytes of the A rows (values and scales) for the launch's largest K.
constexpr int64_t skinny_smem_bytes(int mb, int64_t kmax) {
  return kmax / kSkinnyUnitK * skinny_unit_stride(mb);
}

// CTAs per SM: two where the registers (the builds of up to kSkinnyTwoCtaRows rows are bound to 64 per
// thread; at 4 rows that spilled) and shared memory allow.
constexpr int kSkinnyTwoCtaRows = 3;
constexpr int skinny_ctas_per_sm(int mb, int64_t kmax) {
  return mb <= kSkinnyTwoCtaRows && 2 * (skinny_smem_bytes(mb, kmax) + 1024) <= 228 * 1024 ? 2 : 1;
}

// Cost model (ns on the H200), fitted to the skinny kernel's times forced on 11 launches (v113 in
// docs/sm90_kernel_notes.md): a lane issues kSkinnyUnitBase + kSkinnyUnitPerRow x mb instructions per unit
// of 32 K values of its B row (the SASS of the builds of 1 and 2 rows: the dequantisation, loads and loop,
// then per A row 32 fp16 multiply-adds and their scaling); an SM issues kSkinnyIssueOne lane-instructions
// per ns with one CTA (16 warps), kSkinnyIssueTwo with two; B (bytes and scales) streams at
// kSkinnyBytesPerNs; a launch costs kSkinnyFixedNs more (launch, A rows into shared memory, first loads).
// A CTA runs its items one after the other; each of an item's warps the units of its busiest lane.
constexpr double kSkinnyUnitBase = 67;
constexpr double kSkinnyUnitPerRow = 32;
constexpr double kSkinnyIssueOne = 110;
constexpr double kSkinnyIssueTwo = 145;
constexpr double kSkinnyBytesPerNs = 3000;
constexpr double kSkinnyFixedNs = 4000;

struct SkinnyPlan {
  int build = -1;      // index into kSkinnyBuilds
  int64_t items = 0;   // (group, kSkinnyRows B rows) items of the launch
  int ctas = 0;        // the grid: CTA b takes items [items * b / ctas, items * (b + 1) / ctas)
  int64_t smem = 0;    // dynamic shared memory per CTA
  double est_ns = 0;   // estimated device time of the launch
};

// Whether the launch of `groups` groups (sizes valid: check_group_sizes) may run on the skinny kernel, and
// its plan. Not allowed: more than kGroupsSmall groups (its parameter block), a group of more than
// kSkinnyMaxM rows, or A rows that do not fit shared memory.
inline bool skinny_plan(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count,
                        SkinnyPlan& out) {
  out = SkinnyPlan{};
  if (groups < 1 || groups > kGroupsSmall || sm_count < 1) return false;
  int64_t max_m = 0, kmax = 0;
  for (int g = 0; g < groups; ++g) {
    if (m[g] > max_m) max_m = m[g];
    if (k[g] > kmax) kmax = k[g];
  }
  const int build = skinny_build(max_m);
  if (build < 0) return false;
  const int mb = kSkinnyBuilds[build];
  const int64_t smem = skinny_smem_bytes(mb, kmax);
  if (smem > kSkinnySmemMax) return false;
  double bytes = 0, item_instr = 0;  // item_instr: the costliest item's lane-instructions per lane
  int64_t items = 0;
  for (int g = 0; g < groups; ++g) {
    items += ceil_div(n[g], kSkinnyRows);
    bytes += (double)n[g] * (double)k[g] * (0.5 + 1.0 / 16);
    const double per_lane = (double)ceil_div(k[g] / kSkinnyUnitK, kSkinnyLanesPerRow) *
                            (kSkinnyUnitBase + kSkinnyUnitPerRow * mb);
    if (per_lane > item_instr) item_instr = per_lane;
  }
  if (items > (int64_t{1} << 31) - 1) return false;
  const int64_t slots = (int64_t)sm_count * skinny_ctas_per_sm(mb, kmax);
  const int64_t ctas = items < slots ? items : slots;
  // CTAs sharing an SM share its issue rate.
  const bool two = ctas > sm_count;
  const double cta_rate = two ? kSkinnyIssueTwo / 2 : kSkinnyIssueOne;
  const double cta_ns = (double)ceil_div(items, ctas) * item_instr * kSkinnyThreads / cta_rate;
  const double bytes_ns = bytes / kSkinnyBytesPerNs;
  const double est = cta_ns > bytes_ns ? cta_ns : bytes_ns;
  out.build = build;
  out.items = items;
  out.ctas = (int)ctas;
  out.smem = smem;
  out.est_ns = est + kSkinnyFixedNs;
  return true;
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
                       SkinnyPlan (&runs)[kMaxSkinnyRuns], double* est_ns) {
  *est_ns = 0;
  if (groups < 1 || groups > kGroupsPerLaunch) return 0;
  const int count = (int)ceil_div(groups, kGroupsSmall);
  for (int r = 0; r < count; ++r) {
    const int g0 = r * kGroupsSmall;
    if (!skinny_plan(m + g0, n + g0, k + g0, skinny_run_groups(groups, r), sm_count, runs[r])) return 0;
    *est_ns += runs[r].est_ns;
  }
  return count;
}

// The launcher's choice (auto): the skinny kernel where its estimate (`skinny_est_ns`, all its runs) beats
// the wgmma plan's (`wgmma_est_ns`, plan.h: its busiest CTA) with the two launches and the A conversion that
// path adds (kWgmmaFixedNs: event time of the decode launches beyond their plan's estimate, v113).
constexpr double kWgmmaFixedNs = 6000;
inline bool skinny_wins(double skinny_est_ns, double wgmma_est_ns) {
  return skinny_est_ns < wgmma_est_ns + kWgmmaFixedNs;
}

}  // namespace fl::sm90
