// The sm_90a planner: each group's tiles, the launch order, and how a launch's K steps are shared out
// among its CTAs (whole tiles, stream-K split tiles, half tiles, split-K reduced tiles), by the estimates of
// cost_model.h. Plain C++ with no CUDA types, so the CPU tests reach it (fastlaunch._C.plan) without a GPU.
#pragma once
#include <cstdint>

#include "sm90/plan/cost_model.h"
#include "sm90/plan/geometry.h"
#include "sm90/plan/row_schedule.h"

namespace fl::sm90 {

// One group's tiles: `chunks` tiles of `width` A rows along M, tiles_n along N, each estimated
// at `tile_ns`; mma_n: the wgmma's N (the width, or a narrower N of it in plans of the narrow or mid build).
struct GroupTiles {
  int width;
  int64_t chunks, tiles_n, kst;  // kst: K steps per tile
  int64_t m;                     // the group's A rows (the last chunk's tiles may have fewer than width)
  double step_ns, tile_ns;
  int mma_n;
};

// The widest tiles of at most `cap` rows (a compiled width) that cut M evenly; `half`: half tiles;
// `build`: the kernel build (kBuildNarrow / kBuildMid: the wgmma N build_n gives; not with half tiles).
inline GroupTiles group_tiles(int64_t m, int64_t n, int64_t k, int cap, bool half = false, int build = kBuildMain) {
  const int64_t c = ceil_div(m, cap);
  const int w = fit_width(ceil_div(m, c));
  const int64_t kst = k / kBlockK;
  if (half)
    return {w, c, ceil_div(n, kHalfBlockN), kst, m, step_ns(w),
            (double)ceil_div(kst, 2) * step_ns(w) + epilogue_ns(w, n, true) + kHalfAddNs, w};
  // the group's first tile holds min(m, w) rows (tiles start at chunk x w): every tile must fit N
  const int mn = build_n(build, w, m < w ? m : w);
  const double step = build_step_ns(w, mn);
  return {w, c, tiles_n(n), kst, m, step, (double)kst * step + epilogue_ns(w, n), mn};
}

// How a launch's work is shared out (stream-K): the tiles in the plan's order, each tile's K steps in
// order, make one sequence of steps; CTA b takes the steps from start b up to start b + 1, cut so that
// every CTA gets the same estimated time. A tile cut between CTAs is a split tile: the CTA holding
// its last step adds the other parts' fp32 sums (written to the workspace by the CTAs holding them,
// all of lower index) before it stores C. A CTA takes its steps from the last tile backwards, so it
// writes the partial sums of its last tile first and reads the others' at its end.
constexpr int64_t kMinPartSteps = 2;  // no part of a split tile is shorter than this (cuts snap to the tile's ends)

// Reduced tiles (split-K with a reduction kernel; launches of up to kGroupsSmall groups with few tiles and a
// long K; a GEMM kernel of their own, then a third kernel): every tile's K steps cut into `parts` shares of
// about equal length, one per CTA (tiles with fewer K steps: one per step), each storing its partial sums (the
// valid halves, as a split tile's part); then the reduce kernel (reduce.cuh) sums each tile's parts and stores
// C, spread over many CTAs. No CTA waits for another, so a tile may be cut into many parts, where a split
// tile's finishing CTA reads the other parts one after the other.

// What experiments and tests force on the planner (FASTLAUNCH_SM90_WCAP, _SHARE, _HALF, ...), and what the
// masked form rules out (half tiles, reduced tiles and the mid build: its kernels have none); all 0: the
// planner's own choice.
struct PlanForce {
  int cap = 0;    // the widest tile (a compiled width)
  int share = 0;  // 1 whole tiles only, 2 split tiles only, 3 reduced tiles (below), 4 wave plans (below)
  int parts = 0;  // with split tiles only: min(parts x tiles, steps, SMs) CTAs instead of one per SM
  int half = 0;   // 1 half tiles only (where a launch may take them), 2 never
  int narrow = 0; // 1 the narrow build for every plan but half and reduced tiles, 2 never
  int mid = 0;    // 1 the mid build for every plan but half and reduced tiles where it fits (mid_fits), 2 never
  int reduce = 0; // 2 never reduced tiles (share 3 then takes the planner's choice of the others)
  int wave = 0;   // 2 never a wave plan (share 4 then takes the planner's choice of the others)
  // share 3: reduced tiles only where a launch may take them (else the planner's choice), `parts` per
  // tile (0: the planner's number)
  bool operator==(const PlanForce& o) const {
    return cap == o.cap && share == o.share && parts == o.parts && half == o.half && narrow == o.narrow &&
           mid == o.mid && reduce == o.reduce && wave == o.wave;
  }
};

// A launch's plan: every group's tiles (groups by tile cost, costliest first), and each CTA's share.
struct LaunchPlan {
  int groups = 0;
  int64_t tiles = 0;
  int64_t steps = 0;       // K steps of all tiles
  int ctas = 0;            // the grid
  int splits = 0;          // cuts inside a tile (shares that end inside one: each writes partial sums)
  bool half = false;       // half tiles (kHalfBlockN B rows; whole tiles only)
  int build = kBuildMain;  // the kernel build (kBuildNarrow, kBuildMid: GroupTiles::mma_n)
  int reduce = 0;          // reduced tiles: the parts per tile (0: none)
  bool wave = false;       // a wave plan (share_wave): tile t runs on CTA t mod ctas; no start arrays
  double est_ns = 0;       // estimated time of the busiest CTA
  int order[kGroupsPerLaunch];        // launch order -> group index (launch-local)
  GroupTiles group[kGroupsPerLaunch];  // by group index
  // CTA b's steps: from (start_tile[b], start_k[b]) up to, not including, (start_tile[b + 1], start_k[b + 1]);
  // start b = 0 is (0, 0), start `ctas` is (tiles, 0).
  int32_t start_tile[kMaxCtas + 1];
  int32_t start_k[kMaxCtas + 1];
};

// Positions in a plan's step sequence: walks groups in launch order (positions only grow).
struct StepWalk {
  const LaunchPlan& p;
  int i = 0;                      // launch-order index of the current group
  int64_t step0 = 0, tile0 = 0;   // the group's first step and first tile
  double cost0 = 0;               // estimated time before the group's first step
  explicit StepWalk(const LaunchPlan& plan) : p(plan) {}
  const GroupTiles& g() const { return p.group[p.order[i]]; }
  int64_t kst() const { return g().kst; }
  int64_t tiles() const { return g().chunks * g().tiles_n; }
  bool next() {  // to the next group; false at the end
    if (i + 1 >= p.groups) return false;
    step0 += tiles() * kst(), tile0 += tiles(), cost0 += (double)tiles() * g().tile_ns, ++i;
    return true;
  }
};

// Moves `w` on to tile t's group (t at or after its current group's first tile).
inline void walk_to(StepWalk& w, int64_t t) {
  while (t >= w.tile0 + w.tiles() && w.next()) {
  }
}

// The steps before tile boundary or cut `(t, k)`'s estimated time: each whole tile before it (its
// steps and epilogue), then k steps of tile t; `w` is moved on to t's group.
inline double cost_at(StepWalk& w, int64_t t, int64_t k) {
  walk_to(w, t);
  return w.cost0 + (double)(t - w.tile0) * w.g().tile_ns + (double)k * w.g().step_ns;
}

// Tile t's valid A rows and its width (the kernel's decode_tile: a group's tiles run along M fastest).
struct TileRows {
  int64_t rows;
  int width;
};
// ... for the group's tile `local` (its index among the group's tiles)
inline TileRows group_tile_rows(const GroupTiles& g, int64_t local) {
  const int64_t m0 = (local % g.chunks) * g.width;
  return {g.m - m0 < g.width ? g.m - m0 : g.width, g.width};
}
// ... with `w` at tile t's group
inline TileRows tile_rows_at(const StepWalk& w, int64_t t) { return group_tile_rows(w.g(), t - w.tile0); }

// Whole tiles: consecutive tiles into CTAs, each filled up to `limit` ns; returns the CTAs used
// (more than `ctas`: does not fit) and, if `write`, sets start_tile (start_k 0) of each.
// A CTA that starts a group's tile run empty takes `fresh` tiles (the limit over the tile's cost) and
// then finds room for `after` more (none, but for rounding): such CTAs are counted in one step, not
// walked, where after <= 0 (the same cuts as walking them).
inline int fill_whole(LaunchPlan& p, int ctas, double limit, bool write) {
  int b = 0;
  double load = 0;
  int64_t tile = 0;
  for (int i = 0; i < p.groups; ++i) {
    const GroupTiles& g = p.group[p.order[i]];
    const int64_t fresh = (int64_t)(limit / g.tile_ns);  // tiles that fit an empty CTA
    const double full = (double)fresh * g.tile_ns;      // its load after them
    const int64_t after = fresh > 0 ? (int64_t)((limit - full) / g.tile_ns) : 0;
    for (int64_t left = g.chunks * g.tiles_n; left > 0;) {
      if (load == 0 && fresh > 0 && after <= 0 && left >= fresh) {
        // CTAs of `fresh` tiles each; each closes when the next tile does not fit, but the last stays
        // open when it takes the group's last tile (the next group may fit beside it)
        const int64_t n = left / fresh, rest = left % fresh, closes = rest ? n : n - 1;
        if (b + closes >= ctas) return ctas + 1;
        for (int64_t j = 1; write && j <= closes; ++j)
          p.start_tile[b + j] = (int32_t)(tile + j * fresh), p.start_k[b + j] = 0;
        b += (int)closes, tile += n * fresh, left = rest;
        load = rest ? 0 : full;
        continue;
      }
      const int64_t fit = (int64_t)((limit - load) / g.tile_ns);
      if (fit <= 0) {
        if (load == 0) return ctas + 1;  // one tile is over the limit
        if (++b >= ctas) return ctas + 1;
        if (write) p.start_tile[b] = (int32_t)tile, p.start_k[b] = 0;
        load = 0;
        continue;
      }
      const int64_t take = fit < left ? fit : left;
      load += (double)take * g.tile_ns, tile += take, left -= take;
    }
  }
  return b + 1;
}

// The critical path of split tiles: a CTA that finishes a split tile reads its partners' partial sums only
// once their flags are up, and a partner raises its flag after its next unit's K loop (its units run from its
// last tile backwards), or at its end if it has no other unit (a middle part of a tile). So a finishing CTA
// ends at the later of its own work and its latest partner's flag, plus the reads (kPartReadCpNs each) and the
// store: traces of benchmark 3 (tools/tuning/cta_balance.py) follow this within ~0.4 us per CTA (standard
// deviation) where the even cuts' estimate is off by up to 6 us.
constexpr int64_t kMaxCpSteps = int64_t{1} << 18;  // launches of more steps keep the even cuts (cost of planning)

// The launch-order groups' first tiles: tile0[i] for i <= p.groups (the last p.tiles).
inline void first_tiles(const LaunchPlan& p, int64_t* tile0) {
  tile0[0] = 0;
  for (int i = 0; i < p.groups; ++i) tile0[i + 1] = tile0[i] + p.group[p.order[i]].chunks * p.group[p.order[i]].tiles_n;
}

// The estimated time of every tile of the plan: all its steps and stores.
inline double plan_work(const LaunchPlan& p) {
  double work = 0;
  for (int i = 0; i < p.groups; ++i) work += (double)(p.group[i].chunks * p.group[i].tiles_n) * p.group[i].tile_ns;
  return work;
}

// A tile's costs for the critical path: its width, K steps, a step, its store, a part's write and read.
struct TileCost {
  int64_t kst;
  double step, store, write, read;
};
// tile0: the launch-order groups' first tiles (p.groups + 1 entries, the last p.tiles); `g`: a guess at
// tile t's group in launch order (the walks below go tile by tile), set to it.
inline TileCost tile_cost(const LaunchPlan& p, const int64_t* tile0, int64_t t, bool few, int& g) {
  if (t < tile0[g] || t >= tile0[g + 1]) {  // the group of tile t: tile0[lo] <= t < tile0[lo + 1]
    int lo = 0, hi = p.groups;
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      (tile0[mid] <= t ? lo : hi) = mid;
    }
    g = lo;
  }
  const GroupTiles& gt = p.group[p.order[g]];
  const int64_t rows = group_tile_rows(gt, t - tile0[g]).rows;
  return {gt.kst, gt.step_ns, gt.tile_ns - (double)gt.kst * gt.step_ns, part_write_ns(few, rows, gt.width),
          few ? part_read_ns(few, rows, gt.width) : kPartReadCpNs};
}

