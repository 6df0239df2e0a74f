// Prints the operations one launch of the sm_100a kernel issues, warp role by warp role, for
// tests/cpu/test_sm100_model.py, which executes them on a CPU model of shared memory, tensor memory,
// mbarriers and the tcgen05 / TMA instructions. Built there with the host C++ compiler.
//
// Every descriptor word, tensor-memory address and tile coordinate comes from the kernel's own
// plain-C++ header (kernels/sm100/desc.h). What the kernel computes only in device code (its shared-memory
// layout, barrier addresses and the three warp loops) is mirrored below, each piece naming what of
// kernels/sm100/gemm.cuh it mirrors; the test lists the kernel lines mirrored and checks that
// they still read so.
//
// Query (one line): SMEM_BASE SM_COUNT M1 N1 K1 [M2 N2 K2 ...]  (1..16 groups: one launch)
//   SMEM_BASE: the shared-window address of the kernel's dynamic shared memory; SM_COUNT: the
//   device's SM count (it picks the grid and the persistent or one-tile-per-CTA variant).
// Answer (one line): operations separated by ';', each "CTA ROLE OP ARGS..." (ROLE: 0-3 the epilogue
// warps, 4 the TMA warp, 5 the MMA warp, 9 set-up before the roles split):
//   cfg SMEM_BASE SMEM_BYTES GRID PERSISTENT TILES BOX_BYTES BOX_ROWS SWIZZLE_BYTES   (CTA -1, once)
//   init BAR COUNT | wait BAR PARITY | expect BAR BYTES | arrive BAR | commit BAR
//     (the kernel's waits are bounded, trapping after a time limit; the model has no time, and its waits have none)
//   patch RING OPERAND(a|b) GROUP ROW_BYTES ROWS          tensor map pair RING's OPERAND map rewritten
//   tma DST RING OPERAND X Y BAR                          2D tile load of map RING.OPERAND at (X, Y)
//   bulk DST OPERAND(sfa|sfb) GROUP SRC_OFFSET BYTES BAR  bulk copy from the group's scale buffer
//   cp TADDR SDESC                                        tcgen05.cp.cta_group::1.32x128b.warpx4
//   mma TADDR_D ADESC BDESC IDESC TADDR_SFA TADDR_SFB ACC tcgen05.mma ... kind::mxf4nvf4.block16
//   ld TADDR                                              tcgen05.ld.32x32b.x16 by the role's warp
//   st GROUP ROW0 COL0 M N   after the ld: lane l, register j -> C[ROW0 + j][COL0 + l], stored when
//                            the row is below M and the column below N, at element row * N + col
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

// The kernel's plain-C++ header: the one include to update if the kernel's files move.
#include "sm100/desc.h"

using namespace fl::sm100;

namespace {

// ---------------------------------------------------------------- mirrored from kernels/sm100/gemm.cuh
// Shared memory: `constexpr uint32_t kTileBytes = kTileB * kBlockK / 2;` and the offsets after it.
constexpr uint32_t kTileBytes = kTileB * kBlockK / 2;
constexpr uint32_t kOffA = 0;
constexpr uint32_t kOffB = kOffA + kTileBytes;
constexpr uint32_t kOffSfa = kOffB + kTileBytes;
constexpr uint32_t kOffSfb = kOffSfa + kChunks * kSfBlockBytes;
constexpr uint32_t kStageBytes = kOffSfb + kChunks * kSfBlockBytes;
constexpr uint32_t kOffBars = 256;
constexpr uint32_t kHeaderBytes = 1024;
constexpr uint32_t kSmemBytes = kHeaderBytes + kStages * kStageBytes;
constexpr int kEpilogueWarps = 4;
constexpr int kTmaWarp = 4;
constexpr int kMmaWarp = 5;
constexpr uint32_t kTmem = 0;  // tcgen05.alloc of all 512 columns: the allocation starts at lane 0, column 0

// `struct Smem`: the barriers and stages.
struct Smem {
  uint32_t base;
  uint32_t full(int s) const { return base + kOffBars + 8u * s; }
  uint32_t empty(int s) const { return base + kOffBars + 8u * (kStages + s); }
  uint32_t acc_full(int b) const { return base + kOffBars + 8u * (2 * kStages + b); }
  uint32_t acc_empty(int b) const { return base + kOffBars + 8u * (2 * kStages + kAccBuffers + b); }
  uint32_t stage(int s) const { return base + kHeaderBytes + s * kStageBytes; }
};

// `acc_buf<kPersistent>(i)`.
uint32_t acc_buf(bool persistent, uint32_t i) { return persistent ? i % kAccBuffers : 0; }

// The members decode_tile and the warps read (kernels/sm100/gemm.cuh `struct Group`).
struct Group {
  int32_t m, n, k, tile_end;
};

struct Out {
  std::string s;
  void op(int cta, int role, const char* fmt, ...) __attribute__((format(printf, 4, 5)));
};

void Out::op(int cta, int role, const char* fmt, ...) {
  char buf[512];
  int len = std::snprintf(buf, sizeof buf, "%d %d ", cta, role);
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf + len, sizeof buf - len, fmt, ap);
  va_end(ap);
  s += buf;
  s += ';';
}

