// The skinny kernel: launches whose every group holds a few A rows (kernels/sm90/plan/skinny.h) on the CUDA cores, one
// launch, no workspace.
//
// An item is 512 / L B rows of one group over the whole K, L lanes per row (a build per L, kernels/sm90/plan/skinny.h
// kSkinnyLanes): lane s of a row takes every L-th unit of 32 K values from the s-th (so a row's lanes read
// 16 x L contiguous bytes: a warp's load touches 4 lines; one row per lane made every load touch 32 and
// bound the kernel by the L1's lines per cycle), and the row's lanes' sums are added by shuffles at the
// end. L = 8: a warp holds 4 rows, which read the same A entries; L = 32: a warp per row, 4x the items, for
// launches of few, whose B scales the CTA copies into shared memory one item ahead (kernels/sm90/plan/skinny.h
// skinny_shared_scales: read from global memory, a row's scales touched 16 lines per warp load). A CTA takes
// a run of consecutive items and holds its group's A rows in shared memory (converted once per group it
// meets), each unit's entries placed so that any 8 consecutive units' entries sit in different banks. A
// small launch is a chain of latencies (tools/skinny_latency.cu): the lanes load
// their first B units before A's rows are converted, so the two memory reads overlap, and the prologue finds
// the CTA's items and part of K with no 64-bit division (the launcher passes the items per cluster).
//
// A launch of few items may split K (kernels/sm90/plan/skinny.h): the grid is then clusters of `split` CTAs, each cluster
// taking one item (or, forced, a run of items) and each of its CTAs one part of every item's K (the A rows
// of that part only in its shared memory). A CTA leaves its partial sums of an item in its shared memory;
// after a cluster barrier the CTA of rank r adds up, in rank order, every part's sums of the A rows
// m = r (mod split) and stores them (the same result for the same inputs every call); a second barrier
// frees the sums for the next item.
//
// Exact arithmetic: B's nibbles become fp16 as value x 2^-14 (kernels/common/nvfp4.cuh), A's as value x 2^12. Their
// product is value_a x value_b / 4: a multiple of 1/16, at most 9. Within a 16-wide K block each fp16 half
// of an f16x2 accumulator sums 8 such products: at most 72 in steps of 1/16 (1152 steps < 2^11, fp16's
// significand), so the fp16 sums are exact. Each block's two halves go to fp32 and are multiplied by
// 4 x scale_a x scale_b (exact: two E4M3 significands) into the fp32 sum, one rounding per block as in any
// fp32 accumulation.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "common/group_operands.h"
#include "common/nvfp4.cuh"
#include "common/out_form.cuh"
#include "ptx/cluster.cuh"
#include "ptx/cp_async.cuh"
#include "ptx/cvt.cuh"
#include "ptx/griddep.cuh"
#include "ptx/memorder.cuh"
#include "sm90/plan/skinny.h"
#include "sm90/gemm.cuh"  // kSfBlockBytes, sf_row_offset

// Trace points for tools/skinny_latency.cu, which defines this before including the file; empty in the
// library's builds (the same SASS).
#ifndef FL_SKINNY_MARK
#define FL_SKINNY_MARK(i)
#endif

