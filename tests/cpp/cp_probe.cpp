// Checks the critical-path fill (kernels/sm90/plan/planner.h fill_cp, which sums each CTA's end and flag as it goes)
// against the walk that defines them (cta_cp), for tests/test_unpack.py. Each line on stdin is
// "sm_count G m n k m n k ..."; the probe plans the launch as split tiles over min(SMs, steps) CTAs,
// then fills it under limits from the launch's even spread of work up to 1.3x the even cuts' critical
// path, and for each fill that fits checks every CTA with cta_cp: it ends within the limit, its flag
// (if it ends inside a tile) leaves the finisher its reads and store, and one step more (or the next
// whole tile) would not fit. The answer line is "fits F checked C" or the first "bad ..." found.
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "sm90/plan/planner.h"

namespace sm90 = fl::sm90;

namespace {

struct Walk {  // what a CTA's partners left it: their latest flag, and how many they are
  double pflag = 0;
  int parts = 0;
};

// Whether a CTA from (t, k) to (t1, k1) fits `limit` by cta_cp and the fill's flag rule.
bool fits(const sm90::LaunchPlan& p, const int64_t* tile0, const Walk& w, int64_t t, int64_t k, int64_t t1,
          int64_t k1, double limit, bool few, double* flag) {
  const double end = sm90::cta_cp(p, tile0, t, k, t1, k1, k > 0 ? w.pflag : 0, k > 0 ? w.parts : 0, few, flag);
  if (end > limit) return false;
  if (k1 == 0) return true;
  int g = 0;
  const sm90::TileCost c = sm90::tile_cost(p, tile0, t1, few, g);
  const int reads = t1 == t && k > 0 ? w.parts + 1 : 1;
  return *flag + reads * c.read + c.store <= limit;
}

// Checks fill_cp's cuts in q under `limit`; returns an empty string or what is wrong.
std::string check(const sm90::LaunchPlan& q, const int64_t* tile0, double limit, bool few) {
  Walk w;
  char buf[200];
  for (int b = 0; b < q.ctas; ++b) {
    const int64_t t = q.start_tile[b], k = q.start_k[b], t1 = q.start_tile[b + 1], k1 = q.start_k[b + 1];
    double flag = 0;  // (the fill sums in another order than cta_cp: a tolerance of 1e-9 ns either way)
    if (!fits(q, tile0, w, t, k, t1, k1, limit + 1e-9, few, &flag)) {
      std::snprintf(buf, sizeof buf, "bad cta %d (%lld,%lld)-(%lld,%lld) over %.1f", b, (long long)t, (long long)k,
                    (long long)t1, (long long)k1, limit);
      return buf;
    }
    // one step more: the next whole tile (ending at a tile end) or the next step inside the tile
    if (b + 1 < q.ctas) {
      int g = 0;
      const int64_t kst = sm90::tile_cost(q, tile0, t1, few, g).kst;
      const int64_t lo = t1 == t ? k : 0;
      double f = 0;
      bool more = false;
      limit -= 1e-9;
      if (k1 == 0) more = fits(q, tile0, w, t, k, t1 + 1, 0, limit, few, &f) ||
                          (lo + sm90::kMinPartSteps <= kst - sm90::kMinPartSteps &&
                           fits(q, tile0, w, t, k, t1, lo + sm90::kMinPartSteps, limit, few, &f));
      else if (k1 + 1 <= kst - sm90::kMinPartSteps) more = fits(q, tile0, w, t, k, t1, k1 + 1, limit, few, &f);
      if (more) {
        std::snprintf(buf, sizeof buf, "bad cta %d (%lld,%lld)-(%lld,%lld) could take one more under %.1f", b,
                      (long long)t, (long long)k, (long long)t1, (long long)k1, limit);
        return buf;
      }
      limit += 1e-9;
    }
    if (k1 > 0) {
      if (t1 == t && k > 0) w.pflag = w.pflag > flag ? w.pflag : flag, ++w.parts;
      else w.pflag = flag, w.parts = 1;
    } else {
      w = Walk{};
    }
  }
  return "";
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    int sms = 0, G = 0;
    in >> sms >> G;
    if (in.fail() || sms < 1 || G < 1 || G > sm90::kGroupsSmall) {
      std::printf("bad query\n");
      continue;
    }
    int64_t m[sm90::kGroupsSmall], n[sm90::kGroupsSmall], k[sm90::kGroupsSmall];
    for (int g = 0; g < G; ++g) in >> m[g] >> n[g] >> k[g];
    if (in.fail()) {
      std::printf("bad query\n");
      continue;
    }
    // the split plan (widest cap) as plan_launch builds it before its critical-path cut
    sm90::LaunchPlan p;
    sm90::set_groups(p, m, n, k, G, sm90::kMaxWidth, false);
    const int ctas = (int)(p.steps < sms ? p.steps : sms);
    const bool few = p.steps < sms;
    sm90::share_out(p, ctas, false, few);
    int64_t tile0[sm90::kGroupsSmall + 1];
    sm90::first_tiles(p, tile0);
    const double even = sm90::estimate_cp(p, tile0, few);
    const double work = sm90::plan_work(p);
    int fit = 0, checked = 0;
    std::string bad;
    for (int i = 0; i <= 40 && bad.empty(); ++i) {
      const double limit = work / ctas + (1.3 * even - work / ctas) * i / 40;
      sm90::LaunchPlan q = p;
      const int used = sm90::fill_cp(q, tile0, ctas, limit, few, true, work);
      ++checked;
      if (used > ctas) continue;
      q.ctas = used;
      q.start_tile[used] = (int32_t)q.tiles, q.start_k[used] = 0;
      ++fit;
      bad = check(q, tile0, limit, few);
    }
    if (!bad.empty()) std::printf("%s\n", bad.c_str());
    else std::printf("fits %d checked %d\n", fit, checked);
  }
  return 0;
}