// The critical-path end of a CTA holding the steps from (t0, k0) up to (t1, k1), whose partners (if it
// starts inside a tile) raise their flags by `pflag`, `parts` of them; `flag`: when its own handed-over
// sums are readable (if it ends inside a tile).
inline double cta_cp(const LaunchPlan& p, const int64_t* tile0, int64_t t0, int64_t k0, int64_t t1, int64_t k1,
                     double pflag, int parts, bool few, double* flag) {
  double t = 0;
  bool pending = false;
  int g = 0;
  *flag = 0;
  for (int64_t tt = k1 > 0 ? t1 : t1 - 1; tt >= t0; --tt) {
    const TileCost c = tile_cost(p, tile0, tt, few, g);
    const int64_t lo = tt == t0 ? k0 : 0, hi = tt == t1 && k1 > 0 ? k1 : c.kst;
    t += (double)(hi - lo) * c.step;
    if (pending) *flag = t, pending = false;
    if (hi < c.kst) {
      t += c.write, pending = true;
      continue;
    }
    if (lo > 0 && parts > 0) t = (t > pflag ? t : pflag) + parts * c.read;
    t += c.store;
  }
  if (pending) *flag = t;
  return t;
}

// The busiest CTA of p's shares on the critical path.
inline double estimate_cp(const LaunchPlan& p, const int64_t* tile0, bool few) {
  double busiest = 0, pflag = 0;
  int parts = 0;
  for (int b = 0; b < p.ctas; ++b) {
    const int64_t t0 = p.start_tile[b], k0 = p.start_k[b], t1 = p.start_tile[b + 1], k1 = p.start_k[b + 1];
    double flag = 0;
    const double end = cta_cp(p, tile0, t0, k0, t1, k1, k0 > 0 ? pflag : 0, k0 > 0 ? parts : 0, few, &flag);
    if (end > busiest) busiest = end;
    if (k1 > 0) {  // its partners for the next CTA: those of this tile so far, and this one
      if (t1 == t0 && k0 > 0) pflag = pflag > flag ? pflag : flag, ++parts;
      else pflag = flag, parts = 1;
    }
  }
  return busiest;
}

