// sm_90a NVFP4 grouped GEMM: C[g] (M x N, fp16) = A[g] (M x K) . B[g] (N x K)^T, fp32 accumulation.
//
// Computed as C^T = B . A^T so that the large operand B is wgmma's A (dequantised straight into
// registers) and the small per-group M is wgmma's N: each group's tile width W (kernels/sm90/plan/planner.h kWidths,
// chosen per group; one main loop per width in this one kernel, all on one accumulator array). A is
// converted to fp16 once per launch by a separate kernel (kernels/sm90/convert_a.cuh) into a workspace, all
// groups' rows stacked with one row pitch, so tensor maps encoded on the host (one per width, its box
// one tile's A for one K step; cached while the workspace stays put) cover every group; the GEMM
// loads its A tiles from there with TMA. B's tensor map is patched on the device per group. (The direct-A
// kernels, for launches of narrow tiles only, make the fp16 A tile in the stage themselves on warps 1-3:
// direct_a_producer.)
//
// Tiles are numbered in the plan's order (groups by tile cost, costliest first). The launch's K
// steps (tile by tile, each tile's in K order) are shared out among the CTAs by the plan (kernels/sm90/plan/planner.h,
// stream-K): CTA b runs the steps from Params::start[b] up to start[b + 1], as one unit per tile it
// touches, from its last unit backwards. A tile cut between CTAs is finished by the CTA holding its
// last K step: the CTAs of lower index that hold its other steps write their fp32 sums to the
// workspace first (for them it is their first unit) and raise a flag per consumer warp (after their
// next unit's K loop, so the stores drain meanwhile); the finishing CTA (for it, its last unit)
// waits for the flags, adds the sums and stores C. Every wait is for a CTA of lower index, which
// raises its flags before it waits for anything itself: the waits form no cycle, and as the GPU
// dispatches CTAs in index order, none waits for a CTA that is not running even if not every CTA
// fits on the GPU at once.

// One CTA = 3 warpgroups, persistent over tiles of 128 B rows x W A rows:
//   warp 0          B producer: TMA for the packed B tile and bulk copies of B's 512-byte scale
//                   block of each 64-wide K step, at once with the B maps in the kernel parameters
//                   (up to 16 groups), else after the conversion kernel wrote them;
//   warp 1          A producer: waits for the conversion, then TMA for the fp16 A tile (128-byte
//                   swizzle) of each step (warps 2, 3 only hand over registers); in the direct-A
//                   kernels warps 1-3 copy and convert the caller's A rows into the stage instead;
//   warpgroups 1, 2 consumers: 64 B rows each, dequantise them into wgmma A fragments, issue the
//                   wgmma; epilogue through shared memory (stmatrix transposes the C^T fragments
//                   into C rows), then one TMA store per 64-row pass (kTmaC) or 16-byte row stores; or
//                   the partial sums of a split tile.
//
// K permutation. An MMA sums over K, so both operands may be read in any one order of K. Thread
// lane%4 == c of a consumer warp owns K range [16c, 16c+16) of a 64-wide stage (one scale block,
// 8 bytes of a row); its two 32-bit words w0 (K 16c..16c+7) and w1 (K 16c+8..16c+15) give, for
// wgmma step s (0..3), the f16x2 fragments e2m1_pair(w0, s) for logical K (16s + 2c, +1) and
// e2m1_pair(w1, s) for logical K (16s + 8 + 2c, +1) (computed as e2m1_pair_bytes, the same bits:
// tests/test_nvfp4_decode.py). The A conversion writes A in the same logical order, so logical K
// position 16s + 8b + 2c (+1) holds A's K values 16c + 8b + s (and + 4).
#pragma once
#include <cuda.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/nvfp4.cuh"
#include "sm90/plan/planner.h"
#include "sm90/epilogue.cuh"
#include "sm90/params.cuh"
#include "sm90/stream_k.cuh"
#include "sm90/trace.cuh"
#include "ptx/cp_async.cuh"
#include "ptx/cvt.cuh"
#include "ptx/griddep.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/setmaxnreg.cuh"
#include "ptx/tensormap.cuh"
#include "ptx/tma.cuh"
#include "ptx/wgmma.cuh"