// `tma_warp`: lane 0's operations (the other lanes only take part in the map patch).
void tma_warp(Out& o, int cta, const std::vector<Group>& groups, int num_tiles, const Smem& sm, int step) {
  int cur_g = -1, ring = kMapRing - 1, hint = 0;
  uint32_t it = 0;
  for (int t = cta; t < num_tiles; t += step) {
    const TileCoord tc = decode_tile(groups.data(), t, hint);
    hint = tc.g;
    const Group& gr = groups[tc.g];
    if (tc.g != cur_g) {
      cur_g = tc.g;
      ring = (ring + 1) % kMapRing;
      o.op(cta, kTmaWarp, "patch %d a %d %d %d", ring, tc.g, gr.k / 2, gr.m);
      o.op(cta, kTmaWarp, "patch %d b %d %d %d", ring, tc.g, gr.k / 2, gr.n);
    }
    const int64_t blocks_k = gr.k / kMmaK;
    const int64_t sfa = (int64_t)(tc.m0 / kTileA) * blocks_k * kSfBlockBytes;
    const int64_t sfb = (int64_t)(tc.n0 / kTileB) * blocks_k * kSfBlockBytes;
    const int ks = kstages(gr.k);
    for (int kc = 0; kc < ks; ++kc, ++it) {
      const int s = it % kStages;
      o.op(cta, kTmaWarp, "wait %u %u", sm.empty(s), ((it / kStages) & 1) ^ 1);
      const uint32_t st = sm.stage(s);
      const uint32_t sf_bytes = (kc + 1 < ks ? kChunks : last_chunks(gr.k)) * kSfBlockBytes;
      const int64_t sf_off = (int64_t)kc * kChunks * kSfBlockBytes;
      o.op(cta, kTmaWarp, "expect %u %u", sm.full(s), 2 * kTileBytes + 2 * sf_bytes);
      o.op(cta, kTmaWarp, "tma %u %d a %d %d %u", st + kOffA, ring, kc * (kBlockK / 2), tc.m0, sm.full(s));
      o.op(cta, kTmaWarp, "tma %u %d b %d %d %u", st + kOffB, ring, kc * (kBlockK / 2), tc.n0, sm.full(s));
      o.op(cta, kTmaWarp, "bulk %u sfa %d %" PRId64 " %u %u", st + kOffSfa, tc.g, sfa + sf_off, sf_bytes, sm.full(s));
      o.op(cta, kTmaWarp, "bulk %u sfb %d %" PRId64 " %u %u", st + kOffSfb, tc.g, sfb + sf_off, sf_bytes, sm.full(s));
    }
  }
}

// `mma_warp`: lane 0's operations.
void mma_warp(Out& o, int cta, const std::vector<Group>& groups, int num_tiles, const Smem& sm, int step,
              bool persistent) {
  int hint = 0;
  uint32_t it = 0, i = 0;
  for (int t = cta; t < num_tiles; t += step, ++i) {
    const TileCoord tc = decode_tile(groups.data(), t, hint);
    hint = tc.g;
    const Group& gr = groups[tc.g];
    const uint32_t idesc = idesc_mxf4nvf4(kTileB, mma_n(gr.m, tc.m0));
    const uint32_t buf = acc_buf(persistent, i);
    if (persistent) o.op(cta, kMmaWarp, "wait %u %u", sm.acc_empty(buf), ((i / kAccBuffers) & 1) ^ 1);
    const uint32_t d = kTmem + acc_col(buf);
    const int ks = kstages(gr.k);
    for (int kc = 0; kc < ks; ++kc, ++it) {
      const int s = it % kStages;
      o.op(cta, kMmaWarp, "wait %u %u", sm.full(s), (it / kStages) & 1);
      const uint32_t st = sm.stage(s);
      const int chunks = kc + 1 < ks ? kChunks : last_chunks(gr.k);
      for (int c = 0; c < chunks; ++c) {
        o.op(cta, kMmaWarp, "cp %u %" PRIu64, kTmem + sf_col(s, 0, c),
             smem_desc_scales(st + kOffSfb + c * kSfBlockBytes));
        o.op(cta, kMmaWarp, "cp %u %" PRIu64, kTmem + sf_col(s, 1, c),
             smem_desc_scales(st + kOffSfa + c * kSfBlockBytes));
      }
      for (int c = 0; c < chunks; ++c)
        o.op(cta, kMmaWarp, "mma %u %" PRIu64 " %" PRIu64 " %u %u %u %d", d, smem_desc_operand(st + kOffB, c),
             smem_desc_operand(st + kOffA, c), idesc, kTmem + sf_col(s, 0, c), kTmem + sf_col(s, 1, c),
             (int)(kc > 0 || c > 0));
      o.op(cta, kMmaWarp, "commit %u", sm.empty(s));
    }
    o.op(cta, kMmaWarp, "commit %u", sm.acc_full(buf));
  }
}