// Split tiles cut for the critical path: CTAs filled in order, each to the furthest end at which it ends
// within `limit` and, where it ends inside a tile, its flag leaves the tile's finisher time for its reads
// and store within `limit` (no part shorter than kMinPartSteps, and none that leaves fewer): whole tiles
// while they fit, then the furthest step inside the next one (a binary search: the end and the flag
// only grow with the steps). A CTA's end and flag are cta_cp's, summed as the fill goes (its units run
// from its last tile backwards, so its first tile's unit, the only one that may wait, runs last).
// Returns the CTAs used (more than `ctas`: the limit does not fit); if `write`, sets their starts.
// `work`: the launch's steps and stores (every CTA ends after its own, so the fill stops as soon as the
// work left does not fit the CTAs left).
inline int fill_cp(LaunchPlan& p, const int64_t* tile0, int ctas, double limit, bool few, bool write, double work) {
  int b = 0, parts = 0, g = 0;
  int64_t t = 0, k = 0;
  double pflag = 0;
  while (t < p.tiles) {
    if (b >= ctas || work > limit * (ctas - b) * (1 + 1e-9)) return ctas + 1;
    const TileCost c0 = tile_cost(p, tile0, t, few, g);
    const bool wait = k > 0 && parts > 0;  // it finishes its first tile after its partners' flags
    const double first = (double)(c0.kst - k) * c0.step;
    // the CTA's end, given its time up to its first tile's reads
    auto end_at = [&](double x) { return (wait ? (x > pflag ? x : pflag) + parts * c0.read : x) + c0.store; };
    double later = 0, prev = first;  // the whole tiles after the first so far; the last one's steps
    int64_t bt = -1, bk = 0;
    double bflag = 0, bstep = 0;  // (ending inside tile bt: its flag, its step's cost)
    for (int64_t tt = t; tt < p.tiles; ++tt) {
      const TileCost c = tt == t ? c0 : tile_cost(p, tile0, tt, few, g);
      const double steps = tt == t ? first : (double)c.kst * c.step;
      const double with = tt == t ? 0 : later + steps + c.store;
      if (end_at(with + first) <= limit) {  // to the tile's end
        bt = tt + 1, bk = 0, later = with, prev = steps;
        continue;
      }
      // inside tile tt: the largest step count whose end and flag fit (a part that ends inside a tile
      // raises its flag after the next unit's steps; one that is all inside its first tile, at its end)
      const int64_t lo = tt == t ? k : 0;
      const int reads = tt == t && k > 0 ? parts + 1 : 1;
      auto fits = [&](int64_t ck, double* f) {
        const double own = (double)(ck - lo) * c.step + c.write;
        const double end = tt == t ? own : end_at(own + later + first);
        *f = tt == t ? own : own + prev;
        return end <= limit && *f + reads * c.read + c.store <= limit;
      };
      int64_t good = -1, a = lo + kMinPartSteps, z = c.kst - kMinPartSteps;
      double flag = 0;
      while (a <= z) {
        const int64_t mid = (a + z) / 2;
        if (fits(mid, &flag)) good = mid, a = mid + 1;
        else z = mid - 1;
      }
      if (good >= 0) {
        fits(good, &flag);
        bt = tt, bk = good, bflag = flag, bstep = c.step;
      }
      break;
    }
    if (bt < 0) return ctas + 1;
    // the share's steps and stores off the work left
    if (bk > 0 && bt == t) {
      work -= (double)(bk - k) * c0.step;
    } else {
      work -= first + c0.store + later;
      if (bk > 0) work -= (double)bk * bstep;
    }
    if (bk > 0) {
      if (bt == t && k > 0) pflag = pflag > bflag ? pflag : bflag, ++parts;
      else pflag = bflag, parts = 1;
    } else {
      pflag = 0, parts = 0;
    }
    t = bt, k = bk, ++b;
    if (write) p.start_tile[b] = (int32_t)t, p.start_k[b] = (int32_t)k;
  }
  return b;
}

