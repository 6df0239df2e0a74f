// Groups cut in two at a 128-row boundary (sm_90a launches of up to kGroupsSmall groups), so that one
// group's rows take tiles of two widths: a group of 300 rows is tiled 2 x 192 (84 rows of padding
// computed), or as a group of its first 128 rows (one 128-row tile per B block) and one of the other
// 172 (one 192-row tile): 320 rows. The two groups are views of the same operands (A, C and A's scales
// offset by the head's rows; B and its scales shared), so the kernels need nothing new: the launcher
// rewrites its buffer ([a b c sfa sfb m n k] x G, launcher.h) into one with more groups and plans that
// instead, where the plan's estimate is lower. Plain C++ (tests/cpp/cuts_probe.cpp).
#pragma once
#include <cstdint>

#include "sm90/plan/planner.h"

namespace fl::sm90 {

// A cut lies on a 128-row block of A's scale layout (storage (1, ceil(M/128), K/64, 32, 4, 4)), so the
// tail's scales are the group's from block head / 128 on.
constexpr int64_t kCutBlock = 128;

// The estimated cost of a group's tiles per 128 B rows (kernels/sm90/plan/planner.h group_tiles), the cheaper of the two caps.
inline double column_ns(int64_t m, int64_t n, int64_t k) {
  double best = 0;
  for (int i = 0; i < kNumWidths; ++i) {
    const GroupTiles t = group_tiles(m, n, k, kWidths[i]);
    const double ns = (double)t.chunks * t.tile_ns;
    if (i == 0 || ns < best) best = ns;
  }
  return best;
}

// The head rows (a positive multiple of kCutBlock below m) to cut group (m, n, k) at, or 0 for none: the
// cut whose two groups' tiles are estimated cheapest, if at least 3% cheaper than the group's own.
inline int64_t cut_head(int64_t m, int64_t n, int64_t k) {
  if (m <= kWidths[0] || m > 8 * kMaxWidth) return 0;  // one tile already, or padding a small share
  const double whole = column_ns(m, n, k);
  double best = whole * 0.97;
  int64_t head = 0;
  for (int64_t h = kCutBlock; h < m; h += kCutBlock) {
    const double ns = column_ns(h, n, k) + column_ns(m - h, n, k);
    if (ns < best) best = ns, head = h;
  }
  return head;
}

// The cuts of a launch of G <= kGroupsSmall groups (sizes m, n, k each): head[g] = cut_head of group g,
// or 0 for every group if the cut groups would be more than `max_out`. Returns the number of groups
// after the cuts. Sizes must be valid (check_group_sizes).
inline int cut_heads(const int64_t* m, const int64_t* n, const int64_t* k, int G, int64_t* head, int max_out) {
  int count = G;
  for (int g = 0; g < G; ++g)
    if ((head[g] = cut_head(m[g], n[g], k[g])) > 0) ++count;
  if (count <= max_out) return count;
  for (int g = 0; g < G; ++g) head[g] = 0;
  return G;
}

// Rewrites `buf` (G groups, launcher.h's layout) into `out` (same layout) with every group g whose
// head[g] > 0 replaced by its head and its tail, in that order; src[v] is the group that out's group v
// comes from. Returns the number of groups in `out`.
inline int apply_cuts(const int64_t* buf, int G, const int64_t* head, int64_t* out, int* src) {
  int count = G;
  for (int g = 0; g < G; ++g) count += head[g] > 0;
  int v = 0;
  for (int g = 0; g < G; ++g) {
    const int64_t h = head[g];
    const int parts = h > 0 ? 2 : 1;
    for (int p = 0; p < parts; ++p, ++v) {
      const int64_t m = buf[5 * G + g], n = buf[6 * G + g], k = buf[7 * G + g];
      const int64_t r0 = p == 0 ? 0 : h;  // the part's first row
      src[v] = g;
      out[0 * count + v] = buf[0 * G + g] + r0 * (k / 2);                   // a: K / 2 bytes per row
      out[1 * count + v] = buf[1 * G + g];                                  // b
      out[2 * count + v] = buf[2 * G + g] + r0 * n * 2;                     // c: N fp16 per row
      out[3 * count + v] = buf[3 * G + g] + r0 / kCutBlock * (k / 64) * 512;  // sfa: 512 bytes per block
      out[4 * count + v] = buf[4 * G + g];                                  // sfb
      out[5 * count + v] = p == 0 && h > 0 ? h : m - r0;                    // m
      out[6 * count + v] = n;
      out[7 * count + v] = k;
    }
  }
  return count;
}

// Cuts are tried only for launches of at most this many tiles (of the narrowest width), so that
// planning the launch twice stays cheap beside the launch.
constexpr int64_t kMaxCutTiles = int64_t{1} << 20;

// Whether the launcher cuts a launch of G <= kGroupsSmall groups (valid sizes m, n, k): head[g] as
// cut_heads gives it, taken where the cut launch's plan is estimated at least 1% cheaper than the
// uncut one's. `est(m, n, k, groups)` is a launch's plan estimate (ns): the launcher's memo of plans,
// or plan_launch itself (fastlaunch._C.cuts). Returns false with every head 0 where it does not cut.
template <class Est>
bool choose_cuts(const int64_t* m, const int64_t* n, const int64_t* k, int G, Est&& est, int64_t* head) {
  int64_t tiles = 0;
  for (int g = 0; g < G; ++g) tiles += max_tiles(m[g], n[g]);
  for (int g = 0; g < G; ++g) head[g] = 0;
  if (G > kGroupsSmall || tiles > kMaxCutTiles) return false;
  const int Gc = cut_heads(m, n, k, G, head, kGroupsSmall);
  if (Gc == G) return false;
  int64_t cm[kGroupsSmall], cn[kGroupsSmall], ck[kGroupsSmall];
  int v = 0;
  for (int g = 0; g < G; ++g) {
    if (head[g] > 0) cm[v] = head[g], cn[v] = n[g], ck[v] = k[g], ++v;
    cm[v] = m[g] - head[g], cn[v] = n[g], ck[v] = k[g], ++v;
  }
  const double whole = est(m, n, k, G);
  if (est(cm, cn, ck, Gc) < whole * 0.99) return true;
  for (int g = 0; g < G; ++g) head[g] = 0;
  return false;
}

// cut_heads, then apply_cuts (G <= kGroupsSmall): `out` has room for `max_out` groups; G and a plain
// copy if the cuts would make more (tests/cpp/cuts_probe.cpp).
inline int cut_groups(const int64_t* buf, int G, int64_t* out, int* src, int max_out) {
  int64_t head[kGroupsSmall] = {};
  cut_heads(buf + 5 * G, buf + 6 * G, buf + 7 * G, G, head, max_out);
  return apply_cuts(buf, G, head, out, src);
}

}  // namespace fl::sm90
