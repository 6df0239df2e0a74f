// The sm_90a planner's cost model: estimated device ns of a tile's K steps, its epilogue, a split tile's
// hand-over and a reduced tile's reduction, as fitted on the H200. Plain C++.
//
// Provenance (every constant was fitted to device times measured on the H200 test GPU; the tools are in
// tools/tuning/, the measurements in docs/history/sm90_kernel_notes.md):
//
// | constant                      | value      | fitted to                                                         |
// |-------------------------------|------------|-------------------------------------------------------------------|
// | kStepNsDequant                | 370        | per-CTA trace times of the benchmark shapes' 128-wide tiles        |
// |                               |            | (trace_sm90.py + fit_sm90.py)                                     |
// | kStepNsPerRow                 | 2.52       | the ratio of 192- to 128-wide steps in the same traces (474 / 362)|
// | kPassNs (FL_PLAN_PASS_NS)     | 500        | epilogue passes in those traces; 200, 300 and 700 ns measured     |
// |                               |            | equal on the benchmarks, 200 and 300 2-3% slower on random shapes |
// | kUnalignedPassNs              | 900        | per-CTA traces of twin shapes with N % 8 != 0 and N rounded up    |
// |                               |            | (sweep_sm90.py --set far)                                         |
// | kNarrowStepRatio              | 471 / 607  | cycles per K step of the narrow against the 128-wide loop, loads  |
// |                               |            | and a 6-stage ring included, in a wgmma-rate probe                |
// | kMidStepRatio                 | 55.3 / 58.9| one group of 176 rows at 16384 x 7168, whole tiles, N 176 vs 192  |
// | kHalfAddNs                    | 300        | set with the half-tile kernel (the sums' exchange through shared  |
// |                               |            | memory), not fitted on its own                                    |
// | kHalfLoad                     | 0.3        | 64 random draws timed on half tiles and on the planner's other    |
// |                               |            | plans (sweep_sm90.py --set random:S; data/half_whole_draws.json)  |
// | kPartWriteNs, kPartReadNs     | 2400       | split tiles of the benchmark shapes at one CTA per SM             |
// | kFew{Write,Read}Ns, ..RowNs   | 300, 11, 9 | one group split over 8-64 CTAs (sweep_sm90.py --set hand)         |
// | kPartReadCpNs                 | 1300       | the split plans' critical path against benchmark 3's traced CTAs  |
// |                               |            | (cta_balance.py)                                                  |
// | kReduceNs, kReduceNsPerKB     | 1000, 0.3  | the hand set cut into 2-16 parts and two long-K shapes into 2-5,  |
// |                               |            | each against the planner's other plans of the same call           |
#pragma once
#include <cstdint>

#include "sm90/plan/geometry.h"