// Replaces p's even split cuts by fill_cp's under the smallest limit that fits, where that is at least 1%
// under the even cuts' critical path; p's est_ns (what plans of other kinds are compared with) stays the
// even cuts'.
inline void cut_for_critical_path(LaunchPlan& p, bool few) {
  if (p.steps > kMaxCpSteps) return;
  int64_t tile0[kGroupsPerLaunch + 1];
  first_tiles(p, tile0);
  const double even = estimate_cp(p, tile0, few);
  const int ctas = p.ctas;
  // no limit under the launch's steps and stores spread evenly over its CTAs fits (every CTA ends after
  // its own steps and stores, and every tile is stored once)
  const double work = plan_work(p);
  const double least = work / ctas * (1 - 1e-9);
  // the smallest limit, in steps of 1% of the even cuts' critical path from 70% (or the least above) up
  // to 99%, under which the fill fits (a larger limit can fail where a smaller one fits: the fill is
  // greedy, so the scan stops at the first that fits, not at the first that fails)
  double hi = 0;
  for (int pct = 70; pct <= 99 && hi == 0; ++pct)
    if (even * pct / 100 >= least && fill_cp(p, tile0, ctas, even * pct / 100, few, false, work) <= ctas)
      hi = even * pct / 100;
  if (hi == 0) return;  // the even cuts stay
  p.ctas = fill_cp(p, tile0, ctas, hi, few, true, work);
  p.start_tile[p.ctas] = (int32_t)p.tiles, p.start_k[p.ctas] = 0;
  p.splits = 0;
  for (int b = 1; b <= p.ctas; ++b) p.splits += p.start_k[b] > 0;
}

