// The masked form's tile schedule, computed on the device from the rows each group holds this call (masked_m, or
// the contiguous layout's offs): only tiles that hold rows are counted, so an empty expert costs no CTA any time.
// The host plans each group at its most rows (the widths, the build, the grid); the kernels' prologue
// (kernels/sm90/gemm.cuh) counts the tiles that hold rows, group by group, and every CTA derives its share from
// that count alone. Plain C++: the kernels, the launcher and the CPU tests (fastlaunch._C.row_schedule) read it.
//
// Two shapes of share:
//   whole  tile t runs whole on CTA t mod ctas: a wave walk (tiles b, b + ctas, ...; the main build) where the
//          tiles outnumber the grid, else one tile per CTA (ctas = tiles, taken as a split of runs one tile long);
//   split  the launch's K steps (tile after tile, each tile's in K order) cut into `ctas` equal runs, CTA b the
//          steps from row_split_start(b) up to row_split_start(b + 1), as stream-K shares (kernels/sm90/stream_k.cuh);
//          `ctas` is the grid, or fewer so that every run holds at least kRowMinSteps steps.
// The one whose busiest CTA runs fewer steps is taken, a split charged row_split_steps(kst) more for its partial
// sums' trip (whole tiles on ties): on an H100 (8 experts, N 2048, K 7168, 112 steps a tile) 128 tiles split over
// 132 CTAs ran 12% slower than a tile each on 128. Past L2 (the counted tiles' fp16 A, as tiled, over
// kRowWaveA16Bytes) a wave walk is taken where its busiest CTA runs at most 5/4 of the split's steps, as the host
// planner takes wave plans (kernels/sm90/plan/planner.h kWaveA16Bytes): a split's CTAs running at one time hold A
// rows far apart and read them from DRAM again for every tile, a wave's hold a band of A chunks against all their
// B blocks. On an H100 forced waves ran the masked prefill step (8 experts, 64-512 rows, N 2048, K 7168) in 148.6 us
// against a split's 168.7, and the MoE block's contiguous prefill (2048 tokens, top-2 of 8) in 3587 against 4678.
// Tiles that hold rows are numbered group after group, each group's along N fastest (a chunk of A rows meets
// every B block of its group before the next chunk).
#pragma once
#include <cstdint>

#include "common/limits.h"