namespace fl::sm90 {

// Shared memory (bytes). One ring of stages, each one 64-wide K step: the fp16 A tile (up to
// kMaxWidth rows of 128 bytes, 128-byte swizzled, 1024-byte aligned; all stages' A first), the packed
// B tile and its scale block (after them). A stage has one "full" barrier that both producers arrive
// on (each with the bytes it loads) and one "empty" barrier the consumer warps arrive on, so a
// consumer waits and arrives once per K step (two rings of their own cost one more wait, arrival and
// ring position per step). The header holds the stage barriers (from byte kOffBars).
constexpr uint32_t kSfBlockBytes = 512;  // 128 rows x 4 scale blocks
constexpr uint32_t kA16RowBytes = kBlockK * 2;
constexpr uint32_t kHeaderBytes = 1024;
constexpr uint32_t kOffBars = 256;
constexpr uint32_t kSmemLimit = 227 * 1024;
constexpr uint32_t kEpiBytes = 2 * kEpiWgBytes;  // the epilogue buffers of both consumer warpgroups
constexpr uint32_t kBRawBytes = kBlockN * kBlockK / 2;
constexpr uint32_t kAStageBytes = kMaxWidth * kA16RowBytes;
constexpr uint32_t kBStageBytes = kBRawBytes + kSfBlockBytes;  // packed B, then its scale block
constexpr uint32_t kOffA = kHeaderBytes;
constexpr int kFit = (int)((kSmemLimit - kHeaderBytes - kEpiBytes) / (kAStageBytes + kBStageBytes));
constexpr int kStages = kFit < kMaxStages ? kFit : kMaxStages;
constexpr uint32_t kOffB = kOffA + kStages * kAStageBytes;
constexpr uint32_t kOffEpi = kOffB + kStages * kBStageBytes;
// The masked form's schedule (kernels/sm90/plan/row_schedule.h): each group's tile end in the tiles that hold rows
// this call (from masked_m or offs, on the device: group_gemm's prologue), and the CTA's part of the schedule made
// of their count, after the epilogue buffers; between them each group's rows as tiled (its tiles along M times its
// width), whose fp16 A bytes tell the schedule whether the call's A is past L2.
constexpr uint32_t kOffRowTileEnds = kOffEpi + kEpiBytes;
constexpr uint32_t kOffRowTiled = kOffRowTileEnds + kGroupsPerLaunch * 4;
constexpr uint32_t kOffRowSched = kOffRowTiled + kGroupsPerLaunch * 4;
constexpr uint32_t kSmemBytes = kOffRowSched + sizeof(RowCta);

static_assert(kStages >= 4, "pipeline depth");
static_assert(kSmemBytes <= kSmemLimit, "shared memory");

__device__ __forceinline__ int32_t* row_tile_ends() {
  extern __shared__ __align__(1024) uint8_t smem[];
  return reinterpret_cast<int32_t*>(smem + kOffRowTileEnds);
}
__device__ __forceinline__ uint32_t* row_tiled_rows() {
  extern __shared__ __align__(1024) uint8_t smem[];
  return reinterpret_cast<uint32_t*>(smem + kOffRowTiled);
}
__device__ __forceinline__ RowCta* row_cta_smem() {
  extern __shared__ __align__(1024) uint8_t smem[];
  return reinterpret_cast<RowCta*>(smem + kOffRowSched);
}
static_assert(kOffEpi % 1024 == 0 && kEpiWgBytes % 1024 == 0,
              "epilogue buffers in the 128-byte swizzle's alignment (TMA stores)");
static_assert(kAStageBytes % 1024 == 0 && kOffA % 1024 == 0, "A stages keep the 128-byte swizzle's alignment");
static_assert(kBStageBytes % 128 == 0 && kOffB % 128 == 0, "TMA and bulk-copy destinations aligned");
static_assert(kOffBars + 2 * 8 * kMaxStages <= kHeaderBytes, "barriers fit the header");
static_assert(kBlockK == 64, "one stage is one 512-byte scale block per 128 rows; an fp16 A row is one swizzle row");
static_assert(kBlockN == 128, "two consumer warpgroups of 64 rows share one 128-row scale block");
static_assert(kMaxWidth <= ptx::kWgmmaNMax && kMaxWidth <= 256, "tile width is wgmma N and one TMA box");
static_assert(kWidths[kNumWidths - 1] == kMaxWidth, "the stage holds the widest tile");
static_assert(kWgmmaNStep == ptx::kWgmmaNStep, "sm90/plan/geometry.h and the generated wgmma table disagree");
static_assert(kThreads == 384, "warps 0, 1 producers, warpgroups 1-2 consumers");

// B tensor maps, one per group in Params::groups order: launches of up to kGroupsSmall groups carry
// them in the kernel parameters (Params::map_b, encoded on the host), so the B producer starts
// without waiting for the conversion kernel (calls 1.4% faster than with the maps in the workspace).
// Larger launches find them in the call's workspace (Params::b_maps), written by the conversion kernel
// (released through the tensormap proxy) before this grid passes griddepcontrol.wait; the B producer
// acquires each before its first TMA with it. (Patching a map per CTA here instead put ~1.2 us before
// every CTA's first B load.) No grid rewrites them while this one runs: a workspace belongs to
// one call on one stream, and the next call's conversion writes its maps only after its
// griddepcontrol.wait, i.e. after this grid completed.
constexpr int kMapBytes = 128;
// MaskedParams::b_prefetch: the K steps of B a CTA brings into L2 before its wait (at most a warp's lanes).
constexpr int kPrefetchSteps = 8;
static_assert(kPrefetchSteps <= 32, "a lane a step");

__device__ __forceinline__ uint2 lds64(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint32_t lds8(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u8 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}
// Byte offset of row r's four scales (K blocks 0..3 of the stage) inside a 512-byte scale block.
__host__ __device__ __forceinline__ uint32_t sf_row_offset(int r) { return (r % 32) * 16 + ((r % 128) / 32) * 4; }

// The eight fp16 chunks of one row's 64-wide K step of NVFP4 A in the K permutation above, scales folded in: chunk
// q = 2 s4 + b (0..7), word c holding K 16c + 8b + s4 (and + 4), handed to put(q, chunk). lo, hi: the step's 32
// packed bytes; sf: the row's scale word of the step (its four blocks' E4M3 scales). The A conversion
// (kernels/sm90/convert_a.cuh) and the direct-A producer below build A rows so.
template <class Put>
__device__ __forceinline__ void nvfp4_chunks(uint4 lo, uint4 hi, uint32_t sf, Put&& put) {
  const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  uint32_t sc[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) sc[c] = ptx::e4m3_to_f16x2_bcast(sf >> (8 * c));
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    const int s4 = q / 2, b = q % 2;
    uint32_t v[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) v[c] = ptx::mul_f16x2(e2m1_pair(w[2 * c + b], s4), sc[c]);
    put(q, make_uint4(v[0], v[1], v[2], v[3]));
  }
}

// The four fragments of k16 step S from the four words' bytes (rows r0, r1 of word 0; rows r0, r1
// of word 1), times their rows' scales.
template <int S>
__device__ __forceinline__ void dequant_step(uint32_t (&f)[4][4], const E2m1Bytes (&e)[4], uint32_t s0, uint32_t s1) {
  f[S][0] = ptx::mul_f16x2(e2m1_pair_bytes<S>(e[0]), s0);
  f[S][1] = ptx::mul_f16x2(e2m1_pair_bytes<S>(e[1]), s1);
  f[S][2] = ptx::mul_f16x2(e2m1_pair_bytes<S>(e[2]), s0);
  f[S][3] = ptx::mul_f16x2(e2m1_pair_bytes<S>(e[3]), s1);
}

// B rows r0 and r0+8, K block c of a stage -> the four steps' wgmma A fragments (see the K
// permutation at the top of this file). Half tiles (HALF): the stage holds the tile's 64 rows only,
// and `sr0` is row r0's row in the 128-row scale block; else r0 is.
template <bool HALF>
__device__ __forceinline__ void dequant_b(uint32_t (&f)[4][4], uint32_t stage, int r0, int c, int sr0) {
  const int r1 = r0 + 8;
  const uint2 b0 = lds64(stage + r0 * 32 + 8 * c);
  const uint2 b1 = lds64(stage + r1 * 32 + 8 * c);
  const uint32_t sf = stage + kBRawBytes + c;
  const uint32_t s0 = ptx::e4m3_to_f16x2_bcast(lds8(sf + sf_row_offset(HALF ? sr0 : r0)));
  const uint32_t s1 = ptx::e4m3_to_f16x2_bcast(lds8(sf + sf_row_offset(HALF ? sr0 + 8 : r1)));
  const E2m1Bytes e[4] = {e2m1_bytes(b0.x), e2m1_bytes(b1.x), e2m1_bytes(b0.y), e2m1_bytes(b1.y)};
  dequant_step<0>(f, e, s0, s1);
  dequant_step<1>(f, e, s0, s1);
  dequant_step<2>(f, e, s0, s1);
  dequant_step<3>(f, e, s0, s1);
}

// The four k16 steps of one 64-wide K step against the stage's fp16 A tile (W rows of 128 bytes,
// 128-byte swizzle: k16 step s4 starts 32 bytes further into each row), wgmma N = W (the tile's
// last rows past the group's M are computed, not stored); `first` starts from zero.
template <int W>
// `desc_lo`: the low word of the stage's descriptor (Smem::a_desc_lo); a k16 step adds 32 bytes, 2
// in the descriptor's address field (the address / 16, which does not overflow in shared memory);
// the high word is the same for every stage.
__device__ __forceinline__ void mma_step(float (&acc)[W / 2], const uint32_t (&f)[4][4], uint32_t desc_lo, bool first) {
  constexpr uint32_t kDescHi = (uint32_t)(ptx::smem_desc_swizzle128(0, 8 * kA16RowBytes) >> 32);
  ptx::wgmma_fence();
#pragma unroll
  for (int s4 = 0; s4 < 4; ++s4) {
    const uint64_t desc = ((uint64_t)kDescHi << 32) | (desc_lo + 2 * s4);
    ptx::WgmmaRS<W>::mma(acc, f[s4][0], f[s4][1], f[s4][2], f[s4][3], desc, !(first && s4 == 0));
  }
  ptx::wgmma_commit();
}

// Barrier and stage addresses in shared memory.
struct Smem {
  uint32_t base;
  __device__ uint32_t full(int s) const { return base + kOffBars + 8u * s; }  // A and B landed
  __device__ uint32_t empty(int s) const { return base + kOffBars + 8u * (kMaxStages + s); }  // its wgmma done
  __device__ uint32_t a_stage(int s) const { return base + kOffA + s * kAStageBytes; }
  // Low word of A stage s's wgmma descriptor: stage 0's plus the stage offset / 16 (no carry out of
  // the 14-bit address field: shared memory ends below 2^18 bytes).
  __device__ uint32_t a_desc_lo(int s) const {
    return (uint32_t)ptx::smem_desc_swizzle128(a_stage(0), 8 * kA16RowBytes) + s * (kAStageBytes >> 4);
  }
  __device__ uint32_t b_stage(int s) const { return base + kOffB + s * kBStageBytes; }
};

// A position in a ring of N stages: the stage and the phase parity of its barriers.
template <int N>
struct RingPos {
  int s = 0;
  uint32_t ph = 0;
  __device__ void next() {
    if (++s == N) s = 0, ph ^= 1;
  }
};

// Registers per thread after setmaxnreg, within the 384 x 168 = 64512 the CTA starts with:
// 128 x 40 + 256 x 232 = 64512.
constexpr int kConsumerRegs = 232;
constexpr int kProducerRegs = 40;

// The consumers' place in the ring, advanced once per K step by counting (no division: the ring
// size need not be a power of two), and the stage of the previous step (retired one step later).
struct ConsumerPos {
  RingPos<kStages> r;
  int prev = 0;
  __device__ void next() {
    prev = r.s;
    r.next();
  }
};

// C stored by TMA (kernels/sm90/epilogue.cuh store_pass): launches of up to kGroupsSmall groups (whose C maps are
// kernel parameters, Params::map_c) with every C row aligned (not ANY); reduced tiles store no C here, and
// the masked form stores no row past its group's masked_m (a TMA store writes a box's every row up to the map's).
template <int MAXG, bool ANY, bool RED, bool MASKED = false>
constexpr bool kTmaC = MAXG <= kGroupsSmall && !ANY && !RED && !MASKED;

// The contiguous layout's first row of group g (MaskedParams::offs; 0 in the masked layout): offs[g-1] clamped to
// 0 .. m (written by an earlier grid: read after griddepcontrol.wait).
template <int MAXG>
__device__ __forceinline__ int first_row(const MaskedParams<MAXG>& p, int g) {
  if (!p.offs || g == 0) return 0;
  const int s = __ldg(p.offs + g - 1), m = p.groups[g].m;
  return s < 0 ? 0 : s < m ? s : m;
}

// The rows group g computes this call: its planned m, or in the masked form masked_m[g] clamped to
// 0 .. m, or in the contiguous layout offs[g] clamped to first_row .. m, less first_row (written by an earlier
// grid: read after griddepcontrol.wait; `p` is then a MaskedParams). The task form's launches on the device
// schedule (kernels/sm90/plan/row_plan.h) have neither: their m.
template <bool MASKED, int MAXG>
__device__ __forceinline__ int call_rows(const Params<MAXG>& p, int g) {
  const int m = p.groups[g].m;
  if constexpr (MASKED) {
    const MaskedParams<MAXG>& mp = static_cast<const MaskedParams<MAXG>&>(p);
    if (mp.offs) {
      const int s = first_row(mp, g), e = __ldg(mp.offs + g);
      return (e < s ? s : e < m ? e : m) - s;
    }
    if (!mp.masked_m) return m;
    const int mm = __ldg(mp.masked_m + g);
    return mm < 0 ? 0 : mm < m ? mm : m;
  } else {
    return m;
  }
}

// C's pointer, rows and row length for the epilogue (store_tile reads these three), and its rounding: the masked
// form's rows are its group's masked_m, its C fp16 or bf16 (out's dtype) scaled by the expert's alpha where given.
struct CallC {
  __half* c;  // fp16 or bf16 bits
  int32_t m, n;
  OutForm form;
};
__device__ __forceinline__ OutForm out_form(const CallC& c) { return c.form; }

// The masked form's C rounding for group g: the accumulators' scale undone (MaskedParams::unscale) times alpha[g]
// where alpha is given, to bf16 or fp16 (alpha: written by an earlier grid, read after griddepcontrol.wait).
template <int MAXG>
__device__ __forceinline__ OutForm masked_out_form(const MaskedParams<MAXG>& p, int g) {
  return {p.alpha ? p.unscale * __ldg(p.alpha + g) : p.unscale, p.out_bf16 != 0};
}

// Group g's C map where the launch has them (kTmaC), else null.
template <bool TMA, int MAXG>
__device__ __forceinline__ const void* c_map(const Params<MAXG>& p, int g) {
  if constexpr (TMA) return &p.map_c[g];
  else return nullptr;
}

// One consumer K step at `pos`: wait for the stage, dequantise its B into registers, issue the
// step's wgmma, then retire the previous step (its wgmma done: its stage is free). Releasing B
// right after its dequantisation instead (it is read by no wgmma) measured 4% slower on every shape
// (an arrive between the dequantisation and the wgmma issue).
// Callers alternate two fragment sets, so the registers of the previous step's wgmma are not
// overwritten while they may still run. r0: the thread's first B row in the tile.
// Half tiles (HALF): `sr0`, row r0's row in the 128-row scale block.
template <int W, bool HALF = false, bool EL = false>
__device__ __forceinline__ void consumer_step(const Smem& sm, float (&acc)[W / 2], uint32_t (&f)[4][4],
                                              ConsumerPos& pos, int kc, int r0, int c, int lane, int sr0 = 0) {
  ptx::mbar_wait(sm.full(pos.r.s), pos.r.ph);
  dequant_b<HALF>(f, sm.b_stage(pos.r.s), r0, c, sr0);
  mma_step<W>(acc, f, sm.a_desc_lo(pos.r.s), kc == 0);
  if (kc > 0) {
    // The stage goes back to the producers in order: every lane's lds64/lds8 of it precedes __syncwarp()
    // (bar.warp.sync orders memory among the warp's lanes), so it happens before lane 0's
    // mbarrier.arrive.release.cta; the producers' try_wait.acquire.cta on "empty" succeeds only after all
    // kConsumerWarps arrivals and synchronises with each, and their lane 0 issues the next TMA and bulk copy
    // into the stage only after that wait. The consumers write nothing to the stage (no proxy fence needed
    // before the async-proxy writes), and wgmma_wait<1> has retired the previous step's wgmma, the stage's
    // one async-proxy reader. racecheck's bulk_load/lds8 reports on this hand-off: docs/sanitize.md and
    // tools/sanitize/racecheck_probe.cu (variants lane0 and all_lanes).
    ptx::wgmma_wait<1>();
    __syncwarp();
    if constexpr (EL) ptx::mbar_arrive_elected(sm.empty(pos.prev));
    else if (lane == 0) ptx::mbar_arrive(sm.empty(pos.prev));
  }
  pos.next();
}

// A unit's K loop of `steps` steps at wgmma N on the first N / 2 sums of `all`, to the last wgmma's end.
// EL: the stage's release by an elected lane (the narrow build).
template <int N, bool EL = false>
__device__ __forceinline__ void k_loop(const Smem& sm, float (&all)[kMaxWidth / 2], ConsumerPos& pos, int steps,
                                       int r0, int c, int lane) {
  float(&acc)[N / 2] = *reinterpret_cast<float(*)[N / 2]>(&all[0]);
  uint32_t fa[4][4], fb[4][4];
  for (int kc = 0; kc < steps; kc += 2) {
    consumer_step<N, false, EL>(sm, acc, fa, pos, kc, r0, c, lane);
    if (kc + 1 < steps) consumer_step<N, false, EL>(sm, acc, fb, pos, kc + 1, r0, c, lane);
  }
  ptx::wgmma_wait<0>();
}

// One unit of a tile of width W: its K loop, then the epilogue, or the partial sums for the CTA that
// finishes the tile. `all` is the accumulator array every width shares (a width uses its first
// W / 2 registers). N: the wgmma's N (W, or in the narrow and mid builds kernels/sm90/plan/planner.h kNarrowN, kMidN), the K loop
// on the first N / 2 sums; the sums past N are left as they are: they belong to A rows past the tile's
// (N covers them), which no epilogue stores and no partial sum carries into a stored row.
// `pending`: this warp's flag, raised after the next unit's K loop (or at the end). MASKED: the masked form
// (its rows from masked_m, C stored by the threads).
template <int W, bool ANY, bool RED, int N, bool EL = false, bool MASKED = false, int MAXG>
__device__ __forceinline__ void consumer_unit(const Params<MAXG>& p, const Smem& sm, float (&all)[kMaxWidth / 2],
                                              const Unit& w, ConsumerPos& pos, int r0, int c, int cw, int wq,
                                              int lane, uint64_t*& pending, uint64_t* tr) {
  float(&acc)[W / 2] = *reinterpret_cast<float(*)[W / 2]>(&all[0]);
  const Group& gr = p.groups[w.tile.g];
  // trace: when the first stage lands. The condition is the warp's (the traced thread's warp waits too):
  // a branch on `tr` alone is divergent to ptxas, which then kept the K loops' ring position and wgmma
  // descriptors out of uniform registers (9% more instructions per step).
  if (__any_sync(0xffffffffu, tr != nullptr)) {
    ptx::mbar_wait(sm.full(pos.r.s), pos.r.ph);
    trace(tr, kTrFirstFull);
  }
  const int steps = w.k1 - w.k0;
  k_loop<N, EL>(sm, all, pos, steps, r0, c, lane);
  trace(tr, kTrFirstMainloop);
  __syncwarp();
  if (lane == 0) ptx::mbar_arrive(sm.empty(pos.prev));
  raise_flag(pending, flag_epoch(p.flags), lane);
  const int cwarp = 4 * cw + wq;
  const int m = call_rows<MASKED>(p, w.tile.g);
  const int rows = min(W, m - w.tile.m0);  // the tile's valid A rows
  // A unit that does not finish its tile hands its sums on; RED (reduced tiles): every unit, to the
  // reduce kernel, with no flag (that kernel runs after this grid).
  if (RED || !w.ends_tile()) {
    write_partial<W>(acc, p.partials + (size_t)blockIdx.x * (kPartialBytes / 4), rows, cwarp, lane);
    if (!RED) pending = p.flags + blockIdx.x * kConsumerWarps + cwarp;
    trace(tr, kTrFirstEpilogue);
    return;
  }
  if (w.k0 > 0) add_partials<W, MASKED>(p, acc, blockIdx.x, w.t, rows, cwarp, lane);
  constexpr bool kTma = kTmaC<MAXG, ANY, RED, MASKED>;
  if constexpr (MASKED)
    store_tile<W, false, ANY, kTma>(sm.base + kOffEpi + cw * kEpiWgBytes, acc,
                                    CallC{gr.c + (size_t)first_row(static_cast<const MaskedParams<MAXG>&>(p),
                                                                   w.tile.g) * gr.n,
                                          m, gr.n, masked_out_form(static_cast<const MaskedParams<MAXG>&>(p),
                                                                   w.tile.g)},
                                    w.tile.m0, w.tile.n0, cw, wq, lane, c_map<kTma>(p, w.tile.g));
  else
    store_tile<W, false, ANY, kTma>(sm.base + kOffEpi + cw * kEpiWgBytes, acc, gr, w.tile.m0, w.tile.n0, cw, wq,
                                    lane, c_map<kTma>(p, w.tile.g));
  trace(tr, kTrFirstEpilogue);
}

// Half tiles (kernels/sm90/plan/planner.h kHalfBlockN): both consumer warpgroups work on the tile's 64 B rows (a 64-row B
// box; their scales are the upper or lower half of the 128-row scale block), warpgroup cw on the K
// steps at ring positions of parity cw: kStages is even, so a stage always serves the same warpgroup
// and its empty barrier counts that warpgroup's four warps. Then the warpgroups add their sums through the epilogue buffers, one
// epilogue pass (64 A rows = 16 KB of fp32; thread t's float4 i at (128 i + t) x 16 bytes) at a time:
// pass H belongs to warpgroup H % 2, which adds the other's part and stores that pass of C (store_tile). Named
// barriers 3 (the buffers are free: both warpgroups have read their previous part and stored their
// previous tile's passes) and 4 (the part is written) over both warpgroups.
constexpr uint32_t kBarHalfFree = 3, kBarHalfFull = 4;
static_assert(kEpiBytes == 16 * 1024, "one 64-row part of a warpgroup's fp32 sums fills both epilogue buffers");

template <int W, bool ANY, int MAXG>
__device__ __forceinline__ void consumer_unit_half(const Params<MAXG>& p, const Smem& sm, float (&all)[kMaxWidth / 2],
                                                   const Unit& w, ConsumerPos& pos, int rq, int c, int cw, int wq,
                                                   int lane, uint64_t* tr) {
  float(&acc)[W / 2] = *reinterpret_cast<float(*)[W / 2]>(&all[0]);
  const Group& gr = p.groups[w.tile.g];
  const int sr0 = 64 * ((w.tile.n0 / kHalfBlockN) % 2) + rq;  // the row in the 128-row scale block
  const int r0 = rq;  // the stage holds the tile's 64 rows (a 64-row B box)
  uint32_t fa[4][4], fb[4][4];
  const int steps = w.k1 - w.k0;  // whole tiles: all of them
  const int kc0 = (pos.r.s & 1) != cw;  // this warpgroup's first step: 0 or 1
  if (kc0) pos.r.next();
  const int own = (steps - kc0 + 1) / 2;  // its steps: kc0, kc0 + 2, ...
  // consumer_step's step index i: the first zeroes the sums, later ones retire the previous; after
  // each step but the unit's last, the other warpgroup's step is skipped
  for (int i = 0; i < own; i += 2) {
    consumer_step<W, true>(sm, acc, fa, pos, i, r0, c, lane, sr0);
    if (kc0 + 2 * i + 1 < steps) pos.r.next();
    if (i + 1 < own) {
      consumer_step<W, true>(sm, acc, fb, pos, i + 1, r0, c, lane, sr0);
      if (kc0 + 2 * i + 3 < steps) pos.r.next();
    }
  }
  ptx::wgmma_wait<0>();
  if (own > 0) {
    __syncwarp();
    if (lane == 0) ptx::mbar_arrive(sm.empty(pos.prev));
  }
#pragma unroll
  for (int i = 0; i < W / 2; ++i) acc[i] = own > 0 ? acc[i] : 0.f;  // none: the other took the only step
  trace(tr, kTrFirstMainloop);
  const int rows = min(W, gr.m - w.tile.m0);  // uniform over both warpgroups
  constexpr bool kTma = kTmaC<MAXG, ANY, false>;
  epilogue_buffer_read<kTma>();  // the previous tile's TMA stores have read the buffers the sums go through
  const uint32_t xbuf = sm.base + kOffEpi + (uint32_t)(wq * 32 + lane) * 16;
#pragma unroll
  for (int j = 0; j < W / 64; ++j) {
    if (j == 0 || rows > 64 * j) {
      ptx::named_barrier(kBarHalfFree, 256);
      if (j % 2 != cw) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float* a = &acc[32 * j + 4 * i];
          ptx::sts128(xbuf + i * 128 * 16, a[0], a[1], a[2], a[3]);
        }
      }
      ptx::named_barrier(kBarHalfFull, 256);
      if (j % 2 == cw) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const uint4 v = ptx::lds128(xbuf + i * 128 * 16);
          float* a = &acc[32 * j + 4 * i];
          a[0] += __uint_as_float(v.x), a[1] += __uint_as_float(v.y), a[2] += __uint_as_float(v.z),
              a[3] += __uint_as_float(v.w);
        }
      }
    }
  }
  // the buffers are both warpgroups' again once the last part is read
  ptx::named_barrier(kBarHalfFree, 256);
  store_tile<W, true, ANY, kTma>(sm.base + kOffEpi + cw * kEpiWgBytes, acc, gr, w.tile.m0, w.tile.n0, cw, wq, lane,
                                 c_map<kTma>(p, w.tile.g));
  trace(tr, kTrFirstEpilogue);
}

