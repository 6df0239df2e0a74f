// The launcher's memo of plans: the last few launches' plans, kept per thread, keyed by each group's class of M
// (kernels/sm90/plan/plan_class.h: M's planned alike share a plan), N and K, the SM count and the planner's
// settings. A serving loop repeats a few shapes, or, in a decode step, a few rows per group that differ every
// step but plan alike; planning itself costs 10-80 us (tools/tuning/plan_time.py) and a hit one comparison per
// entry. A plan's tiles and shares are the launch's own; its GroupTiles::m is the class's representative, which
// the launcher never reads (a group's M comes from its buffer). Plain C++ (tests/cpp/plan_memo_probe.cpp).
#pragma once
#include <cstdint>
#include <cstring>

#include "common/recent.h"
#include "sm90/plan/plan_class.h"
#include "sm90/plan/planner.h"

namespace fl::sm90 {

// Entries of the launcher's memo: more than the distinct launches a benchmark set rotates through (GPU MODE runs its
// 15 test inputs back to back; entries are taken oldest first, so 15 inputs in turn would miss every time in fewer).
constexpr int kPlanMemoEntries = 32;

template <int N>
class PlanMemo {
 public:
  const LaunchPlan& get(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count,
                        const PlanForce& force) {
    int64_t cm[kGroupsPerLaunch];
    for (int g = 0; g < groups; ++g) cm[g] = plan_m(m[g]);
    const size_t bytes = sizeof(int64_t) * groups;
    const Entry* hit = cache_.find([&](const Entry& e) {
      return e.groups == groups && e.sm_count == sm_count && e.force == force && std::memcmp(e.key, cm, bytes) == 0 &&
             std::memcmp(e.key + groups, n, bytes) == 0 && std::memcmp(e.key + 2 * groups, k, bytes) == 0;
    });
    if (hit) return hit->plan;
    ++misses_;
    Entry& e = cache_.oldest();
    plan_launch(cm, n, k, groups, sm_count, force, e.plan);
    std::memcpy(e.key, cm, bytes);
    std::memcpy(e.key + groups, n, bytes);
    std::memcpy(e.key + 2 * groups, k, bytes);
    e.groups = groups, e.sm_count = sm_count, e.force = force;
    return e.plan;
  }
  int64_t misses() const { return misses_; }

 private:
  struct Entry {
    int groups = 0, sm_count = 0;
    PlanForce force;
    int64_t key[3 * kGroupsPerLaunch];
    LaunchPlan plan;
  };
  Recent<Entry, N> cache_;
  int64_t misses_ = 0;
};

}  // namespace fl::sm90
