// Checks the planner's bound on a share's estimate (kernels/sm90/plan/planner.h share_bound), by which
// plan_launch leaves out shares that cannot beat its best plan: for every tile set the planner builds
// (each width cap, build and half tiles), share_out's est_ns over whole tiles and split tiles, on one CTA per SM
// and on `parts` CTAs per tile, is at least share_bound's. Each line on stdin is "sm_count G m n k m n k ...";
// the answer line is "ok S" (S shares checked) or the first "bad ..." found.
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "sm90/plan/planner.h"

namespace sm90 = fl::sm90;

int main() {
  std::string line;
  static sm90::LaunchPlan p;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    int sms = 0, groups = 0;
    in >> sms >> groups;
    int64_t m[sm90::kGroupsPerLaunch], n[sm90::kGroupsPerLaunch], k[sm90::kGroupsPerLaunch];
    bool ok = sms >= 1 && sms <= sm90::kMaxCtas && groups >= 1 && groups <= sm90::kGroupsPerLaunch;
    for (int g = 0; ok && g < groups; ++g)
      ok = static_cast<bool>(in >> m[g] >> n[g] >> k[g]) && m[g] >= 1 && n[g] >= 1 && k[g] >= 64 && k[g] % 64 == 0;
    if (!ok) {
      std::printf("bad query\n");
      continue;
    }
    std::string bad;
    int checked = 0;
    for (int half = 0; half <= 1 && bad.empty(); ++half)
      for (int i = 0; i < sm90::kNumWidths && bad.empty(); ++i)
        for (int build = 0; build < sm90::kNumBuilds && bad.empty(); ++build) {
          if (half && build != sm90::kBuildMain) continue;
          sm90::set_groups(p, m, n, k, groups, sm90::kWidths[i], half, build);
          for (int whole = 1; whole >= 0 && bad.empty(); --whole) {
            if (half && !whole) continue;
            const int64_t units = whole ? p.tiles : p.steps;
            for (int64_t ctas = units < sms ? units : sms; ctas >= 1 && bad.empty();) {
              const double bound = sm90::share_bound(p, ctas, whole);
              sm90::share_out(p, (int)ctas, whole, ctas < sms);
              ++checked;
              if (p.est_ns < bound) {
                char buf[200];
                std::snprintf(buf, sizeof buf, "bad: width %d build %d half %d whole %d ctas %lld: est %.6f < bound %.6f",
                              sm90::kWidths[i], build, half, whole, (long long)ctas, p.est_ns, bound);
                bad = buf;
              }
              // split tiles on fewer CTAs, `parts` per tile, as plan_launch tries them
              const int64_t next = whole ? 0 : (ctas / p.tiles - 1) * p.tiles;
              ctas = next >= 2 * p.tiles ? next : 0;
            }
          }
        }
    if (bad.empty()) std::printf("ok %d\n", checked);
    else std::printf("%s\n", bad.c_str());
  }
  return 0;
}