// The narrow build (kernels/sm90/plan/planner.h kNarrowN): a unit of the narrowest width at wgmma N = kNarrowN where its group's
// tiles take it (narrow_tiles), else at W; each N a unit of its own (K loop and epilogue: K loops of
// different N before one epilogue made ptxas serialise the wgmma, C7515).
template <int W, bool ANY, bool MASKED, int MAXG>
__device__ __forceinline__ void narrow_unit(const Params<MAXG>& p, const Smem& sm, float (&all)[kMaxWidth / 2],
                                            const Unit& w, ConsumerPos& pos, int r0, int c, int cw, int wq, int lane,
                                            uint64_t*& pending, uint64_t* tr) {
  if constexpr (W == kWidths[0]) {
    if (narrow_tiles(p.groups[w.tile.g])) {
      consumer_unit<W, ANY, false, kNarrowN, true, MASKED>(p, sm, all, w, pos, r0, c, cw, wq, lane, pending, tr);
      return;
    }
  }
  consumer_unit<W, ANY, false, W, true, MASKED>(p, sm, all, w, pos, r0, c, cw, wq, lane, pending, tr);
}

// The main loop of the tile's width (kernels/sm90/plan/planner.h kWidths: more main loops in one kernel made ptxas
// serialise the wgmma, C7512). HALF: half tiles (r0 is then the row inside the warpgroup's 64).
template <bool HALF, bool ANY, bool RED, int BUILD, bool MASKED = false, int I = 0, int MAXG>
__device__ __forceinline__ void consumer_dispatch(const Params<MAXG>& p, const Smem& sm, float (&all)[kMaxWidth / 2],
                                                  const Unit& w, ConsumerPos& pos, int r0, int c, int cw,
                                                  int wq, int lane, uint64_t*& pending, uint64_t* tr) {
  constexpr int W = kWidths[I];
  if constexpr (I + 1 < kNumWidths) {
    if (p.groups[w.tile.g].width > W) {
      consumer_dispatch<HALF, ANY, RED, BUILD, MASKED, I + 1>(p, sm, all, w, pos, r0, c, cw, wq, lane, pending, tr);
      return;
    }
  }
  if constexpr (HALF) consumer_unit_half<W, ANY>(p, sm, all, w, pos, r0, c, cw, wq, lane, tr);
  else if constexpr (BUILD == kBuildNarrow)
    narrow_unit<W, ANY, MASKED>(p, sm, all, w, pos, r0, c, cw, wq, lane, pending, tr);
  // the mid build: each width's loop at its one wgmma N, kernels/sm90/plan/planner.h mid_loop_n (the planner runs no tile it does not
  // cover on it: mid_fits)
  else consumer_unit<W, ANY, RED, BUILD == kBuildMid ? mid_loop_n(W) : W, false, MASKED>(p, sm, all, w, pos, r0, c,
                                                                                          cw, wq, lane, pending, tr);
}