// `epilogue_warps`: warp `warp`'s operations; the per-lane store guard is in the st operation.
void epilogue_warp(Out& o, int cta, const std::vector<Group>& groups, int num_tiles, const Smem& sm, int step,
                   bool persistent, int warp) {
  int hint = 0;
  uint32_t i = 0;
  for (int t = cta; t < num_tiles; t += step, ++i) {
    const TileCoord tc = decode_tile(groups.data(), t, hint);
    hint = tc.g;
    const Group& gr = groups[tc.g];
    const uint32_t buf = acc_buf(persistent, i);
    o.op(cta, warp, "wait %u %u", sm.acc_full(buf), (i / kAccBuffers) & 1);
    const int n = mma_n(gr.m, tc.m0);
    const int64_t col = (int64_t)tc.n0 + 32 * warp;  // + lane
    for (int j0 = 0; j0 < n; j0 += 16) {
      o.op(cta, warp, "ld %u", kTmem + tmem_addr(32 * warp, acc_col(buf) + j0));
      o.op(cta, warp, "st %d %" PRId64 " %" PRId64 " %d %d", tc.g, (int64_t)tc.m0 + j0, col, gr.m, gr.n);
    }
    if (persistent) o.op(cta, warp, "arrive %u", sm.acc_empty(buf));
  }
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    uint32_t smem_base = 0;
    int sm_count = 0;
    in >> smem_base >> sm_count;
    std::vector<Group> groups;
    int64_t m, n, k, tiles = 0;
    while (in >> m >> n >> k) {  // the host side's table (kernels/sm100/launch.cu, launch_chunk)
      tiles += group_tiles(m, n);
      groups.push_back(Group{(int32_t)m, (int32_t)n, (int32_t)k, (int32_t)tiles});
    }
    if (groups.empty() || sm_count < 1 || groups.size() > (size_t)kGroupsSmall) {
      std::printf("bad query\n");
      continue;
    }
    const int num_tiles = (int)tiles;
    const bool persistent = !one_tile_per_cta(tiles, sm_count);
    const int grid = grid_size(tiles, sm_count);
    const int step = persistent ? grid : num_tiles;  // the kernel's `step`
    const Smem sm{smem_base};
    Out o;
    o.op(-1, 9, "cfg %u %u %d %d %d %d %d 128", smem_base, kSmemBytes, grid, (int)persistent, num_tiles,
         (int)(kBlockK / 2), (int)kTileB);  // the map template: sm100_init, 128-byte swizzle
    for (int cta = 0; cta < grid; ++cta) {
      // Thread 0's barrier set-up.
      for (int s = 0; s < kStages; ++s) {
        o.op(cta, 9, "init %u 1", sm.full(s));
        o.op(cta, 9, "init %u 1", sm.empty(s));
      }
      for (uint32_t b = 0; b < kAccBuffers; ++b) {
        o.op(cta, 9, "init %u 1", sm.acc_full(b));
        o.op(cta, 9, "init %u %d", sm.acc_empty(b), kEpilogueWarps);
      }
      tma_warp(o, cta, groups, num_tiles, sm, step);
      mma_warp(o, cta, groups, num_tiles, sm, step, persistent);
      for (int w = 0; w < kEpilogueWarps; ++w) epilogue_warp(o, cta, groups, num_tiles, sm, step, persistent, w);
    }
    std::printf("%s\n", o.s.c_str());
  }
  return 0;
}
