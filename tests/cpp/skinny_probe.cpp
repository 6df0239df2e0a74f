// Answers queries on the skinny kernel's K split (kernels/sm90/plan/skinny.h), one per line on stdin, for
// tests/test_skinny_plan.py:
//   part UNITS SPLIT LANES          -> "MOST u0:u1 u0:u1 ..." (skinny_part_units, then each part's units)
//   plan SMS SPLIT LANES G m n k .. -> "build split items ctas smem sums est_ns lanes planners" (skinny_plan with
//                                      that split and lanes per row, 0 the planner's; planners: 1 where the
//                                      planner itself may choose that plan), or "none"
//   items ITEMS CLUSTERS      -> "first:count ..." (skinny_items of each cluster, with the launcher's
//                                skinny_item_runs)
//   costs C1 .. C11           -> "ok": later plan queries use these SkinnyCosts (its fields in order; for
//                                tools/tuning/skinny_fit.py), instead of kSkinnyCosts'
//   costs                     -> kSkinnyCosts' fields, in that order
//   wins SKINNY_NS WGMMA_NS   -> "1" or "0": skinny_wins, the launcher's choice between the two estimates
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "sm90/plan/skinny.h"

int main() {
  fl::sm90::SkinnyCosts costs = fl::sm90::kSkinnyCosts;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string op;
    in >> op;
    if (op == "part") {
      int64_t units = 0;
      int split = 0, lanes = 0;
      in >> units >> split >> lanes;
      if (in.fail() || split < 1 || lanes < 1) {
        std::printf("bad query\n");
        continue;
      }
      std::printf("%lld", (long long)fl::sm90::skinny_part_units(units, split, lanes));
      for (int r = 0; r < split; ++r) {
        int64_t u0 = 0, u1 = 0;
        fl::sm90::skinny_part(units, split, lanes, r, &u0, &u1);
        std::printf(" %lld:%lld", (long long)u0, (long long)u1);
      }
      std::printf("\n");
    } else if (op == "plan") {
      int sms = 0, split = 0, lanes = 0, groups = 0;
      in >> sms >> split >> lanes >> groups;
      std::vector<int64_t> m(groups > 0 ? groups : 0), n(m.size()), k(m.size());
      for (size_t g = 0; g < m.size(); ++g) in >> m[g] >> n[g] >> k[g];
      if (in.fail() || groups < 1) {
        std::printf("bad query\n");
        continue;
      }
      fl::sm90::SkinnyPlan p;
      if (!fl::sm90::skinny_plan(m.data(), n.data(), k.data(), groups, sms, p, split, lanes, costs))
        std::printf("none\n");
      else
        std::printf("%d %d %lld %d %lld %lld %.1f %d %d\n", p.build, p.split, (long long)p.items, p.ctas,
                    (long long)p.smem, (long long)p.sums, p.est_ns, p.lanes, p.planners ? 1 : 0);
    } else if (op == "items") {
      int64_t items = 0, clusters = 0;
      in >> items >> clusters;
      if (in.fail() || clusters < 1) {
        std::printf("bad query\n");
        continue;
      }
      for (int64_t c = 0; c < clusters; ++c) {
        int64_t first = 0, count = 0;
        fl::sm90::skinny_items(c, fl::sm90::skinny_item_runs(items, clusters), &first, &count);
        std::printf("%s%lld:%lld", c ? " " : "", (long long)first, (long long)count);
      }
      std::printf("\n");
    } else if (op == "wins") {
      double skinny_ns = 0, wgmma_ns = 0;
      in >> skinny_ns >> wgmma_ns;
      if (in.fail()) {
        std::printf("bad query\n");
        continue;
      }
      std::printf("%d\n", fl::sm90::skinny_wins(skinny_ns, wgmma_ns) ? 1 : 0);
    } else if (op == "costs") {
      using fl::sm90::kNumSkinnyLanes;
      auto& c = costs;
      double* fields[fl::sm90::kSkinnyCostFields] = {
          &c.unit_base[0], &c.unit_base[1], &c.unit_per_row,    &c.issue_one, &c.issue_two, &c.smem_waves_per_ns,
          &c.bytes_per_ns[0], &c.bytes_per_ns[1], &c.cta_bytes_per_ns, &c.fixed_ns, &c.split_ns};
      static_assert(kNumSkinnyLanes == 2, "the fields above");
      double v[fl::sm90::kSkinnyCostFields];
      int got = 0;
      while (got < fl::sm90::kSkinnyCostFields && in >> v[got]) ++got;
      if (got == 0) {
        for (int i = 0; i < fl::sm90::kSkinnyCostFields; ++i) std::printf("%s%g", i ? " " : "", *fields[i]);
        std::printf("\n");
      } else if (got != fl::sm90::kSkinnyCostFields) {
        std::printf("bad query\n");
      } else {
        for (int i = 0; i < got; ++i) *fields[i] = v[i];
        std::printf("ok\n");
      }
    } else {
      std::printf("bad query\n");
    }
  }
  return 0;
}