// MaskedParams::b_prefetch (warp 0, before the prologue's wait): lane s brings into L2 K step s of the B tile (and
// its scale block) numbered blockIdx.x among the planned tiles, where they are no more than the grid. Not inlined:
// it keeps its registers out of the kernel's allocation.
template <int MAXG>
__device__ __noinline__ void prefetch_planned_b(const Params<MAXG>& p) {
  const int planned = p.tile_end[p.num_groups - 1], lane = threadIdx.x % 32;
  if (planned > p.num_ctas || (int)blockIdx.x >= planned) return;
  const Tile t = decode_tile<kBlockN>(p, blockIdx.x, 0, p.tile_end, true);
  if (lane < kPrefetchSteps && lane < t.kstages) {
    ptx::tma_prefetch_2d(&p.map_b[t.g], lane * (kBlockK / 2), t.n0);
    ptx::bulk_prefetch_l2(p.groups[t.g].sfb + ((int64_t)(t.n0 / kBlockN) * t.kstages + lane) * kSfBlockBytes,
                          kSfBlockBytes);
  }
}

// The direct-A kernels (nvfp4_group_gemm_direct, nvfp4_group_gemm_masked_direct): launches of up to kGroupsSmall
// groups whose every tile is a narrow tile of the narrow build (at most kNarrowN A rows) run with no conversion kernel
// before them, so a call is one launch. Warps 1 to kDirectWarps make each K step's fp16 A rows themselves from the
// caller's A, the steps dealt out in turn (the CTA's step i to warp 1 + i % kDirectWarps, so that converting, the
// slow part, runs on that many warps at once): lane r owns the tile's row r; it copies the row's bytes of the step
// into the stage past its fp16 rows (cp.async; zeros for rows past the group's, which read nothing), kDirectAhead of
// its warp's steps ahead of the step it converts; to convert one it waits for its oldest copies, writes the row's
// eight fp16 chunks where the TMA of the fp16 tile would have put them (128-byte swizzle), orders them before the
// wgmma's reads (the async proxy), and lane 0 arrives on the stage's full barrier in place of the TMA's bytes. NVFP4
// A: the row's 32 packed bytes and its scale word, decoded as the conversion kernel does (nvfp4_chunks). fp16 or bf16
// A (the masked form's weight-only calls: sfa null): the row's 128 bytes in eight 16-byte copies, copy j at slot
// j ^ (r % 8) (no bank conflicts when each lane reads its own row), permuted into the K order (k_order_pair, as
// k_order_word) and, bf16, rounded to fp16, as the conversion kernel does.
constexpr uint32_t kDirectRaw = kNarrowN * kA16RowBytes;               // lane r's copies at + 32 r (fp16: + 128 r)
constexpr uint32_t kDirectSf = kDirectRaw + kNarrowN * (kBlockK / 2);  // ... and its scale word at + 4 r
constexpr int kDirectWarps = 3;
constexpr int kDirectAhead = 1;
static_assert(kNarrowN == 32, "a lane a row");
static_assert(kDirectSf + kNarrowN * 4 <= kAStageBytes && kDirectRaw + kNarrowN * kA16RowBytes <= kAStageBytes,
              "the copies fit the stage past its fp16 rows");
