// The launcher's memos of plans, kept per thread. Plans: the last few launches' plans, keyed by each group's class
// of M (kernels/sm90/plan/plan_class.h: M's planned alike share a plan), N and K, the SM count and the planner's
// settings. A serving loop repeats a few shapes, or, in a decode step, a few rows per group that differ every
// step but plan alike; planning itself costs 10-80 us (tools/tuning/plan_time.py) and a hit one comparison per
// entry. A plan's tiles and shares are the launch's own; its GroupTiles::m is the class's representative, which
// the launcher never reads (a group's M comes from its buffer). Skinny plans (kernels/sm90/plan/skinny.h): the
// last few launches' skinny runs, keyed by each run's build (skinny_run_m: a run's plan reads its rows only through
// its largest M's build), each group's N and K, the SM count and the skinny settings; a masked step asks the same
// every call, a decode step's rows drawn anew mostly take one or two builds, and estimating runs costs ~0.2 us per
// group (a build machine's CPU). Plain C++ (fastlaunch._C.plan_memo_ns and skinny_memo_ns time them on the CPU).
#pragma once
#include <cstdint>
#include <cstring>

#include "common/recent.h"
#include "sm90/plan/plan_class.h"
#include "sm90/plan/planner.h"
#include "sm90/plan/skinny.h"

namespace fl::sm90 {

// Entries of the launcher's memo: more than the distinct launches a benchmark set rotates through (GPU MODE runs its
// 15 test inputs back to back; entries are taken oldest first, so 15 inputs in turn would miss every time in fewer).
constexpr int kPlanMemoEntries = 32;

// A launch's sizes as a memo key: each group's M (or its class), N and K, the group count and the SM count.
struct SizesKey {
  int groups = 0, sm_count = 0;
  int64_t key[3 * kGroupsPerLaunch];
  bool matches(const int64_t* m, const int64_t* n, const int64_t* k, int g, int sms) const {
    const size_t bytes = sizeof(int64_t) * g;
    return groups == g && sm_count == sms && std::memcmp(key, m, bytes) == 0 &&
           std::memcmp(key + g, n, bytes) == 0 && std::memcmp(key + 2 * g, k, bytes) == 0;
  }
  void set(const int64_t* m, const int64_t* n, const int64_t* k, int g, int sms) {
    const size_t bytes = sizeof(int64_t) * g;
    std::memcpy(key, m, bytes);
    std::memcpy(key + g, n, bytes);
    std::memcpy(key + 2 * g, k, bytes);
    groups = g, sm_count = sms;
  }
};

template <int N>
class PlanMemo {
 public:
  const LaunchPlan& get(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count,
                        const PlanForce& force) {
    int64_t cm[kGroupsPerLaunch];
    if (const LaunchPlan* hit = find(m, n, k, groups, sm_count, force, cm)) return *hit;
    ++misses_;
    Entry& e = cache_.oldest();
    plan_launch(cm, n, k, groups, sm_count, force, e.plan);
    e.sizes.set(cm, n, k, groups, sm_count);
    e.force = force;
    return e.plan;
  }
  // Whether the memo holds the launch's plan (get would not plan).
  bool holds(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count, const PlanForce& force) {
    int64_t cm[kGroupsPerLaunch];
    return find(m, n, k, groups, sm_count, force, cm) != nullptr;
  }
  int64_t misses() const { return misses_; }

 private:
  struct Entry {
    SizesKey sizes;
    PlanForce force;
    LaunchPlan plan;
  };
  // The held plan, or null; cm: each group's class of M.
  const LaunchPlan* find(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count,
                         const PlanForce& force, int64_t* cm) {
    for (int g = 0; g < groups; ++g) cm[g] = plan_m(m[g]);
    const Entry* hit =
        cache_.find([&](const Entry& e) { return e.force == force && e.sizes.matches(cm, n, k, groups, sm_count); });
    return hit ? &hit->plan : nullptr;
  }
  Recent<Entry, N> cache_;
  int64_t misses_ = 0;
};

// Entries of the skinny memo: a serving loop's few decode shapes (masked steps of a model's layer kinds).
constexpr int kSkinnyMemoEntries = 8;

// skinny_runs' result for a launch (its runs, their count and estimate), from the memo where held.
struct SkinnyRuns {
  SkinnyPlan runs[kMaxSkinnyRuns];
  int count = 0;
  double est_ns = 0;
};

template <int N>
class SkinnyMemo {
 public:
  const SkinnyRuns& get(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count, int split,
                        int lanes) {
    int64_t cm[kGroupsPerLaunch];  // (groups: 1 .. kGroupsPerLaunch, as the launcher asks)
    skinny_run_m(m, groups, cm);
    const Entry* hit = cache_.find(
        [&](const Entry& e) { return e.split == split && e.lanes == lanes && e.sizes.matches(cm, n, k, groups, sm_count); });
    if (hit) return hit->result;
    ++misses_;
    Entry& e = cache_.oldest();
    e.result.count = skinny_runs(m, n, k, groups, sm_count, e.result.runs, &e.result.est_ns, split, lanes);
    e.sizes.set(cm, n, k, groups, sm_count);
    e.split = split, e.lanes = lanes;
    return e.result;
  }
  int64_t misses() const { return misses_; }

 private:
  struct Entry {
    SizesKey sizes;
    int split = 0, lanes = 0;
    SkinnyRuns result;
  };
  Recent<Entry, N> cache_;
  int64_t misses_ = 0;
};

}  // namespace fl::sm90