// Cuts the plan's steps into at most `ctas` shares (split tiles) of about equal estimated time, or
// (`whole`) into consecutive whole tiles with the smallest busiest share; fills ctas,
// start_tile/start_k, splits and est_ns (with the partial sums' costs: `few`, fewer CTAs than SMs).
// ctas <= steps.
inline void share_out(LaunchPlan& p, int ctas, bool whole, bool few = false) {
  const double total = plan_work(p);
  double longest = 0;
  for (int i = 0; i < p.groups; ++i)
    if (p.group[i].tile_ns > longest) longest = p.group[i].tile_ns;
  p.start_tile[0] = 0, p.start_k[0] = 0;
  if (whole) {
    // the smallest limit (binary search) under which a greedy fill needs at most `ctas` CTAs
    double lo = longest > total / ctas ? longest : total / ctas, hi = total / ctas + longest;
    if (fill_whole(p, ctas, lo, false) > ctas) {
      for (int i = 0; i < 48 && hi - lo > 1; ++i) {
        const double mid = (lo + hi) / 2;
        (fill_whole(p, ctas, mid, false) <= ctas ? hi : lo) = mid;
      }
      lo = hi;
    }
    ctas = fill_whole(p, ctas, lo, true);
  } else {
    // w: at the target's group; v: at the cut's, which may trail w (a cut held back to leave a step for
    // each later CTA falls, in a last group of short tiles, into the group before). Cuts only grow, so
    // both walks only move on.
    StepWalk w(p), v(p);
    int64_t prev = 0;  // the previous cut as a global step
    for (int b = 1; b < ctas; ++b) {
      const double target = total * b / ctas;
      while (target >= w.cost0 + (double)w.tiles() * w.g().tile_ns && w.next()) {
      }
      const double into = target - w.cost0;
      int64_t j = (int64_t)(into / w.g().tile_ns);  // tile of the group
      if (j >= w.tiles()) j = w.tiles() - 1;
      const int64_t kst = w.kst();
      int64_t k = (int64_t)((into - (double)j * w.g().tile_ns) / w.g().step_ns + 0.5);
      if (k > kst) k = kst;
      if (k < kMinPartSteps) k = 0;
      if (kst - k < kMinPartSteps) k = kst;
      // as a global step, at least one past the previous cut, leaving one for each later CTA
      int64_t at = w.step0 + j * kst + k;
      const int64_t last = p.steps - (ctas - b);
      if (at <= prev) at = prev + 1;
      if (at > last) at = last;
      prev = at;
      // global step -> (tile, k)
      while (at >= v.step0 + v.tiles() * v.kst() && v.next()) {
      }
      p.start_tile[b] = (int32_t)(v.tile0 + (at - v.step0) / v.kst());
      p.start_k[b] = (int32_t)((at - v.step0) % v.kst());
    }
  }
  p.ctas = ctas;
  p.start_tile[ctas] = (int32_t)p.tiles, p.start_k[ctas] = 0;
  // estimated time of each CTA: its steps and tile ends, the partial sums it writes (a share that ends
  // inside a tile) and those it reads (a share that starts inside a tile and finishes it: one per
  // CTA before it that ends inside that tile)
  p.splits = 0, p.est_ns = 0;
  double begin = 0;          // cost_at the share's start (0 for the first): the previous share's end
  StepWalk ends(p), own(p);  // at the shares' ends, at their first tiles (both only move on)
  for (int b = 0; b < ctas; ++b) {
    const double end = cost_at(ends, p.start_tile[b + 1], p.start_k[b + 1]);
    double t = end - begin;
    begin = end;
    if (p.start_k[b + 1] > 0) {
      const TileRows r = tile_rows_at(ends, p.start_tile[b + 1]);
      t += part_write_ns(few, r.rows, r.width), ++p.splits;
    }
    if (p.start_k[b] > 0 && p.start_tile[b + 1] > p.start_tile[b]) {
      walk_to(own, p.start_tile[b]);
      const TileRows r = tile_rows_at(own, p.start_tile[b]);
      const double read = part_read_ns(few, r.rows, r.width);
      for (int c = b - 1; c >= 0 && p.start_tile[c + 1] == p.start_tile[b] && p.start_k[c + 1] > 0; --c) t += read;
    }
    if (t > p.est_ns) p.est_ns = t;
  }
}