static_assert(1 + kDirectWarps <= kThreads / 32 / 3, "the A warps are the producer warpgroup's after warp 0");
// The stage a warp's copy of step i waits for (its empty barrier) is released once the consumers are done with step
// i - kStages. The warp has converted its steps up to i - kDirectWarps * (kDirectAhead + 1) before it waits, so no
// step it has yet to convert is among those the release waits for (each other warp's likewise, down the chain).
static_assert(kDirectWarps * (kDirectAhead + 1) <= kStages, "no wait for a step not yet converted");

// The warp's oldest step copied (at `rc`) converted into its stage and handed to the consumers; rc advanced to the
// warp's next step. wide: the copies are fp16 or bf16 (bf16) rows, else NVFP4.
__device__ __forceinline__ void direct_a_step(const Smem& sm, RingPos<kStages>& rc, int lane, bool wide, bool bf16) {
  const uint32_t st = sm.a_stage(rc.s), row = st + 128 * lane;
  if (wide) {
    const uint32_t raw = st + kDirectRaw + 128 * lane;
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      uint32_t w[4][4];  // [c]: the row's words 8c + 4b .. 8c + 4b + 3 (its 16-byte copy 2c + b)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const uint4 t = ptx::lds128(raw + 16 * ((2 * c + b) ^ (lane % 8)));
        w[c][0] = t.x, w[c][1] = t.y, w[c][2] = t.z, w[c][3] = t.w;
#pragma unroll
        for (int i = 0; i < 4; ++i) w[c][i] = bf16 ? ptx::bf16x2_to_f16x2(w[c][i]) : w[c][i];
      }
      // chunk q = 2 s4 + b, word c: K 16c + 8b + s4 and + 4, halves s4 % 2 of words 8c + 4b + s4 / 2 and + 2
#pragma unroll
      for (int s4 = 0; s4 < 4; ++s4) {
        uint32_t v[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) v[c] = k_order_pair(w[c][s4 / 2], w[c][s4 / 2 + 2], s4);
        ptx::sts128(row + 16 * ((2 * s4 + b) ^ (lane % 8)), make_uint4(v[0], v[1], v[2], v[3]));
      }
    }
  } else {
    nvfp4_chunks(ptx::lds128(st + kDirectRaw + 32 * lane), ptx::lds128(st + kDirectRaw + 32 * lane + 16),
                 ptx::lds32(st + kDirectSf + 4 * lane),
                 [&](int q, uint4 v) { ptx::sts128(row + 16 * (q ^ (lane % 8)), v); });
  }
  ptx::fence_proxy_async_smem();  // the chunks, before the wgmma (async proxy) reads them
  __syncwarp();
  if (lane == 0) ptx::mbar_arrive(sm.full(rc.s));