namespace fl::sm90 {

struct SkinnyGroup : GroupOperands {  // a, b, sfa, sfb, c
  int32_t m, n, k;
  int32_t item_end;  // exclusive end of this group's items (skinny_rows(L) B rows each) in the launch
};

struct SkinnyParams {
  int32_t split;  // CTAs per item, one cluster (SkinnyPlan::split)
  SkinnyItemRuns runs;  // the clusters' runs of items (skinny_item_runs)
  int32_t scales, scale_buf;  // at 32 lanes: the scale buffers' byte offset in shared memory and bytes each
  int32_t sums;   // with split > 1: the byte offset of the partial sums in shared memory (SkinnyPlan::sums)
  SkinnyGroup groups[kGroupsSmall];
};

// The masked form's parameters (skinny_gemm_masked): the task form's, then the counts: group g of the launch
// computes rows 0 .. masked_m[g] - 1 (at most its planned m) and stores no other row.
struct MaskedSkinnyParams : SkinnyParams {
  const int32_t* masked_m;
  const float* alpha;  // expert g's product times alpha[g] before the rounding (null: times 1)
  int32_t out_bf16;    // C is bf16 (else fp16)
};

namespace skinny {

constexpr uint32_t kScale2e13 = 0x70007000u;  // (2^13, 2^13) as f16x2

__device__ __forceinline__ float2 f16x2_to_float2(uint32_t h) {
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

// Two E4M3 scales (the low two bytes of v) as floats.
__device__ __forceinline__ float2 e4m3x2_to_float2(uint32_t v) {
  return f16x2_to_float2(ptx::e4m3x2_to_f16x2((uint16_t)(v & 0xFFFFu)));
}

// Nibbles J and J + 4 of w as value x 2^12 (A's form): value x 2^-14, times 2^13 twice (exact).
template <int J>
__device__ __forceinline__ uint32_t a_pair(uint32_t w) {
  return ptx::mul_f16x2(ptx::mul_f16x2(e2m1_pair_j<J>(w), kScale2e13), kScale2e13);
}

// Byte offset of (unit u, A row m)'s entry in shared memory (kernels/sm90/plan/skinny.h skinny_unit_stride).
template <int MB>
__device__ __forceinline__ uint32_t entry(int u, int m) {
  return (uint32_t)u * (uint32_t)skinny_unit_stride(MB) + (uint32_t)m * (uint32_t)kSkinnyEntryBytes;
}

// One unit (32 K values) of a B row: 16 bytes and the row's two scales of it (in the low two bytes of sf).
struct BUnit {
  uint4 v;
  uint32_t sf;
};

// Unit u's bytes, and its scales from global memory at 8 lanes; at 32 (skinny_shared_scales) with_scales
// reads them from shared memory right before the unit is used.
template <int L>
__device__ __forceinline__ BUnit load_unit(const uint8_t* row, const uint8_t* sf_row, int u) {
  if constexpr (skinny_shared_scales(L)) return {ptx::ld_nc_v4(row + u * 16), 0u};
  else return {ptx::ld_nc_v4(row + u * 16), ptx::ld_nc_u16(sf_row + (int64_t)(u / 2) * kSfBlockBytes + (u % 2) * 2)};
}

// `sfs`: the row's first word in the item's scale buffer (K step 0 of the part).
template <int L>
__device__ __forceinline__ BUnit with_scales(BUnit b, const uint8_t* sfs, int u) {
  if constexpr (skinny_shared_scales(L))
    b.sf = *reinterpret_cast<const uint32_t*>(sfs + (u / 2) * (skinny_scale_row_words(L) * 4)) >> (16 * (u % 2));
  return b;
}

// This CTA's part (rank of `split`) of group gr's K: units [*u0, *u0 + *units), in chunks of L units.
template <int L>
__device__ __forceinline__ void group_part(const SkinnyGroup& gr, int split, int rank, int* u0, int* units) {
  int64_t a, b;
  skinny_part(gr.k / kSkinnyUnitK, split, L, rank, &a, &b);
  *u0 = (int)a, *units = (int)(b - a);
}

// The scales of an item's rows n0 .. n0 + skinny_rows(L) - 1 (rows past N repeat the last row) over the part's
// K steps (units u0 .. u0 + units - 1, u0 even) into the buffer `dst`, by cp.async: one group, each thread's
// copies waited for by itself (cp_async_wait_all) before the barrier that publishes them.
template <int L>
__device__ __forceinline__ void copy_scales(const SkinnyGroup& gr, int64_t n0, int u0, int units, uint8_t* dst) {
  constexpr int kRows = skinny_rows(L);
  const int steps = gr.k / kBlockK, ks0 = u0 / 2, ksteps = (units + 1) / 2;
  // n0 (< N) is a multiple of kRows (16): the item's rows share one 128-row block of the scales
  const uint8_t* src = gr.sfb + (n0 / 128 * steps + ks0) * kSfBlockBytes;
#pragma unroll 1
  for (int e = threadIdx.x; e < ksteps * kRows; e += kSkinnyThreads) {
    const int ks = e / kRows, r = e % kRows;
    const int64_t n = n0 + r < gr.n ? n0 + r : gr.n - 1;
    ptx::cp_async_4(dst + (ks * skinny_scale_row_words(L) + r) * 4,
                    src + (int64_t)ks * kSfBlockBytes + sf_row_offset((int)(n % 128)));
  }
  ptx::cp_async_commit();
}

// Units u0 .. u0 + units - 1 of group g's first `rows` A rows into shared memory (as units 0 ..; the other rows of
// the build's MB zero): per (unit, row) entry 16 f16x2 (value x 2^12) in the order the B pairs come out of a word
// (pairs J = 0..3 of each of the unit's four words), then the unit's two scales x 4.
template <int MB>
__device__ __forceinline__ void load_a(const SkinnyGroup& gr, int rows, uint8_t* smem, int u0, int units) {
  for (int e = threadIdx.x; e < units * MB; e += kSkinnyThreads) {
    const int u = e / MB, m = e % MB, gu = u0 + u;
    uint4 v[4] = {};
    float2 s = make_float2(0.f, 0.f);
    if (m < rows) {  // rows < 128: the first 128-row block of the scales
      const uint4 w = *reinterpret_cast<const uint4*>(gr.a + (int64_t)m * (gr.k / 2) + gu * 16);
      const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int c = 0; c < 4; ++c)
        v[c] = make_uint4(a_pair<0>(ws[c]), a_pair<1>(ws[c]), a_pair<2>(ws[c]), a_pair<3>(ws[c]));
      const uint32_t sf = *reinterpret_cast<const uint16_t*>(gr.sfa + (int64_t)(gu / 2) * kSfBlockBytes +
                                                             sf_row_offset(m) + (gu % 2) * 2);
      s = e4m3x2_to_float2(sf);
      s.x *= 4.f, s.y *= 4.f;
    }
    uint4* dst = reinterpret_cast<uint4*>(smem + entry<MB>(u, m));
#pragma unroll
    for (int c = 0; c < 4; ++c) dst[c] = v[c];
    *reinterpret_cast<float2*>(smem + entry<MB>(u, m) + 64) = s;
  }
}

// One unit of one lane's B row into acc (MB A rows), block by block: a block's 8 B pairs, then each A
// row's 8 multiply-adds with them.
template <int MB>
__device__ __forceinline__ void unit(const BUnit& b, const uint8_t* smem, int u, float (&acc)[MB]) {
  const uint32_t w[4] = {b.v.x, b.v.y, b.v.z, b.v.w};
  const float2 sb2 = e4m3x2_to_float2(b.sf);
  const float sb[2] = {sb2.x, sb2.y};
#pragma unroll
  for (int jb = 0; jb < 2; ++jb) {
    const E2m1Bytes e0 = e2m1_bytes(w[2 * jb]), e1 = e2m1_bytes(w[2 * jb + 1]);
    const uint32_t f[8] = {e2m1_pair_bytes<0>(e0), e2m1_pair_bytes<1>(e0), e2m1_pair_bytes<2>(e0),
                           e2m1_pair_bytes<3>(e0), e2m1_pair_bytes<0>(e1), e2m1_pair_bytes<1>(e1),
                           e2m1_pair_bytes<2>(e1), e2m1_pair_bytes<3>(e1)};  // value x 2^-14
#pragma unroll
    for (int m = 0; m < MB; ++m) {
      const uint8_t* e = smem + entry<MB>(u, m);
      const uint4 a0 = *reinterpret_cast<const uint4*>(e + 32 * jb);
      const uint4 a1 = *reinterpret_cast<const uint4*>(e + 32 * jb + 16);
      const float sa = *reinterpret_cast<const float*>(e + 64 + 4 * jb);
      uint32_t h = ptx::fma_f16x2(a0.x, f[0], 0u);
      h = ptx::fma_f16x2(a0.y, f[1], h);
      h = ptx::fma_f16x2(a0.z, f[2], h);
      h = ptx::fma_f16x2(a0.w, f[3], h);
      h = ptx::fma_f16x2(a1.x, f[4], h);
      h = ptx::fma_f16x2(a1.y, f[5], h);
      h = ptx::fma_f16x2(a1.z, f[6], h);
      h = ptx::fma_f16x2(a1.w, f[7], h);
      const float2 s = f16x2_to_float2(h);
      acc[m] = fmaf(s.x + s.y, sa * sb[jb], acc[m]);
    }
  }
}

// The lane's last unit (s < units), L lanes per row.
template <int L>
__device__ __forceinline__ int lane_last(int s, int units) {
  return s + (units - 1 - s) / L * L;
}

// The lane's first two units (the second repeats the first where the lane has one), loaded before the A rows
// are converted: their memory latency then passes under A's.
struct FirstUnits {
  BUnit a0, a1;
};

template <int L>
__device__ __forceinline__ FirstUnits first_units(const uint8_t* row, const uint8_t* sf_row, int s, int units) {
  const int last = lane_last<L>(s, units);
  const int second = s + L < last ? s + L : last;
  return {load_unit<L>(row, sf_row, s), load_unit<L>(row, sf_row, second)};
}

// A lane's units s, s + L, ... of its row, two per trip, the next trip's two loaded before this trip's are
// used (two buffers taking turns): two units' loads in flight per lane behind the work, the first trip's
// (`first`) loaded by the caller. Loads past the lane's last unit repeat it (read, not used).
template <int MB, int L>
__device__ __forceinline__ void lane_units(const uint8_t* row, const uint8_t* sf_row, const uint8_t* sfs,
                                           const uint8_t* smem, int s, int units, const FirstUnits& first,
                                           float (&acc)[MB]) {
  const int last = lane_last<L>(s, units);
  auto at = [last](int u) { return u < last ? u : last; };
  BUnit a0 = first.a0, a1 = first.a1;
  for (int u = s;;) {
    const BUnit b0 = load_unit<L>(row, sf_row, at(u + 2 * L)), b1 = load_unit<L>(row, sf_row, at(u + 3 * L));
    unit<MB>(with_scales<L>(a0, sfs, u), smem, u, acc);
    FL_SKINNY_MARK(3);  // a lane's first unit used: B's first bytes came
    if (u + L <= last) unit<MB>(with_scales<L>(a1, sfs, u + L), smem, u + L, acc);
    u += 2 * L;
    if (u > last) break;
    a0 = load_unit<L>(row, sf_row, at(u + 2 * L)), a1 = load_unit<L>(row, sf_row, at(u + 3 * L));
    unit<MB>(with_scales<L>(b0, sfs, u), smem, u, acc);
    if (u + L <= last) unit<MB>(with_scales<L>(b1, sfs, u + L), smem, u + L, acc);
    u += 2 * L;
    if (u > last) break;
  }
}

}  // namespace skinny

// The body of both kernels below. MASKED: the masked form (p is a MaskedSkinnyParams).
template <int MB, int L, bool MASKED>
__device__ __forceinline__ void skinny_body(const SkinnyParams& p) {
  constexpr int kRows = skinny_rows(L);
  // (its own name: the GEMM declares the dynamic shared memory `smem` with 1024-byte alignment)
  extern __shared__ __align__(16) uint8_t dyn[];
  // The inputs and C may be written by the grid before this one: wait for it.
  FL_SKINNY_MARK(0);
  ptx::griddep_wait();
  FL_SKINNY_MARK(1);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, s = lane % L;
  const int split = p.split, rank = split > 1 ? (int)ptx::cluster_ctarank() : 0;
  const int cluster = split > 1 ? (int)ptx::cluster_id_x() : (int)blockIdx.x;
  int64_t first, count;
  skinny_items(cluster, p.runs, &first, &count);
  const int64_t last = first + count;
  const int row_item = warp * (32 / L) + lane / L;  // this lane's B row
  constexpr bool kSharedScales = skinny_shared_scales(L);
  uint8_t* const scale_bufs = dyn + p.scales;  // the scales of the run's i-th item in buffer i % 2
  int g = 0;
  int u0 = 0, units = 0;  // this CTA's part of the group's K, in units
  for (int64_t item = first; item < last; ++item) {
    while (item >= p.groups[g].item_end) ++g;
    const SkinnyGroup& gr = p.groups[g];
    // the rows the group computes: its m, or in the masked form its count, clamped to 0 .. m (written by an
    // earlier grid: read after griddepcontrol.wait); a group of none loads and multiplies no B
    [[maybe_unused]] int count = 0;
    if constexpr (MASKED) {
      const int mm = __ldg(static_cast<const MaskedSkinnyParams&>(p).masked_m + g);
      count = mm < 0 ? 0 : mm < gr.m ? mm : gr.m;
    }
    const auto rows = [&]() -> int {
      if constexpr (MASKED) return count;
      else return gr.m;
    };
    // C's rounding: fp16, or in the masked form out's dtype and the expert's alpha (kernels/common/out_form.cuh;
    // alpha read like masked_m)
    [[maybe_unused]] OutForm form{1.f, false};
    if constexpr (MASKED) {
      const MaskedSkinnyParams& mp = static_cast<const MaskedSkinnyParams&>(p);
      form = {mp.alpha ? __ldg(mp.alpha + g) : 1.f, mp.out_bf16 != 0};
    }
    const auto store = [&](__half* dst, float v) {
      if constexpr (MASKED) out_store(dst, v, form);
      else *dst = __float2half_rn(v);
    };
    const bool work = !MASKED || rows() > 0;
    const int64_t group_first = g ? p.groups[g - 1].item_end : 0;
    const bool fresh = item == first || item == group_first;  // A's rows of this group to load
    if (fresh || kSharedScales) {  // at 32 lanes every item (fewer registers live across items)
      skinny::group_part<L>(gr, split, rank, &u0, &units);
      FL_SKINNY_MARK(7);  // the part known
    }
    const int steps = gr.k / kBlockK;
    const int64_t n0 = (item - group_first) * kRows;
    const int64_t row_n = n0 + row_item;
    const int64_t n = row_n < gr.n ? row_n : gr.n - 1;  // rows past N repeat the last row, unstored
    // The part's first unit (u0 even: whole chunks), its bytes and its scales.
    const uint8_t* row = gr.b + n * (gr.k / 2) + (int64_t)u0 * 16;
    const uint8_t* sf_row = gr.sfb + (n / 128) * steps * kSfBlockBytes + sf_row_offset((int)(n % 128)) +
                            (int64_t)(u0 / 2) * kSfBlockBytes;
    skinny::FirstUnits firsts{};
    if (work && s < units) firsts = skinny::first_units<L>(row, sf_row, s, units);
    const int buf = (int)(item - first) & 1;
    // the run's first item copies its own scales; each later one's were copied during the item before
    if (kSharedScales && item == first) skinny::copy_scales<L>(gr, n0, u0, units, scale_bufs);
    if (fresh) {
      if (item != first) __syncthreads();  // the previous group's A rows are no longer read
      skinny::load_a<MB>(gr, rows(), dyn, u0, units);
      if (!kSharedScales) {
        __syncthreads();
        FL_SKINNY_MARK(2);  // A's rows in shared memory
      }
    }
    if constexpr (kSharedScales) {
      ptx::cp_async_wait_all();
      // The item's scales (and where fresh, A's rows) in shared memory; every warp done with the item before,
      // so the other buffer is free: the next item's scales into it, copied while this item runs.
      __syncthreads();
      if (fresh) FL_SKINNY_MARK(2);  // A's rows in shared memory
      if (item + 1 < last) {
        int gn = g;
        while (item + 1 >= p.groups[gn].item_end) ++gn;
        int nu0 = u0, nunits = units;
        if (gn != g) skinny::group_part<L>(p.groups[gn], split, rank, &nu0, &nunits);
        skinny::copy_scales<L>(p.groups[gn], (item + 1 - (gn ? p.groups[gn - 1].item_end : 0)) * kRows, nu0,
                               nunits, scale_bufs + (buf ^ 1) * p.scale_buf);
      }
    }
    float acc[MB];
#pragma unroll
    for (int m = 0; m < MB; ++m) acc[m] = 0.f;
    const uint8_t* sfs = scale_bufs + buf * p.scale_buf + row_item * 4;  // this row's scales (kSharedScales)
    if (work && s < units) skinny::lane_units<MB, L>(row, sf_row, sfs, dyn, s, units, firsts, acc);
    FL_SKINNY_MARK(4);  // the warp's units done
    // The row's lanes' sums, added in a fixed order (the same result for the same inputs every call).
#pragma unroll
    for (int m = 0; m < MB; ++m) {
#pragma unroll
      for (int x = 1; x < L; x *= 2) acc[m] += __shfl_xor_sync(0xFFFFFFFFu, acc[m], x);
    }
    if (split == 1) {
#pragma unroll
      for (int m = 0; m < MB; ++m)
        if (s == 0 && m < rows() && row_n < gr.n) store(gr.c + (int64_t)m * gr.n + row_n, acc[m]);
      FL_SKINNY_MARK(6);  // stores issued
      continue;
    }
    float* sums = reinterpret_cast<float*>(dyn + p.sums);
    if (s == 0) {
#pragma unroll
      for (int m = 0; m < MB; ++m) sums[m * kRows + row_item] = acc[m];
    }
    ptx::cluster_sync();  // every part's sums of this item written
    FL_SKINNY_MARK(5);
    for (int e = threadIdx.x; e < MB * kRows; e += kSkinnyThreads) {
      const int m = e / kRows, r = e % kRows;
      if (m % split != rank) continue;
      float v = 0.f;
      for (int q = 0; q < split; ++q) v += ptx::ld_shared_cluster_f32(ptx::map_shared_rank(sums + e, (uint32_t)q));
      if (m < rows() && n0 + r < gr.n) store(gr.c + (int64_t)m * gr.n + n0 + r, v);
    }
    ptx::cluster_sync();  // every part's sums read: free for the next item
    FL_SKINNY_MARK(6);
  }
  ptx::griddep_launch_dependents();
}

// The skinny kernel of the task's layout: every size from the host.
template <int MB, int L>
__global__ void __launch_bounds__(kSkinnyThreads, MB <= kSkinnyTwoCtaRows ? 2 : 1)
    skinny_gemm(const __grid_constant__ SkinnyParams p) {
  skinny_body<MB, L, false>(p);
}

// The masked form on the skinny kernel (every group planned at its largest m; MaskedSkinnyParams::masked_m).
template <int MB, int L>
__global__ void __launch_bounds__(kSkinnyThreads, MB <= kSkinnyTwoCtaRows ? 2 : 1)
    skinny_gemm_masked(const __grid_constant__ MaskedSkinnyParams p) {
  skinny_body<MB, L, true>(p);
}

}  // namespace fl::sm90