// A bound under share_out(p, ctas, whole)'s est_ns (just under, for rounding): the plan's work over `ctas`
// and, for whole tiles, its longest tile.
inline double share_bound(const LaunchPlan& p, int64_t ctas, bool whole) {
  double bound = plan_work(p) / (double)ctas;
  for (int i = 0; whole && i < p.groups; ++i)
    if (p.group[i].chunks * p.group[i].tiles_n > 0 && p.group[i].tile_ns > bound) bound = p.group[i].tile_ns;
  return bound * (1 - 1e-9);
}

// Reduced tiles (cost_model.h kReduceNs): each tile's steps in min(parts, its K steps) shares, one CTA each,
// the tiles' CTAs in tile order, so every tile of a group has as many (the launcher records each group's
// first CTA, Group::cta0, where the reduce kernel finds a tile's parts); fills ctas, start_tile/start_k,
// splits (every CTA stores partial sums) and est_ns. reduce_ctas(p, parts) <= kMaxCtas.
inline int64_t tile_parts(int64_t parts, int64_t kst) { return parts < kst ? parts : kst; }
inline int64_t reduce_ctas(const LaunchPlan& p, int64_t parts) {
  int64_t ctas = 0;
  for (int g = 0; g < p.groups; ++g)
    ctas += p.group[g].chunks * p.group[g].tiles_n * tile_parts(parts, p.group[g].kst);
  return ctas;
}
inline void share_reduce(LaunchPlan& p, int64_t parts) {
  StepWalk w(p);
  int b = 0;
  double busiest = 0, kb = 0;
  for (int64_t t = 0; t < p.tiles; ++t) {
    walk_to(w, t);
    const TileRows r = tile_rows_at(w, t);
    const int64_t kst = w.kst(), n = tile_parts(parts, kst);
    kb += (double)(n * part_rows(r.rows, r.width) * kBlockN * 4) / 1024;
    for (int64_t i = 0; i < n; ++i, ++b) {
      p.start_tile[b] = (int32_t)t, p.start_k[b] = (int32_t)(kst * i / n);
      const int64_t steps = kst * (i + 1) / n - kst * i / n;
      const double ns = (double)steps * w.g().step_ns + part_write_ns(true, r.rows, r.width);
      if (ns > busiest) busiest = ns;
    }
  }
  p.ctas = b;
  p.start_tile[b] = (int32_t)p.tiles, p.start_k[b] = 0;
  p.splits = b;
  p.reduce = (int)parts;
  p.est_ns = busiest + kReduceNs + kReduceNsPerKB * kb;
}

// Wave plans: whole tiles handed out round-robin, tile t to CTA t mod ctas, each CTA's tiles in order, and a
// group's tiles numbered along N fastest (Tile decode in kernels/sm90/stream_k.cuh). The CTAs running at one
// time then hold consecutive tiles: a band of a few M chunks of one group against all its B blocks, which L2
// keeps while the band's CTAs read them. The stream-K shares give each CTA a contiguous run of tiles, so the
// CTAs running at one time read A chunks of every group at once: past L2's size, each tile reads its A from
// DRAM again (8 groups x 2048 rows x 4096 x 7168: ~9 GB moved for ~0.5 GB of operands). The order is computed
// on the device from the tile count alone, so the same walk serves sizes known only there.
// Fills ctas (min(tiles, ctas)), est_ns (the busiest CTA's tiles), start arrays (CTA b's first tile, b; read by
// no kernel) and no splits. The main build only (its kernels alone compile the walk).
inline void share_wave(LaunchPlan& p, int ctas) {
  if (ctas > p.tiles) ctas = (int)p.tiles;
  double load[kMaxCtas] = {};
  int64_t t0 = 0;
  for (int i = 0; i < p.groups; ++i) {
    const GroupTiles& g = p.group[p.order[i]];
    const int64_t n = g.chunks * g.tiles_n, full = n / ctas, rest = n % ctas;
    const int first = (int)(t0 % ctas);
    if (full)
      for (int b = 0; b < ctas; ++b) load[b] += (double)full * g.tile_ns;
    for (int64_t j = 0; j < rest; ++j) load[(first + j) % ctas] += g.tile_ns;
    t0 += n;
  }
  p.est_ns = 0;
  for (int b = 0; b < ctas; ++b) {
    if (load[b] > p.est_ns) p.est_ns = load[b];
    p.start_tile[b] = b, p.start_k[b] = 0;
  }
  p.ctas = ctas;
  p.start_tile[ctas] = (int32_t)p.tiles, p.start_k[ctas] = 0;
  p.splits = 0;
  p.wave = true;
}