#pragma unroll
  for (int i = 0; i < kDirectWarps; ++i) rc.next();  // this warp's next step
}

// Warp 1 + part (part < kDirectWarps) of the direct-A kernels: the CTA's K steps i with i % kDirectWarps == part, in
// the consumers' order. Every group of a launch has A of one kind (the first group's sfa null: fp16 or bf16,
// Params::a_bf16).
template <bool MASKED, class S, int MAXG>
__device__ __forceinline__ void direct_a_producer(const Params<MAXG>& p, const Smem& sm, S& share, int part, int lane) {
  if constexpr (!MASKED) ptx::griddep_wait();  // A is an input (the masked form waited in its prologue)
  const bool wide = MASKED && p.groups[0].sfa == nullptr, bf16 = p.a_bf16 != 0;  // (the task form's A: NVFP4)
  RingPos<kStages> rl, rc;  // the next step (of all) copied or passed over; this warp's next step converted
  for (int i = 0; i < part; ++i) rc.next();
  int turn = 0;   // the next step's i % kDirectWarps
  int ahead = 0;  // this warp's steps copied, not yet converted
  for (int u = 0; u < share.units(); ++u) {
    const Unit w = share.template unit<kBlockN>(p, u);
    const Group& gr = p.groups[w.tile.g];
    const int row = w.tile.m0 + lane, steps = gr.k / kBlockK;
    const uint32_t fill = row < call_rows<MASKED>(p, w.tile.g) ? 16u : 0u;
    const int r = fill ? row : 0;  // (a row past the group's reads nothing: row 0's address stands in)
    const uint8_t* a = gr.a + (int64_t)r * (wide ? gr.k * 2 : gr.k / 2);
    const uint8_t* sf = wide ? nullptr : gr.sfa + (int64_t)(r / 128) * steps * kSfBlockBytes + sf_row_offset(r);
    for (int kc = w.k0; kc < w.k1; ++kc, rl.next()) {
      const bool mine = turn == part;
      turn = turn + 1 == kDirectWarps ? 0 : turn + 1;
      if (!mine) continue;
      ptx::mbar_wait(sm.empty(rl.s), rl.ph ^ 1);
      const uint32_t st = sm.a_stage(rl.s);
      if (wide) {
        const uint8_t* src = a + kc * kA16RowBytes;
#pragma unroll
        for (int j = 0; j < 8; ++j)
          ptx::cp_async_16_fill(st + kDirectRaw + 128 * lane + 16 * (j ^ (lane % 8)), src + 16 * j, fill);
      } else {
        ptx::cp_async_16_fill(st + kDirectRaw + 32 * lane, a + kc * (kBlockK / 2), fill);
        ptx::cp_async_16_fill(st + kDirectRaw + 32 * lane + 16, a + kc * (kBlockK / 2) + 16, fill);
        ptx::cp_async_4_fill(st + kDirectSf + 4 * lane, sf + (int64_t)kc * kSfBlockBytes, fill / 4);
      }
      ptx::cp_async_commit();
      if (++ahead > kDirectAhead) {
        ptx::cp_async_wait<kDirectAhead>();
        direct_a_step(sm, rc, lane, wide, bf16);
        --ahead;
      }
    }
  }
  ptx::cp_async_wait_all();
  for (; ahead > 0; --ahead) direct_a_step(sm, rc, lane, wide, bf16);
}