namespace fl::sm90 {

// The fewest K steps in a split run: a run of fewer would cost its partial sums' trip more than its steps.
constexpr int kRowMinSteps = 8;
// Past L2: the fp16 A bytes (as tiled) above which waves are preferred, and by how much (a wave walk's busiest CTA
// up to kRowWaveSlackNum / kRowWaveSlackDen of a split's).
constexpr int64_t kRowWaveA16Bytes = int64_t{24} << 20;
constexpr int kRowWaveSlackNum = 5, kRowWaveSlackDen = 4;
// What a split is charged for its partial sums' trip (written, waited for, read back), in K steps of a tile of
// `kst`.
constexpr int64_t row_split_steps(int64_t kst) { return kst / 8 > kRowMinSteps ? kst / 8 : kRowMinSteps; }

struct RowSchedule {
  int32_t tiles;  // tiles that hold rows this call
  int32_t kst;    // K steps per tile (every group of a masked launch has the one K)
  int32_t ctas;   // CTAs with work: the grid (wave), or at most the grid (split); 0 when no tile holds rows
  int32_t wave;   // 1 wave, 0 split
};

// Forcing one shape (experiments and tests: FASTLAUNCH_SM90_SHARE, PlanForce::share's codes): kRowWhole whole
// tiles, kRowSplit a split, kRowWave a wave walk where the kernel runs them (else whole), 0 the cheaper one. Where
// the forced shape cannot be had (whole tiles outnumbering the grid of a kernel without wave walks) it is a split.
constexpr int kRowWhole = 1, kRowSplit = 2, kRowWave = 4;

// The schedule of `tiles` tiles of `kst` K steps each on a grid of `grid` CTAs; wave_ok: the kernel runs wave
// walks; force: 0, or a shape above; a16_bytes: the fp16 A the tiles read, as tiled (their groups' tiles along M
// times their width, times K x 2 bytes).
constexpr RowSchedule row_schedule(int64_t tiles, int kst, int grid, bool wave_ok, int force = 0,
                                   int64_t a16_bytes = 0) {
  RowSchedule s{(int32_t)tiles, (int32_t)kst, 0, 0};
  if (tiles <= 0 || kst <= 0 || grid <= 0) return s;
  int64_t c = tiles * kst / kRowMinSteps;
  c = c < 1 ? 1 : c > grid ? grid : c;
  const int64_t split = (tiles * kst + c - 1) / c + row_split_steps(kst);
  if (force != kRowSplit) {
    const bool whole = force == kRowWhole || force == kRowWave;
    if (wave_ok && (force == kRowWave || tiles > grid)) {  // waves
      const int64_t waves = (tiles + grid - 1) / grid * kst;
      const bool past_l2 = a16_bytes > kRowWaveA16Bytes && waves * kRowWaveSlackDen <= split * kRowWaveSlackNum;
      if (whole || waves <= split || past_l2) {
        s.ctas = grid, s.wave = 1;
        return s;
      }
    } else if (tiles <= grid && (whole || kst <= split)) {
      c = tiles;  // a tile per CTA: a split into runs of one tile
    }
  }
  s.ctas = (int32_t)c;
  return s;
}

// Split schedules: the first K step (launch-wide) of CTA b's run, b in 0 .. ctas.
constexpr int64_t row_split_start(const RowSchedule& s, int b) { return (int64_t)b * s.tiles * s.kst / s.ctas; }

// CTA b's share: its first tile and step, its units (one per tile it touches) and where its steps end in its last
// tile (0: at the tile's end). Wave: tiles first_t, first_t + ctas, ... whole. A CTA past `ctas` has none.
struct RowShare {
  int32_t first_t, first_k, count, end_k;
};
constexpr RowShare row_share(const RowSchedule& s, int b) {
  RowShare r{b, 0, 0, 0};
  if (b >= s.ctas) return r;
  if (s.wave) {
    r.count = b < s.tiles ? (s.tiles - 1 - b) / s.ctas + 1 : 0;
    return r;
  }
  const int64_t s0 = row_split_start(s, b), s1 = row_split_start(s, b + 1);
  r.first_t = (int32_t)(s0 / s.kst), r.first_k = (int32_t)(s0 % s.kst);
  const int32_t last_t = (int32_t)(s1 / s.kst);
  r.end_k = (int32_t)(s1 % s.kst);
  r.count = (r.end_k > 0 ? last_t : last_t - 1) - r.first_t + 1;
  return r;
}

// What a CTA of a masked launch keeps of the schedule: its share, the wave walk's stride (the CTAs; 0 for a split
// run, walked from its last tile backwards like a stream-K share) and, for a split run, how many CTAs below it hold
// steps of its first tile (their partial sums it adds before storing that tile). Made once per CTA, so the kernels'
// K loops and epilogues carry none of its 64-bit arithmetic.
struct RowCta {
  RowShare share;
  int32_t stride;
  int32_t before;
};
constexpr RowCta row_cta(const RowSchedule& s, int b) {
  RowCta c{row_share(s, b), s.wave ? s.ctas : 0, 0};
  if (!s.wave && c.share.count > 0 && c.share.first_k > 0) {
    // the first CTA holding a step of the first tile: the last c0 with row_split_start(c0) <= that tile's first
    // step x, i.e. c0 * steps < (x + 1) * ctas (a division, not a walk over the CTAs below)
    const int64_t x = (int64_t)c.share.first_t * s.kst, steps = (int64_t)s.tiles * s.kst;
    const int64_t c0 = ((x + 1) * s.ctas + steps - 1) / steps - 1;
    c.before = (int32_t)(b - c0);
  }
  return c;
}

// The grid of a masked launch planned at `plan_ctas` CTAs for `plan_steps` K steps in all (every group at its most
// rows), at most `most` CTAs (the SMs, capped at kMaxCtas): room for the split schedule to spread the call's steps
// over every SM.
constexpr int row_grid(int plan_ctas, int64_t plan_steps, int most) {
  int64_t c = plan_steps / kRowMinSteps;
  c = c > most ? most : c;
  return (int)(c > plan_ctas ? c : plan_ctas);
}

}  // namespace fl::sm90