// Where the planner takes a wave plan by itself: the launch's fp16 A (as tiled: chunks x width rows of each group)
// is over kWaveA16Bytes, so the stream-K shares' CTAs cannot find one another's A chunks in L2, and the wave plan's
// estimate is within kWaveSlack of the best other plan's (the estimates know nothing of L2: the wave plan's only
// loss they see is its last wave's idle CTAs). On an H100, N 4096, K 7168, 1 x 4096 to 8 x 2048 rows, stream-K
// plans past that size ran 1.3-2.6x their estimates and wave plans 0.94-0.98x theirs, so a wave plan up to 1.25x
// a stream-K plan's estimate is still the faster. Class-invariant (kernels/sm90/plan/plan_class.h): tiled rows.
constexpr double kWaveA16Bytes = (double)kRowWaveA16Bytes;  // (the masked form's device schedule uses the same two)
constexpr double kWaveSlack = (double)kRowWaveSlackNum / kRowWaveSlackDen;
inline double tiled_a16_bytes(const LaunchPlan& p) {
  double bytes = 0;
  for (int g = 0; g < p.groups; ++g)
    bytes += (double)(p.group[g].chunks * p.group[g].width) * (double)(p.group[g].kst * kBlockK) * 2;
  return bytes;
}

// A plan's groups before it is shared out: each group's widest even tiles under `cap` (half: half
// tiles), their tiles and K steps in all, and the launch order (by tile cost, costliest first; equal
// costs keep group order).
inline void set_groups(LaunchPlan& p, const int64_t* m, const int64_t* n, const int64_t* k, int groups, int cap,
                       bool half, int build = kBuildMain) {
  p.groups = groups;
  p.half = half;
  p.build = build;
  p.tiles = p.steps = 0;
  p.wave = false;
  for (int g = 0; g < groups; ++g) {
    p.group[g] = group_tiles(m[g], n[g], k[g], cap, half, build);
    p.tiles += p.group[g].chunks * p.group[g].tiles_n;
    p.steps += p.group[g].chunks * p.group[g].tiles_n * (k[g] / kBlockK);
    int at = g;  // insertion sort
    while (at > 0 && p.group[p.order[at - 1]].tile_ns < p.group[g].tile_ns) {
      p.order[at] = p.order[at - 1];
      --at;
    }
    p.order[at] = g;
  }
}

// Whether a plan's groups run any wgmma narrower than their tiles.
inline bool narrower(const LaunchPlan& p) {
  for (int g = 0; g < p.groups; ++g)
    if (p.group[g].mma_n < p.group[g].width) return true;
  return false;
}

// Whether the mid build can run a plan: every tile of the widest width at wgmma N = kMidN (its only N
// there), and some such tile.
inline bool mid_fits(const LaunchPlan& p) {
  bool some = false;
  for (int g = 0; g < p.groups; ++g) {
    if (p.group[g].width != kMaxWidth) continue;
    if (p.group[g].mma_n != kMidN) return false;
    some = true;
  }
  return some;
}

// Whether plan_launch plans on build `build`: half tiles on the main build only; else a forced build alone
// (the mid build where `mid_only`, force.mid 1 and it fits; else the narrow build where force.narrow is 1),
// or every build not forced off (force.narrow, force.mid 2).
inline bool build_tried(int build, const PlanForce& force, bool half, bool mid_only) {
  if (half) return build == kBuildMain;
  if (mid_only) return build == kBuildMid;
  if (force.narrow == 1) return build == kBuildNarrow;
  return !(build == kBuildNarrow && force.narrow == 2) && !(build == kBuildMid && force.mid == 2);
}