// HALF: half tiles (kernels/sm90/plan/planner.h kHalfBlockN, whole tiles only; consumer_unit_half). ANY: C rows at any
// alignment stored in aligned 16-byte chunks (kernels/sm90/epilogue.cuh), for launches with such rows. RED:
// reduced tiles (kernels/sm90/plan/planner.h): every CTA stores its one unit's partial sums for the reduce kernel
// (kernels/sm90/reduce.cuh), which stores C. BUILD: kernels/sm90/plan/planner.h kBuildMain, kBuildNarrow (the narrow build, kNarrowN)
// or kBuildMid (the mid build, kMidN); the last two whole and split tiles only. MASKED: the masked form
// (MaskedParams::masked_m; whole and split tiles, C rows aligned and stored by the threads). DIRECT: the direct-A
// kernels (narrow tiles only, A made by warps 1-3). The body of the kernels below.
template <int MAXG, bool HALF, bool ANY, bool RED, int BUILD, bool MASKED, bool DIRECT = false>
__device__ __forceinline__ void group_gemm(const Params<MAXG>& p) {
  static_assert(!DIRECT || (MAXG <= kGroupsSmall && BUILD == kBuildNarrow), "direct A: narrow tiles, B maps in Params");
  static_assert(!HALF || kStages % 2 == 0, "half tiles: each stage serves one consumer warpgroup");
  static_assert(!RED || (!HALF && !ANY), "reduced tiles: whole-tile units, C stored by the reduce kernel");
  static_assert(BUILD == kBuildMain || (!HALF && !RED), "the narrow and mid builds: whole and split tiles");
  static_assert(!MASKED || (!HALF && !RED && !ANY), "the masked form: whole and split tiles, aligned C rows");
  constexpr int kBN = HALF ? kHalfBlockN : kBlockN;  // B rows per tile
  extern __shared__ __align__(1024) uint8_t smem[];
  // Read from lane 0, so ptxas knows them warp-uniform and may keep what derives from them (ring
  // positions, descriptors) in uniform registers.
  const int warp = __shfl_sync(0xffffffffu, (int)threadIdx.x / 32, 0);
  const int lane = threadIdx.x % 32;
  const int wg = warp / 4;

  const Smem sm{ptx::smem_u32(smem)};

  if (threadIdx.x == 0) {
    trace(p.trace, kTrEntry);
    if (p.trace) p.trace[((uint64_t)blockIdx.x * kTraceEvents + kTrSm) * 2] = ptx::smid();
    for (int s = 0; s < kStages; ++s) {
      ptx::mbar_init(sm.full(s), 2);  // the A and the B producer, each with its bytes
      ptx::mbar_init(sm.empty(s), HALF ? kConsumerWarps / 2 : kConsumerWarps);  // its wgmma are done
    }
    ptx::fence_mbar_init();
  }
  // The masked form hands out only the tiles that hold rows this call (kernels/sm90/plan/row_schedule.h): every
  // thread waits for the grid that wrote masked_m (or offs), group g's tiles (its planned width and B blocks, the
  // rows it has) go to shared memory, warp 0 sums them up into each group's tile end, and its lane 0 makes this
  // CTA's part of the schedule of their count.
  if constexpr (MASKED) {
    int32_t* ends = row_tile_ends();
    if constexpr (MAXG <= kGroupsSmall)
      if (threadIdx.x < 32 && static_cast<const MaskedParams<MAXG>&>(p).b_prefetch) prefetch_planned_b(p);
    ptx::griddep_wait();
    uint32_t* tiled = row_tiled_rows();
    for (int g = threadIdx.x; g < p.num_groups; g += kThreads) {
      const Group& gr = p.groups[g];
      const int chunks = ceil_div(call_rows<true>(p, g), gr.width);
      ends[g] = (int32_t)(chunks * tiles_n(gr.n));
      tiled[g] = (uint32_t)chunks * (uint32_t)gr.width;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      int32_t carry = 0;
      uint64_t rows = 0;  // the lane's groups' tiled rows, then the launch's
      for (int g0 = 0; g0 < p.num_groups; g0 += 32) {
        const int g = g0 + (int)threadIdx.x;
        int32_t v = g < p.num_groups ? ends[g] : 0;
        rows += g < p.num_groups ? tiled[g] : 0u;
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
          const int32_t up = __shfl_up_sync(0xffffffffu, v, d);
          if ((int)threadIdx.x >= d) v += up;
        }
        if (g < p.num_groups) ends[g] = carry + v;
        carry += __shfl_sync(0xffffffffu, v, 31);
      }
#pragma unroll
      for (int d = 16; d > 0; d /= 2) rows += __shfl_xor_sync(0xffffffffu, rows, d);
      if (threadIdx.x == 0) {
        const int kst = p.groups[0].k / kBlockK;
        const int64_t a16 = (int64_t)rows * p.groups[0].k * 2;  // (every group of a masked launch has the one K)
        const RowCta c = row_cta(row_schedule(carry, kst, p.num_ctas, BUILD == kBuildMain,
                                              static_cast<const MaskedParams<MAXG>&>(p).row_force, a16),
                                 blockIdx.x);
        *row_cta_smem() = c;
        if (p.trace) {  // what this CTA made of the schedule, as int32 pairs (tests/gpu/test_masked.py reads them)
          uint64_t* q = p.trace + ((uint64_t)blockIdx.x * kTraceEvents + kTrRowShare) * 2;
          const auto pair = [](int32_t lo, int32_t hi) {
            return (uint64_t)(uint32_t)lo | (uint64_t)(uint32_t)hi << 32;
          };
          q[0] = pair(c.share.first_t, c.share.first_k), q[1] = pair(c.share.count, c.share.end_k);
          q[2] = pair(c.stride, c.before), q[3] = pair(carry, kst);  // (kTrRowWalk)
          q[4] = (uint64_t)a16;                                       // (kTrRowA16)
        }
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) trace(p.trace, kTrInit);
  // The next grid in the stream (the next call's conversion) may start; it waits for this one.
  ptx::griddep_launch_dependents();

  if (wg == 0) {
    ptx::setmaxnreg_dec<kProducerRegs>();
    Share<MASKED, BUILD == kBuildMain && !HALF && !RED> share(p, blockIdx.x);
    if (warp == 0) {
      // ---------------------------------------------------------- B producer
      // The B maps come from the kernel parameters, or else from the conversion kernel: wait for it.
      // B itself is an input, complete once the conversion kernel has passed its own
      // griddepcontrol.wait (it lets this grid launch only after that).
      constexpr bool kParamMaps = MAXG <= kGroupsSmall;  // map_b holds the B maps (else b_maps does)
      // (the masked form waited in its prologue, before reading masked_m or offs)
      // (with no conversion kernel before it (DIRECT) B is read after this grid's own wait)
      if ((!kParamMaps || DIRECT) && !MASKED) ptx::griddep_wait();
      if (p.trace) {  // trace: the share's bounds are in registers
        asm volatile("" ::"r"(share.first_t), "r"(share.count), "r"(share.end_k));
        if (lane == 0) trace(p.trace, kTrBShare);
      }
      int cur_g = -1;
      RingPos<kStages> rb;
      bool first = true, first_load = true;
      for (int u = 0; u < share.units(); ++u) {
        const Unit w = share.unit<kBN>(p, u);
        const Group& gr = p.groups[w.tile.g];
        const void* map_b =
            kParamMaps ? (const void*)&p.map_b[w.tile.g] : (const void*)(p.b_maps + (size_t)w.tile.g * kMapBytes);
        if (w.tile.g != cur_g) {
          cur_g = w.tile.g;
          if (lane == 0 && !kParamMaps) ptx::tmap_acquire(map_b);
          if (first && lane == 0) trace(p.trace, kTrMapsReady);
          first = false;
        }
        const int kt = gr.k / kBlockK;  // 512-byte scale blocks per 128 rows
        const uint8_t* sfb = gr.sfb + (int64_t)(w.tile.n0 / kBlockN) * kt * kSfBlockBytes;
        // B of a group of one tile along M is read once: evict it first, keeping A. A group of 2+ tiles along M
        // reads each B tile again from its other tiles' CTAs: normal (launches of such groups ~1% faster)
        const uint64_t b_hint = gr.chunks > 1 ? ptx::kEvictNormal : ptx::kEvictFirst;
        for (int kc = w.k0; kc < w.k1; ++kc, rb.next()) {
          ptx::mbar_wait(sm.empty(rb.s), rb.ph ^ 1);
          if (lane == 0) {
            const uint32_t st = sm.b_stage(rb.s), full = sm.full(rb.s);
            // half tiles: a 64-row box (the maps are encoded so), and the whole 128-row scale block
            ptx::mbar_arrive_expect_tx(full, HALF ? kBRawBytes / 2 + kSfBlockBytes : kBStageBytes);
            ptx::tma_load_2d(st, map_b, kc * (kBlockK / 2), w.tile.n0, full, b_hint);
            ptx::bulk_load(st + kBRawBytes, sfb + (int64_t)kc * kSfBlockBytes, kSfBlockBytes, full, ptx::kEvictLast);
            if (first_load) trace(p.trace, kTrBFirstTma);
          }
          first_load = false;
          __syncwarp();
        }
      }
    } else if (DIRECT && warp <= kDirectWarps) {
      direct_a_producer<MASKED>(p, sm, share, warp - 1, lane);
    } else if (warp == 1) {
      // ---------------------------------------------------------- A producer
      // fp16 A comes from the conversion kernel: wait for it. Its tensor map is a kernel parameter. The
      // first unit's parameters (a chain of dependent constant loads, ~0.5 us on the path to the first
      // K step) are read, and its map prefetched, while the wait lasts.
      // The narrow build's narrow tiles load only the kNarrowN rows their wgmma reads.
      const auto box = [&](const Group& gr, const CUtensorMap*& map, uint32_t& bytes) {
        const bool nar = BUILD == kBuildNarrow && narrow_tiles(gr);
        map = &p.map_a16[nar ? kNumWidths : gr.width_idx];
        bytes = (uint32_t)(nar ? kNarrowN : gr.width) * kA16RowBytes;
      };
      RingPos<kStages> ra;
      bool first = true;
      // A stays in L2 for the CTAs that read it later; in a wave plan they read it at about the same time,
      // and L2 keeps the group's B blocks for the next wave instead
      const uint64_t a_hint = share.stride ? ptx::kEvictNormal : ptx::kEvictLast;
      // (a CTA of a plan has at least one unit; in the masked form it may have none this call)
      Unit w = share.units() > 0 ? share.unit<kBN>(p, 0) : Unit{};
      int a_row = p.groups[w.tile.g].a16_row + w.tile.m0;
      const CUtensorMap* map;
      uint32_t bytes;
      box(p.groups[w.tile.g], map, bytes);
      if (lane == 0) ptx::prefetch_tensormap(map);
      ptx::griddep_wait_holding((uint32_t)a_row, bytes, map);
      if (lane == 0) trace(p.trace, kTrGridWait);
      // the contiguous layout: a group's rows start at its first_row of the one A (read after the wait)
      if constexpr (MASKED) a_row += first_row(static_cast<const MaskedParams<MAXG>&>(p), w.tile.g);
      for (int u = 0; u < share.units(); ++u) {
        if (u > 0) {
          w = share.unit<kBN>(p, u);
          const Group& gr = p.groups[w.tile.g];
          a_row = gr.a16_row + w.tile.m0;
          if constexpr (MASKED) a_row += first_row(static_cast<const MaskedParams<MAXG>&>(p), w.tile.g);
          box(gr, map, bytes);
        }
        for (int kc = w.k0; kc < w.k1; ++kc, ra.next()) {
          ptx::mbar_wait(sm.empty(ra.s), ra.ph ^ 1);
          if (lane == 0) {
            ptx::mbar_arrive_expect_tx(sm.full(ra.s), bytes);
            ptx::tma_load_2d(sm.a_stage(ra.s), map, kc * kA16RowBytes, a_row, sm.full(ra.s), a_hint);
            if (first) trace(p.trace, kTrFirstTma);
          }
          first = false;
          __syncwarp();
        }
      }
    }
  } else {
    // ------------------------------------------------------------------ consumers
    ptx::setmaxnreg_inc<kConsumerRegs>();
    // C may still be in use by the grids before this one (they are done by now).
    ptx::griddep_wait();
    const int cw = wg - 1;          // 0 or 1: B rows [64 cw, 64 cw + 64) of the tile
    const int wq = warp % 4;        // warp inside the warpgroup: 16 rows each
    const int c = lane % 4;         // K block of the stage this thread dequantises
    const int r0 = (HALF ? 0 : 64 * cw) + 16 * wq + lane / 4;  // tile-local B rows r0 and r0 + 8
    Share<MASKED, BUILD == kBuildMain && !HALF && !RED> share(p, blockIdx.x);
    ConsumerPos pos;  // the place in the ring
    uint64_t* tr = threadIdx.x == 128 ? p.trace : nullptr;
    uint64_t* pending = nullptr;  // the flag of partial sums written, not yet raised
    for (int u = 0; u < share.units(); ++u) {
      const Unit w = share.unit<kBN>(p, u);
      float acc[kMaxWidth / 2];  // per unit: nothing carries over, so no register lives across widths
      if constexpr (DIRECT)
        consumer_unit<kWidths[0], ANY, false, kNarrowN, true, MASKED>(p, sm, acc, w, pos, r0, c, cw, wq, lane, pending,
                                                                     tr);
      else consumer_dispatch<HALF, ANY, RED, BUILD, MASKED>(p, sm, acc, w, pos, r0, c, cw, wq, lane, pending, tr);
      tr = nullptr;  // trace the first unit only
    }
    raise_flag(pending, flag_epoch(p.flags), lane);
    epilogue_buffer_read<kTmaC<MAXG, ANY, RED, MASKED>>();  // shared memory outlives the last TMA store's reads
    trace(threadIdx.x == 128 ? p.trace : nullptr, kTrConsumerDone);
  }
  if (p.trace) {
    __syncthreads();
    if (threadIdx.x == 0) trace(p.trace, kTrExit);
  }
}

// The grouped GEMM of the task's layout: every size and pointer from the host.
template <int MAXG, bool HALF = false, bool ANY = false, bool RED = false, int BUILD = kBuildMain>
__global__ void __launch_bounds__(kThreads, 1) nvfp4_group_gemm(const __grid_constant__ Params<MAXG> p) {
  group_gemm<MAXG, HALF, ANY, RED, BUILD, false>(p);
}

// The masked form (stacked experts, rows per group from masked_m or offs on the device): planned for every group's
// largest m (widths, build, grid); only the tiles that hold rows this call are scheduled, on the device
// (kernels/sm90/plan/row_schedule.h), and no C row at or past a group's rows is written.
template <int MAXG, int BUILD = kBuildMain>
__global__ void __launch_bounds__(kThreads, 1) nvfp4_group_gemm_masked(const __grid_constant__ MaskedParams<MAXG> p) {
  group_gemm<MAXG, false, false, false, BUILD, true>(p);
}

// The direct-A kernels (direct_a_producer): launches of up to kGroupsSmall groups of narrow tiles only, with no
// conversion kernel; the task form (ANY: C at any alignment) and the masked form (not the contiguous layout: offs
// null).
template <int MAXG, bool ANY>
__global__ void __launch_bounds__(kThreads, 1) nvfp4_group_gemm_direct(const __grid_constant__ Params<MAXG> p) {
  group_gemm<MAXG, false, ANY, false, kBuildNarrow, false, true>(p);
}
template <int MAXG>
__global__ void __launch_bounds__(kThreads, 1)
    nvfp4_group_gemm_masked_direct(const __grid_constant__ MaskedParams<MAXG> p) {
  group_gemm<MAXG, false, false, false, kBuildNarrow, true, true>(p);
}

}  // namespace fl::sm90