namespace fl::sm90 {

// A 64-wide K step of a tile `w` A rows wide: 370 ns at W = 128 and 2.52 ns per A row above that (484 at
// W = 192). The step is bound by the wgmma at these widths: with no loads or dequantisation at all the GEMM
// keeps 93% of its time. kStepNsDequant keeps the name of the floor from when B's dequantisation bound it.
constexpr double kStepNsDequant = 370;
constexpr double kStepNsPerRow = 2.52;
// FL_PLAN_PASS_NS (a build define for experiments, tools/tuning/ab_prepare.sh; setup.py gives it to both
// compilers, so fastlaunch._C.plan and the launcher agree): an epilogue pass's price in ns, 500 by default.
#ifndef FL_PLAN_PASS_NS
#define FL_PLAN_PASS_NS 500
#endif
constexpr double kPassNs = FL_PLAN_PASS_NS;
static_assert(kPassNs > 0, "FL_PLAN_PASS_NS: a price in ns");
constexpr double step_ns(int w) { return kStepNsPerRow * w > kStepNsDequant ? kStepNsPerRow * w : kStepNsDequant; }
// C rows that are not 16-byte aligned (N % 8 != 0): the kernels compiled for any alignment store the
// partial 16-byte chunks at each 64-column row segment's ends element by element (epilogue.cuh,
// common/row_pieces.h), and a pass costs ~0.9-1.2 us more than with N rounded up to a multiple of 8. A half
// tile's two warpgroups take every other pass of the same 64 B rows: each stores half the passes.
constexpr double kUnalignedPassNs = 900;
constexpr double epilogue_ns(int w, int64_t n, bool half = false) {
  const int64_t passes = ceil_div(w, 64);
  return kPassNs * (double)passes + (n % 8 ? kUnalignedPassNs * (double)(half ? ceil_div(passes, 2) : passes) : 0.0);
}

// A step of the narrow build's loop (wgmma N = kNarrowN) as the 128-wide step scaled by their cycle ratio,
// and the mid build's (N = kMidN) as the 192-wide step scaled by the measured time ratio.
constexpr double kNarrowStepRatio = 471.0 / 607.0;
constexpr double kMidStepRatio = 55.3 / 58.9;
// A step of width w's loop at wgmma N = mma_n (w, or a narrower N of a build).
constexpr double build_step_ns(int w, int mma_n) {
  return mma_n == kNarrowN ? kNarrowStepRatio * step_ns(w) : mma_n == kMidN ? kMidStepRatio * step_ns(w) : step_ns(w);
}

// Half tiles: a tile's steps taken two at a time, plus kHalfAddNs for the sums' exchange. A half tile's steps
// read the tile's W A rows from L2 for 64 B rows, twice the A bytes per MMA of a whole tile, and half-tile
// plans ran longer over their estimate the more CTAs shared the chip (0.95-1.24x at up to 75 CTAs,
// 1.11-1.70x at 100-132, against 0.87-1.42x for the whole-tile plans beside them, less 6.5 us of fixed
// cost). So a half plan's estimate is scaled by 1 + kHalfLoad x CTAs / SMs before it is compared.
constexpr double kHalfAddNs = 300;
constexpr double kHalfLoad = 0.3;
constexpr double half_load_factor(int ctas, int64_t sms) { return 1.0 + kHalfLoad * (double)ctas / (double)sms; }

// What a split tile's hand-over costs depends on how busy the GPU is:
// - one CTA per SM (every SM's K loop and hand-over at once): kPartWriteNs for a CTA's store of one
//   tile's partial sums, kPartReadNs for their read by the CTA that finishes the tile, for each CTA that
//   wrote one (fitted: 2739 and 2247 ns); kept whole for any rows: with the row-scaled costs below, random
//   shapes took split tiles over half tiles and measured up to 36% slower;
// - fewer CTAs than SMs (`parts` per tile): kFewWriteNs + kFewWriteRowNs per moved row, and kFewReadNs +
//   kFewReadRowNs per row and CTA read (0.5-1.8 us per store, 0.4-0.9 us per read, by rows).
constexpr double kPartWriteNs = 2400;
constexpr double kPartReadNs = 2400;
constexpr double kFewWriteNs = 300;
constexpr double kFewWriteRowNs = 11;
constexpr double kFewReadNs = 300;
constexpr double kFewReadRowNs = 9;
constexpr double part_write_ns(bool few, int64_t rows, int w) {
  return few ? kFewWriteNs + kFewWriteRowNs * (double)part_rows(rows, w) : kPartWriteNs;
}
constexpr double part_read_ns(bool few, int64_t rows, int w) {
  return few ? kFewReadNs + kFewReadRowNs * (double)part_rows(rows, w) : kPartReadNs;
}
// On the critical path of a split plan a finishing CTA's read comes after its partners' flags, when the
// partial sums are in L2: kPartReadCpNs.
constexpr double kPartReadCpNs = 1300;

// Reduced tiles: the busiest CTA's steps and store (kFew*), then kReduceNs (the third launch and C's store)
// + kReduceNsPerKB per KB of partial sums stored.
constexpr double kReduceNs = 1000;
constexpr double kReduceNsPerKB = 0.3;

}  // namespace fl::sm90