// The plan for a launch of `groups` groups (sizes m, n, k each) on `sm_count` SMs: for every cap
// on the tile width (each compiled width, widest first; only `force.cap` if it is not 0), each group's
// widest even tiles under it, groups ordered by tile cost, then the steps shared out over the CTAs
// (split tiles) or cut at tile boundaries only (whole tiles); the lowest estimate wins, ties to the
// wider cap and to whole tiles; split tiles over one CTA per SM, or `parts` CTAs per tile where that makes
// fewer. Launches of up to kGroupsSmall groups may also take half tiles (whole
// only), if their estimate is lower still. `force`: the experiments' and tests' settings (PlanForce).
inline void plan_launch(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count,
                        const PlanForce& force, LaunchPlan& out) {
  LaunchPlan cand;
  double best = 0;
  bool have = false;
  const int64_t most = sm_count < kMaxCtas ? sm_count : kMaxCtas;
  bool may_half = groups <= kGroupsSmall && force.share != 2 && force.half != 2;
  int64_t half_tiles = 0;  // the most half tiles (narrowest width): within the launch's tile limit
  for (int g = 0; may_half && g < groups; ++g) {
    half_tiles += ceil_div(m[g], kWidths[0]) * ceil_div(n[g], kHalfBlockN);
    if (half_tiles > kMaxTilesPerLaunch) may_half = false;
  }
  const int first_kind = may_half && force.half == 1 && force.share != 3 ? 1 : 0,
            last_kind = may_half && force.share != 3 ? 1 : 0;  // 1: half tiles
  // reduced tiles: launches of up to kGroupsSmall groups (a GEMM kernel of their own)
  const bool may_reduce = groups <= kGroupsSmall && force.half != 1 && force.reduce != 2;
  bool reduced = false;  // force.share 3: a reduced plan taken (no other kind replaces it)
  LaunchPlan wave;       // the best wave plan (share_wave), if any
  bool have_wave = false;
  for (int kind = first_kind; kind <= last_kind; ++kind) {
    const bool half = kind == 1;
    for (int i = kNumWidths - 1; i >= 0; --i) {
      const int cap = kWidths[i];
      if (force.cap && cap != force.cap) continue;
      // the narrow and mid builds (not for half or reduced tiles) where a group's tiles take a narrower
      // wgmma; forced (force.narrow, force.mid 1): only that build where it may run the plan
      bool mid_only = false;
      if (force.mid == 1 && !half) {
        set_groups(cand, m, n, k, groups, cap, half, kBuildMid);
        mid_only = mid_fits(cand);
      }
      for (int build = 0; build < kNumBuilds; ++build) {
        if (!build_tried(build, force, half, mid_only)) continue;
        set_groups(cand, m, n, k, groups, cap, half, build);
        if (build == kBuildNarrow && force.narrow != 1 && !narrower(cand)) continue;  // the same plan as without
        if (build == kBuildMid && !mid_fits(cand)) continue;  // a tile the build cannot run, or none it speeds
        const bool nar = build != kBuildMain;  // (reduced tiles: the main build only)
        if (!half && build == kBuildMain && force.wave != 2 && force.share != 1 && force.share != 2 &&
            force.share != 3) {
          share_wave(cand, (int)most);
          if (!have_wave || cand.est_ns < wave.est_ns * 0.999) wave = cand, have_wave = true;
          cand.wave = false;
        }
        for (int whole = 1; whole >= 0; --whole) {
          // (share 3 forces reduced tiles where allowed; these plans stay the fallback)
          if ((force.share == 1 || force.share == 2) && force.share != 2 - whole) continue;
          if (half && !whole) continue;
          int64_t units = whole ? cand.tiles : cand.steps;
          if (!whole && force.parts > 0 && force.parts * cand.tiles < units) units = force.parts * cand.tiles;
          // A share's estimate is at least the plan's work over its CTAs (the shares cut that work; partial
          // sums, half tiles' load only add), whole tiles' at least the longest tile, and fewer CTAs (the
          // parts below) only raise it: where that bound cannot beat the best plan, neither can these shares,
          // and they are not built.
          if (have && (reduced || share_bound(cand, units < most ? units : most, whole) >= best * 0.999)) continue;
          share_out(cand, (int)(units < most ? units : most), whole, units < most);
          if (half) cand.est_ns *= half_load_factor(cand.ctas, most);
          if (!have || (!reduced && cand.est_ns < best * 0.999)) out = cand, best = cand.est_ns, have = true;
          // Split tiles also over fewer CTAs than SMs, `parts` per tile: a launch of few tiles with a long
          // K, where a tile's finishing CTA would otherwise read many partial sums one after the other.
          for (int64_t parts = 2; !whole && !force.parts && parts * cand.tiles < most && parts * cand.tiles < cand.steps;
               ++parts) {
            share_out(cand, (int)(parts * cand.tiles), false, true);  // few: parts x tiles < SMs
            if (!reduced && cand.est_ns < best * 0.999) out = cand, best = cand.est_ns;
          }
        }
        // Reduced tiles: 2 or more parts per tile (forced: 1 or more), each at least one K step, at most one
        // CTA per SM.
        if (nar || half || !may_reduce || (force.share && force.share != 3)) continue;
        // parts: up to the longest tile's K steps (shorter tiles take one part per step) and the SMs
        int64_t max_kst = 1;
        for (int g = 0; g < groups; ++g) max_kst = cand.group[g].kst > max_kst ? cand.group[g].kst : max_kst;
        int64_t top = max_kst < kMaxReduceParts ? max_kst : kMaxReduceParts;
        while (top >= 1 && reduce_ctas(cand, top) > most) --top;
        const int64_t lo = force.share == 3 && force.parts ? (force.parts < top ? force.parts : top) : 2;
        const int64_t hi = force.share == 3 && force.parts ? lo : top;
        for (int64_t parts = lo; parts <= hi && parts >= 1; ++parts) {
          share_reduce(cand, parts);
          if (force.share == 3 && !reduced) out = cand, best = cand.est_ns, have = true, reduced = true;
          else if (cand.est_ns < best * 0.999) out = cand, best = cand.est_ns;
        }
        cand.reduce = 0;
      }
    }
  }
  // a wave plan where forced, or where the launch's A is too large for L2 and its estimate is close (share_wave)
  if (have_wave && (force.share == 4 || (force.share == 0 && !reduced && tiled_a16_bytes(wave) > kWaveA16Bytes &&
                                         wave.est_ns <= best * kWaveSlack))) {
    out = wave;
    return;
  }
  // split plans (not forced to S CTAs per tile): cut again for the critical path where that is shorter
  if (!out.half && !out.reduce && !force.parts && out.splits > 0) cut_for_critical_path(out, out.ctas < most);
}

}  // namespace fl::sm90
