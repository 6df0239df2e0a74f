// What rate wgmma reaches on the H200 in the shape of the sm90 GEMM's K loop, with nothing else in the
// way: no loads, no dequantisation beyond a stand-in, every CTA alone on its SM. The GEMM's K loop keeps
// 93% of its time with its loads and dequantisation removed (docs/sm90_kernel_notes.md, d46all) and ncu
// saw its tensor pipe at 74%; the step of a 128-wide tile costs ~690 cycles for 512 of MMA. This asks
// which part of that is the instruction form itself (m64nNk16, A from registers) and which the loop's
// structure, one change at a time:
//   N          wgmma N (the tile's width of A rows in the GEMM)
//   wg         consumer warpgroups per CTA (the GEMM: 2), each its own 64 B rows
//   depth      k16 groups of 4 wgmma committed per K step; wait_group(depth) after each (the GEMM: 1)
//   mb         m64 blocks per warpgroup (2: two wgmma per k16 step on two accumulator arrays, one B)
//   form       RS: A from registers (the GEMM), SS: A from shared memory
//   ring       a producer warp and full/empty mbarriers per stage, 4 stages, no data (the GEMM's sync)
//   alu        0: fragments made with ~2 ALU ops each; 1: ~5, with a half2 multiply (a stand-in for the
//              dequantisation); 2: the GEMM's own dequantisation (sm90::dequant_b: two 8-byte and two
//              1-byte shared loads per thread and m-block, byte permutes, the scale multiply) from
//              packed B and scale blocks in each ring stage (two wgmma warpgroups at most)
//   loads      (alu 2) the producer fills each stage with bulk copies: the wgmma's shared operand (W
//              rows of 128 bytes, from a 4 MB buffer every CTA reads: L2) and the packed B with its
//              scales per m-block (L2: a 16 MB buffer; DRAM: 2 GB streamed); the bytes are the
//              buffers' (zeros, or random with no NaN), not the columns' data. "tma": as the GEMM's
//              producers do, the shared operand through a 2D tensor map (128-byte swizzle, W rows of a
//              matrix with the GEMM's row pitch at K = 7168, 14336 bytes) and B through one (128 rows x
//              32 bytes of a matrix 3584 bytes wide per m-block), each CTA moving to new B rows every
//              112 steps as the GEMM moves to its next tile, the scales by bulk copies; "2 producers":
//              A and B from two producer warps, the full barrier waiting for both
//   early      three fragment sets; the next step's fragments made before the wait for the previous
//              step's wgmma, not after it
//   beside     (alu 2) the GEMM's dequantisation runs every step but its fragments feed no wgmma (they
//              are folded into one register kept to the end; RS: the wgmma reads fragments made once
//              before the loop; SS: both operands from shared memory): what its work costs the tensor
//              cores when nothing waits for its result, with and without A read from registers
//   +64 off/on one more m64n64k16 per k16 step under a guard predicate (WgmmaRSIf): what a skipped
//              wgmma costs, and N = 128 + 64 as two instructions against one N = 192 (ptxas injects a
//              warpgroup.arrive before each guarded wgmma, C7519, as it does after a branch)
//   mix        one kind of instruction beside the wgmma, 4 independent chains of NOPS / 4 per thread and K
//              step on registers (fragments made once before the loop, no shared loads), the results
//              folded into one kept register: which of the dequantisation's kinds (per step and warp ~16
//              PRMT, 16 HMUL2, 17 LOP3, 14 IMAD, 5 SHF) costs the tensor cores their rate at N = 128
//   narrow     (alu 2) the GEMM's dequantisation at N = 16 .. 128, with no loads and with the stages
//              filled as the GEMM fills them: what a narrower wgmma saves a tile whose A rows are few
//              (one group of M <= 32 in a decode step). Build with -DPROBE_RING=S for rings of S stages
//              (default 4; the GEMM has 6): the rows whose stages do not fit shared memory fail to launch.
//              "3 / 4 warpgroups": three or four consumer warpgroups of 64 B rows each (a stage holds two
//              B blocks), as a decode build with more B rows per CTA step would run; three at N = 128 too, as
//              a build of 128-wide tiles of 192 B rows would run (more warps per scheduler beside the wgmma;
//              four do not fit N = 128's sums in 104 registers: ptxas serialises the wgmma, C7512).
//   wide       (alu 2, tma, 2 producers) N = 208, 224 and 256: one pass over B for a group of 193-256 A rows,
//              which the GEMM's widths (128 and 192) cover with two 128-wide passes
// ptxas serialises the depth-2 loop (C7513: it does not see that three fragment sets suffice); the
// row is kept as that measurement.
// Each row runs twice: on zeros (B in shared memory all zero) and on random fp16 in both operands (the
// tensor cores' power, and so the clock, depend on the bits). Per run: FLOP per cycle per SM (clock64
// around each warpgroup's loop, median over the grid), its share of the fp16 dense peak (4096
// FLOP/cycle/SM: 989 TFLOP/s at 1.83 GHz on 132 SMs), the cycles of one GEMM-like K step (every
// warpgroup's 4 k16 steps), TFLOP/s from CUDA events (grid: one CTA per SM) and the clock those imply.
// Results on the H200: docs/sm90_kernel_notes.md (the wgmma_rate rows).
//
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I kernels -I tools -o /tmp/wgmma_rate \
//        tools/wgmma_rate.cu && /tmp/wgmma_rate [text]     (text: only the rows whose name holds it)
//   FL_PROBE_CTAS=n runs n CTAs instead of one per SM (the clock at a part of the chip's load)
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_check.h"
#include "launcher_impl.h"
#include "ptx/mbarrier.cuh"
#include "ptx/setmaxnreg.cuh"
#include "ptx/tma.cuh"
#include "ptx/timer.cuh"
#include "ptx/wgmma.cuh"
#include "sm90_group_gemm.cuh"
#include "wgmma_probe.cuh"

namespace {

using namespace fl;

#ifndef PROBE_RING
#define PROBE_RING 4
#endif
constexpr int kRing = PROBE_RING;  // stages (addresses rotate; the data is zeros); -DPROBE_RING=S for other depths
constexpr int kRowBytes = 128;     // one K step of fp16 per row, 128-byte swizzle
constexpr int kSteps = 4104;       // K steps per launch (a multiple of every depth + 1)

enum Form { kRS, kSS };
// what fills the stages (alu 2 only); kTmaDram2NoA: as kTmaDram2, but A's tile loaded only in the ring's first
// trip (then the stages keep it: B's loads alone, what A's fp16 traffic costs the step)
enum Loads { kNoLoads, kFromL2, kFromDram, kTmaL2, kTmaDram, kTmaDram2, kTmaDram2NoA };
__host__ __device__ constexpr bool is_tma(Loads l) {
  return l == kTmaL2 || l == kTmaDram || l == kTmaDram2 || l == kTmaDram2NoA;
}
constexpr size_t kABufBytes = size_t{4} << 20, kBL2Bytes = size_t{16} << 20, kBDramBytes = size_t{2} << 30;
// tma rows: the matrices the tensor maps describe (the GEMM's rows at K = 7168), 112 K steps per row
constexpr uint32_t kAPitch = 7168 * 2, kBPitch = 7168 / 2, kTmaSteps = 112;
constexpr uint32_t kARows = (uint32_t)(kABufBytes / kAPitch);

// alu 2: per ring stage, one packed B tile with its scale block (the GEMM's B stage) per m-block.
constexpr uint32_t kQStageBytes = 2 * sm90::kBStageBytes;

// Dynamic shared memory: barriers, the wgmma operands' stages, alu 2's B stages.
__host__ __device__ constexpr int smem_bytes(int n, int wgs, Form form, int alu) {
  return 1024 + kRing * n * kRowBytes + (form == kSS ? kRing * wgs * 64 * kRowBytes : 0) +
         (alu == 2 ? kRing * (int)kQStageBytes : 0);
}

struct Layout {
  uint32_t base;
  int n, wgs;
  Form form;
  __device__ uint32_t full(int s) const { return base + 8u * s; }
  __device__ uint32_t empty(int s) const { return base + 8u * (kRing + s); }
  __device__ uint32_t b_stage(int s) const { return base + 1024 + (uint32_t)(s * n * kRowBytes); }
  __device__ uint32_t a_stage(int s, int wg) const {
    return base + 1024 + (uint32_t)(kRing * n * kRowBytes + (s * wgs + wg) * 64 * kRowBytes);
  }
  // alu 2: m-block mb's packed B and scales of stage s (after the wgmma operands)
  __device__ uint32_t q_stage(int s, int mb) const {
    return base + (uint32_t)smem_bytes(n, wgs, form, 0) + s * kQStageBytes + mb * sm90::kBStageBytes;
  }
};

// The values multiplied: "zeros" (B in shared memory all zero, A's fragments in [1, 2)) or "random"
// (both operands random fp16 of magnitude below 1, either sign): the same instructions, other bits.
struct Data {
  uint32_t mul, and_mask, or_mask, fill;  // fragment word = ((v * mul) & and_mask) | or_mask
};
constexpr Data kZeros{1u, 0x03FF03FFu, 0x3C003C00u, 0u};
constexpr Data kRandom{0x9E3779B1u, 0xBBFFBBFFu, 0u, 1u};

// One k16 step's four A registers from a per-step value (Data), or nibbles widened and scaled by a
// half2 multiply, as the dequantisation does (alu 1).
template <int ALU>
__device__ __forceinline__ void make_frags(uint32_t (&f)[4][4], uint32_t x, const Data& d) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint32_t v = (x + 0x00010001u * (4 * s + r)) * d.mul;
      if constexpr (ALU == 0) {
        f[s][r] = (v & d.and_mask) | d.or_mask;
      } else {
        const uint32_t nib = ((v >> (s + r)) & 0x00070007u) << 10;
        const __half2 h = __hmul2(*reinterpret_cast<const __half2*>(&nib), __halves2half2(__float2half(0.5f), __float2half(0.5f)));
        f[s][r] = *reinterpret_cast<const uint32_t*>(&h) | 0x3C003C00u;
      }
    }
}

// mix rows: the instruction kind beside the wgmma
enum Mix { kMixNone, kMixLop3, kMixPrmt, kMixHmul2, kMixImad, kMixShf, kMixFfma };
// + kMixOther: the mix runs on the producer warpgroup's warps 1-3 (idle in these rows: one warp per
// scheduler partition but the first), NOPS per loop trip, until both consumer warpgroups are done; the
// consumers only issue their wgmma. Whether the instructions cost the tensor cores from any warp of the
// SM, or only from the warps that issue the wgmma.
constexpr int kMixOther = 16;

// NOPS instructions of kind MIX in four independent chains, from a per-step value; returns their fold.
template <int MIX, int NOPS>
__device__ __forceinline__ uint32_t mix_ops(uint32_t x) {
  uint32_t c[4] = {x, x ^ 0x9E3779B9u, x + 0x7F4A7C15u, x * 3u};
  const uint32_t k1 = x | 0x0E0E0E0Eu, k2 = 0x3C013C01u, k3 = 0x80808080u ^ x, sel = 0x2404u + (x & 1u);
#pragma unroll
  for (int i = 0; i < NOPS / 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (MIX == kMixLop3) asm("lop3.b32 %0, %0, %1, %2, 0xf8;" : "+r"(c[j]) : "r"(k1), "r"(k3));
      if constexpr (MIX == kMixPrmt) asm("prmt.b32 %0, %0, %1, %2;" : "+r"(c[j]) : "r"(k1), "r"(sel + j));
      if constexpr (MIX == kMixHmul2) asm("mul.rn.f16x2 %0, %0, %1;" : "+r"(c[j]) : "r"(k2));
      if constexpr (MIX == kMixImad) asm("mad.lo.u32 %0, %0, %1, %2;" : "+r"(c[j]) : "r"(k1), "r"(k3));
      if constexpr (MIX == kMixShf) asm("shf.l.wrap.b32 %0, %0, %1, %2;" : "+r"(c[j]) : "r"(k3), "r"(sel + j));
      if constexpr (MIX == kMixFfma) asm("fma.rn.f32 %0, %0, %1, %2;" : "+r"(c[j]) : "r"(k2), "r"(k1));
    }
  return c[0] ^ c[1] ^ c[2] ^ c[3];
}

template <int N, int WGS, int DEPTH, int MB, Form FORM, bool RING, int ALU, bool GUARD, bool EARLY, Loads LOADS,
          bool BESIDE, int MIX, int NOPS>
__global__ void __launch_bounds__(128 * (WGS + 1), 1) rate(uint32_t guard_on, Data data, float* sink, unsigned long long* cycles,
                                                           const uint8_t* abuf, const uint8_t* bbuf,
                                                           const __grid_constant__ CUtensorMap map_a,
                                                           const __grid_constant__ CUtensorMap map_b) {
  constexpr bool kTma = is_tma(LOADS);
  constexpr bool kTwo = LOADS == kTmaDram2 || LOADS == kTmaDram2NoA;
  static_assert(LOADS == kNoLoads || (ALU == 2 && RING && FORM == kRS), "loads: the GEMM's form, ring and dequantisation");
  static_assert(FORM == kRS || (MB == 1 && !GUARD), "SS: one block, no guard");
  static_assert(kSteps % (DEPTH + 1) == 0, "whole rounds of fragment sets");
  static_assert(!EARLY || (DEPTH == 2 && FORM == kRS && MB == 1 && !GUARD && RING), "early: three sets, wait(1)");
  static_assert(ALU < 2 || ((WGS <= 2 || MB == 1) && WGS <= 4 && !EARLY),
                "alu 2: a B block of 128 rows per two warpgroups of 64 (two blocks for 3-4 warpgroups)");
  // alu 2: B blocks (128 rows and their scales) per stage: one per m-block, or two for 3-4 warpgroups
  constexpr int kQB = ALU == 2 && WGS > 2 ? 2 : MB;
  static_assert(!BESIDE || (ALU == 2 && MB == 1), "beside: the GEMM's dequantisation, one block");
  static_assert(MIX == kMixNone || (ALU == 0 && !BESIDE && FORM == kRS && MB == 1 && !GUARD && !EARLY && RING &&
                                    LOADS == kNoLoads),
                "mix: the GEMM's form and sync, fragments made once");
  // setmaxnreg moves registers inside the CTA's launch allocation (65536 / threads per thread, rounded down
  // to 8): 128 x 40 + WGS x 128 x kRegs must fit it (4 warpgroups: 640 x 96)
  constexpr int kRegs = WGS == 2 ? 232 : WGS == 3 ? 152 : 104;
  extern __shared__ __align__(1024) uint8_t smem[];
  const Layout L{ptx::smem_u32(smem), N, WGS, FORM};
  const int wg = threadIdx.x / 128;
  const int lane = threadIdx.x % 32;
  constexpr int kQWord = smem_bytes(N, WGS, FORM, 0) / 4;  // alu 2's B stages start here
  for (int i = 256 + threadIdx.x; i < smem_bytes(N, WGS, FORM, ALU) / 4; i += blockDim.x) {  // past the barriers
    uint32_t v = data.fill ? (i * 0x9E3779B1u ^ blockIdx.x) & data.and_mask : 0u;
    // alu 2, random: packed B random, its scales 1.0 (E4M3 0x38; a random byte may be NaN)
    if (i >= kQWord && data.fill && (uint32_t)(i - kQWord) * 4 % sm90::kBStageBytes >= sm90::kBRawBytes) v = 0x38383838u;
    else if (i >= kQWord && data.fill) v = i * 0x9E3779B1u ^ blockIdx.x;
    reinterpret_cast<uint32_t*>(smem)[i] = v;
  }
  if (threadIdx.x == 0) *reinterpret_cast<volatile uint32_t*>(smem + 512) = 0;  // mix on other warps: consumers done
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int s = 0; s < kRing; ++s) {
      ptx::mbar_init(L.full(s), kTwo ? 2 : 1);
      ptx::mbar_init(L.empty(s), 4 * WGS);
    }
    ptx::fence_mbar_init();
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the data, for the async proxy
  __syncthreads();
  if (wg == WGS) {  // producer warpgroup
    ptx::setmaxnreg_dec<40>();
    if constexpr (MIX >= kMixOther) {
      if (threadIdx.x / 32 % 4 != 0) {  // warps 1-3: the mix, loop trips counted, until the consumers are done
        const volatile uint32_t* done = reinterpret_cast<const volatile uint32_t*>(smem + 512);
        uint32_t trips = 0, fold = 0;
        while (*done < (uint32_t)WGS) fold ^= mix_ops<MIX - kMixOther, NOPS>(threadIdx.x * 0x9E3779B9u ^ trips++);
        sink[blockIdx.x * blockDim.x + threadIdx.x] = (float)(fold & 1u);
        if (threadIdx.x % 128 == 32) cycles[3 * gridDim.x + blockIdx.x] = trips;
        return;
      }
    }
    if constexpr (kTma) {
      // tma rows: thread 128 WGS loads A (and B with one producer), thread 128 WGS + 32 B (two)
      const bool a_thread = threadIdx.x == 128 * WGS, b_thread = kTwo ? threadIdx.x == 128 * WGS + 32 : a_thread;
      if (!a_thread && !b_thread) return;
      constexpr uint32_t kA = N * kRowBytes, kB = sm90::kBStageBytes;
      const uint32_t b_rows = (uint32_t)((LOADS == kTmaL2 ? kBL2Bytes : kBDramBytes) / kBPitch);
      const uint32_t b_tiles = b_rows / (kQB * 128);
      const int a_row = (int)((blockIdx.x % (kARows / N)) * N);
      for (int k = 0; k < kSteps; ++k) {
        const int s = k % kRing, kc = k % kTmaSteps;
        ptx::mbar_wait(L.empty(s), ((k / kRing) & 1) ^ 1);
        if (a_thread) {
          if (LOADS == kTmaDram2NoA && k >= kRing) {
            ptx::mbar_arrive(L.full(s));  // the stage keeps its A tile
          } else {
            ptx::mbar_arrive_expect_tx(L.full(s), kTwo ? kA : kA + kQB * kB);
            ptx::tma_load_2d(L.b_stage(s), &map_a, kc * kRowBytes, a_row, L.full(s), ptx::kEvictLast);
          }
        }
        if (b_thread) {
          if (kTwo) ptx::mbar_arrive_expect_tx(L.full(s), kQB * kB);
          const uint32_t tile = (blockIdx.x + (uint32_t)(k / kTmaSteps) * gridDim.x) % b_tiles;
          for (int mb = 0; mb < kQB; ++mb) {
            ptx::tma_load_2d(L.q_stage(s, mb), &map_b, kc * 32, (int)(tile * kQB * 128 + mb * 128), L.full(s),
                             ptx::kEvictFirst);
            const uint8_t* sf = abuf + ((size_t)(blockIdx.x * kSteps + k) * kQB + mb) % 4096 * sm90::kSfBlockBytes;
            ptx::bulk_load(L.q_stage(s, mb) + sm90::kBRawBytes, sf, sm90::kSfBlockBytes, L.full(s), ptx::kEvictLast);
          }
        }
      }
    } else if (RING && threadIdx.x == 128 * WGS) {
      constexpr uint32_t kA = N * kRowBytes, kB = sm90::kBStageBytes;
      const size_t b_slots = (LOADS == kFromDram ? kBDramBytes : kBL2Bytes) / (kQB * kB);
      for (int k = 0; k < kSteps; ++k) {
        const int s = k % kRing;
        ptx::mbar_wait(L.empty(s), ((k / kRing) & 1) ^ 1);
        if constexpr (LOADS == kNoLoads) {
          ptx::mbar_arrive(L.full(s));
        } else {
          ptx::mbar_arrive_expect_tx(L.full(s), kA + kQB * kB);
          ptx::bulk_load(L.b_stage(s), abuf + (size_t)(k % (kABufBytes / kA)) * kA, kA, L.full(s), ptx::kEvictLast);
          const uint8_t* b = bbuf + (((size_t)blockIdx.x * kSteps + k) % b_slots) * (kQB * kB);
          for (int mb = 0; mb < kQB; ++mb)
            ptx::bulk_load(L.q_stage(s, mb), b + mb * kB, kB, L.full(s), ptx::kEvictFirst);
        }
      }
    }
    return;
  }
  ptx::setmaxnreg_inc<kRegs>();
  float acc[N / 2], acc2[MB == 2 ? N / 2 : 1], accg[GUARD ? 32 : 1];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.f;
#pragma unroll
  for (int i = 0; i < (MB == 2 ? N / 2 : 1); ++i) acc2[i] = 0.f;
#pragma unroll
  for (int i = 0; i < (GUARD ? 32 : 1); ++i) accg[i] = 0.f;
  uint32_t f[DEPTH + 1][4][4], f2[MB == 2 ? DEPTH + 1 : 1][4][4];
  const uint32_t seed = threadIdx.x * 0x9E3779B9u;
  uint32_t keep = 0;  // beside: every dequantised fragment folded in
  if constexpr ((BESIDE && FORM == kRS) || MIX != kMixNone)
#pragma unroll
    for (int j = 0; j <= DEPTH; ++j) make_frags<0>(f[j], seed ^ (uint32_t)j, data);
  constexpr uint32_t kDescHi = (uint32_t)(ptx::smem_desc_swizzle128(0, 8 * kRowBytes) >> 32);
  // K step k's wgmma group from fragment set j (stage k % kRing): fence, 4 k16 steps, commit.
  auto issue = [&](int j, int k) {
    const int s = k % kRing;
    ptx::wgmma_fence();
    const uint32_t b_lo = (uint32_t)ptx::smem_desc_swizzle128(L.b_stage(s), 8 * kRowBytes);
#pragma unroll
    for (int s4 = 0; s4 < 4; ++s4) {
      const uint64_t bd = ((uint64_t)kDescHi << 32) | (b_lo + 2 * s4);
      const uint32_t acc_in = !(k == 0 && s4 == 0);
      if constexpr (FORM == kSS) {
        const uint64_t ad = ptx::smem_desc_swizzle128(L.a_stage(s, wg), 8 * kRowBytes) + 2 * s4;
        ptx::WgmmaSS<N>::mma(acc, ad, bd, acc_in);
      } else {
        ptx::WgmmaRS<N>::mma(acc, f[j][s4][0], f[j][s4][1], f[j][s4][2], f[j][s4][3], bd, acc_in);
        if constexpr (MB == 2)
          ptx::WgmmaRS<N>::mma(acc2, f2[j][s4][0], f2[j][s4][1], f2[j][s4][2], f2[j][s4][3], bd, acc_in);
        if constexpr (GUARD)
          ptx::WgmmaRSIf<64>::mma(accg, f[j][s4][0], f[j][s4][1], f[j][s4][2], f[j][s4][3], bd, acc_in, guard_on);
      }
    }
    ptx::wgmma_commit();
  };
  const uint64_t t0 = ptx::clock64();
  if constexpr (EARLY) {
    // The next step's fragments are made before the wait for the previous step's wgmma (three sets):
    // the dequantisation overlaps the tensor core's work of this warpgroup's two steps in flight.
    ptx::mbar_wait(L.full(0), 0);
    make_frags<ALU>(f[0], seed, data);
    for (int kc = 0; kc < kSteps; kc += 3) {
#pragma unroll
      for (int j = 0; j < 3; ++j) {
        const int k = kc + j;
        issue(j, k);
        if (k + 1 < kSteps) {
          ptx::mbar_wait(L.full((k + 1) % kRing), ((k + 1) / kRing) & 1);
          make_frags<ALU>(f[(j + 1) % 3], seed ^ (uint32_t)(k + 1), data);
        }
        ptx::wgmma_wait<1>();
        __syncwarp();
        if (lane == 0 && k >= 1) ptx::mbar_arrive(L.empty((k - 1) % kRing));
      }
    }
  } else {
    for (int kc = 0; kc < kSteps; kc += DEPTH + 1) {
#pragma unroll
      for (int j = 0; j <= DEPTH; ++j) {
        const int k = kc + j;
        if (RING) ptx::mbar_wait(L.full(k % kRing), (k / kRing) & 1);
        if constexpr (BESIDE) {
          const int r0 = 64 * wg + 16 * (threadIdx.x / 32 % 4) + lane / 4;
          uint32_t g[4][4];
          sm90::dequant_b<false>(g, L.q_stage(k % kRing, 0), r0, lane % 4, 0);
#pragma unroll
          for (int a = 0; a < 4; ++a) keep ^= g[a][0] ^ g[a][1] ^ g[a][2] ^ g[a][3];
        } else if constexpr (ALU == 2) {
          // warpgroups 2-3 (of 3-4) read the stage's second B block
          const int r0 = 64 * (wg % 2) + 16 * (threadIdx.x / 32 % 4) + lane / 4;
          sm90::dequant_b<false>(f[j], L.q_stage(k % kRing, wg / 2), r0, lane % 4, 0);
          if constexpr (MB == 2) sm90::dequant_b<false>(f2[j], L.q_stage(k % kRing, 1), r0, lane % 4, 0);
        } else if constexpr (MIX != kMixNone && MIX < kMixOther) {
          keep ^= mix_ops<MIX, NOPS>(seed ^ (uint32_t)k);
        } else if constexpr (MIX >= kMixOther) {
          // fragments made once; the mix runs on other warps
        } else {
          if constexpr (FORM == kRS) make_frags<ALU>(f[j], seed ^ (uint32_t)k, data);
          if constexpr (MB == 2) make_frags<ALU>(f2[j], ~seed ^ (uint32_t)k, data);
        }
        issue(j, k);
        ptx::wgmma_wait<DEPTH>();
        if (RING) {
          __syncwarp();
          if (lane == 0 && k >= DEPTH) ptx::mbar_arrive(L.empty((k - DEPTH) % kRing));
        }
      }
    }
  }
  ptx::wgmma_wait<0>();
  const uint64_t t1 = ptx::clock64();
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) sum += acc[i];
#pragma unroll
  for (int i = 0; i < (MB == 2 ? N / 2 : 1); ++i) sum += acc2[i];
#pragma unroll
  for (int i = 0; i < (GUARD ? 32 : 1); ++i) sum += accg[i];
  sum += (float)(keep & 1u);
  sink[blockIdx.x * blockDim.x + threadIdx.x] = sum;
  if (threadIdx.x % 128 == 0) cycles[blockIdx.x * WGS + wg] = t1 - t0;
  if constexpr (MIX >= kMixOther)
    if (threadIdx.x % 128 == 0) atomicAdd(reinterpret_cast<uint32_t*>(smem + 512), 1u);
}

struct Config {
  const char* name;
  const void* fn;
  int n, wgs, mb, smem;
  bool guard, guard_on, loads;
  Loads kind;
  int other_nops;  // mix on other warps: instructions per loop trip (0: none)
};

// The load rows' buffers, "random": bytes of at most 0x3B (no fp16 or E4M3 NaN or infinity).
__global__ void fill_random(uint32_t* p, size_t words, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    p[i] = ((uint32_t)i * 0x9E3779B1u ^ seed) & 0x3B3B3B3Bu;
}

template <int N, int WGS, int DEPTH, int MB, Form FORM, bool RING, int ALU, bool GUARD, bool EARLY = false,
          Loads LOADS = kNoLoads, bool BESIDE = false, int MIX = kMixNone, int NOPS = 0>
Config make(const char* name, bool guard_on = false) {
  return Config{name, (const void*)rate<N, WGS, DEPTH, MB, FORM, RING, ALU, GUARD, EARLY, LOADS, BESIDE, MIX, NOPS>, N, WGS, MB,
                smem_bytes(N, WGS, FORM, ALU), GUARD, guard_on, LOADS != kNoLoads, LOADS, MIX >= kMixOther ? NOPS : 0};
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<Config> configs = {
      make<128, 2, 1, 1, kRS, true, 0, false>("RS N=128 (the GEMM's form and sync)"),
      make<192, 2, 1, 1, kRS, true, 0, false>("RS N=192"),
      make<256, 2, 1, 1, kRS, true, 0, false>("RS N=256"),
      make<64, 2, 1, 1, kRS, true, 0, false>("RS N=64"),
      make<80, 2, 1, 1, kRS, true, 0, false>("RS N=80"),
      make<96, 2, 1, 1, kRS, true, 0, false>("RS N=96"),
      make<160, 2, 1, 1, kRS, true, 0, false>("RS N=160"),
      make<128, 2, 1, 1, kRS, false, 0, false>("RS N=128, no ring"),
      make<128, 2, 0, 1, kRS, true, 0, false>("RS N=128, depth 0"),
      make<128, 2, 2, 1, kRS, true, 0, false>("RS N=128, depth 2 (ptxas: C7513)"),
      make<128, 3, 1, 1, kRS, true, 0, false>("RS N=128, 3 warpgroups"),
      make<128, 2, 1, 2, kRS, true, 0, false>("RS N=128, 2 m-blocks per warpgroup"),
      make<128, 2, 1, 1, kRS, true, 1, false>("RS N=128, alu 1"),
      make<192, 2, 1, 1, kRS, true, 1, false>("RS N=192, alu 1"),
      make<128, 2, 2, 1, kRS, true, 0, false, true>("RS N=128, early"),
      make<128, 2, 2, 1, kRS, true, 1, false, true>("RS N=128, alu 1, early"),
      make<192, 2, 2, 1, kRS, true, 1, false, true>("RS N=192, alu 1, early"),
      make<128, 2, 1, 2, kRS, true, 1, false>("RS N=128, alu 1, 2 m-blocks"),
      make<128, 3, 1, 1, kRS, true, 1, false>("RS N=128, alu 1, 3 warpgroups"),
      make<128, 2, 0, 1, kRS, true, 1, false>("RS N=128, alu 1, depth 0"),
      make<128, 2, 1, 1, kRS, true, 2, false>("RS N=128, alu 2 (the GEMM's dequant)"),
      make<192, 2, 1, 1, kRS, true, 2, false>("RS N=192, alu 2"),
      make<128, 2, 1, 2, kRS, true, 2, false>("RS N=128, alu 2, 2 m-blocks"),
      make<96, 2, 1, 2, kRS, true, 2, false>("RS N=96, alu 2, 2 m-blocks"),
      make<64, 2, 1, 2, kRS, true, 2, false>("RS N=64, alu 2, 2 m-blocks"),
      make<128, 2, 1, 1, kRS, true, 2, false, false, kFromL2>("RS N=128, alu 2, loads from L2"),
      make<128, 2, 1, 1, kRS, true, 2, false, false, kFromDram>("RS N=128, alu 2, B loads from DRAM"),
      make<192, 2, 1, 1, kRS, true, 2, false, false, kFromL2>("RS N=192, alu 2, loads from L2"),
      make<192, 2, 1, 1, kRS, true, 2, false, false, kFromDram>("RS N=192, alu 2, B loads from DRAM"),
      make<128, 2, 1, 2, kRS, true, 2, false, false, kFromL2>("RS N=128, alu 2, 2 m-blocks, loads from L2"),
      make<128, 2, 1, 2, kRS, true, 2, false, false, kFromDram>("RS N=128, alu 2, 2 m-blocks, B from DRAM"),
      make<128, 2, 1, 1, kSS, true, 0, false>("SS N=128"),
      make<192, 2, 1, 1, kSS, true, 0, false>("SS N=192"),
      make<256, 2, 1, 1, kSS, true, 0, false>("SS N=256"),
      make<128, 2, 1, 1, kRS, true, 0, true>("RS N=128 + 64 off (ptxas: C7519)", false),
      make<128, 2, 1, 1, kRS, true, 0, true>("RS N=128 + 64 on (ptxas: C7519)", true),
      make<128, 2, 1, 1, kRS, true, 2, false, false, kNoLoads, true>("RS N=128, alu 2 beside"),
      make<192, 2, 1, 1, kRS, true, 2, false, false, kNoLoads, true>("RS N=192, alu 2 beside"),
      make<128, 2, 1, 1, kSS, true, 2, false, false, kNoLoads, true>("SS N=128, alu 2 beside"),
      make<192, 2, 1, 1, kSS, true, 2, false, false, kNoLoads, true>("SS N=192, alu 2 beside"),
      make<128, 2, 1, 1, kRS, true, 2, false, false, kTmaL2>("RS N=128, alu 2, tma from L2"),
      make<128, 2, 1, 1, kRS, true, 2, false, false, kTmaDram>("RS N=128, alu 2, tma B from DRAM"),
      make<128, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=128, alu 2, tma B from DRAM, 2 producers"),
      make<128, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2NoA>("RS N=128, alu 2, tma B from DRAM, 2 producers, A kept"),
      make<192, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2NoA>("RS N=192, alu 2, tma B from DRAM, 2 producers, A kept"),
      make<128, 2, 1, 2, kRS, true, 2, false, false, kTmaDram2NoA>("RS N=128, alu 2, 2 m-blocks, tma, 2 producers, A kept"),
      make<192, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=192, alu 2, tma B from DRAM, 2 producers"),
      make<128, 2, 1, 2, kRS, true, 2, false, false, kTmaL2>("RS N=128, alu 2, 2 m-blocks, tma from L2"),
      make<128, 2, 1, 2, kRS, true, 2, false, false, kTmaDram>("RS N=128, alu 2, 2 m-blocks, tma B from DRAM"),
      make<128, 2, 1, 2, kRS, true, 2, false, false, kTmaDram2>("RS N=128, alu 2, 2 m-blocks, tma, 2 producers"),
      make<16, 2, 1, 1, kRS, true, 2, false>("RS N=16, alu 2, narrow"),
      make<32, 2, 1, 1, kRS, true, 2, false>("RS N=32, alu 2, narrow"),
      make<64, 2, 1, 1, kRS, true, 2, false>("RS N=64, alu 2, narrow"),
      make<128, 2, 1, 1, kRS, true, 2, false>("RS N=128, alu 2, narrow"),
      make<16, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=16, alu 2, narrow, tma B from DRAM, 2 producers"),
      make<32, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=32, alu 2, narrow, tma B from DRAM, 2 producers"),
      make<48, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=48, alu 2, narrow, tma B from DRAM, 2 producers"),
      make<64, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=64, alu 2, narrow, tma B from DRAM, 2 producers"),
      make<80, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=80, alu 2, narrow, tma B from DRAM, 2 producers"),
      make<96, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=96, alu 2, narrow, tma B from DRAM, 2 producers"),
      make<176, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=176, alu 2, tma B from DRAM, 2 producers"),
      make<128, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=128, alu 2, narrow, tma B from DRAM, 2 producers"),
      make<208, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=208, alu 2, wide, tma B from DRAM, 2 producers"),
      make<224, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=224, alu 2, wide, tma B from DRAM, 2 producers"),
      make<256, 2, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=256, alu 2, wide, tma B from DRAM, 2 producers"),
      make<16, 3, 1, 1, kRS, true, 2, false>("RS N=16, alu 2, narrow, 3 warpgroups"),
      make<16, 3, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=16, alu 2, narrow, 3 warpgroups, tma B from DRAM, 2 producers"),
      make<32, 3, 1, 1, kRS, true, 2, false>("RS N=32, alu 2, narrow, 3 warpgroups"),
      make<32, 3, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=32, alu 2, narrow, 3 warpgroups, tma B from DRAM, 2 producers"),
      make<64, 3, 1, 1, kRS, true, 2, false>("RS N=64, alu 2, narrow, 3 warpgroups"),
      make<64, 3, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=64, alu 2, narrow, 3 warpgroups, tma B from DRAM, 2 producers"),
      make<16, 4, 1, 1, kRS, true, 2, false>("RS N=16, alu 2, narrow, 4 warpgroups"),
      make<16, 4, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=16, alu 2, narrow, 4 warpgroups, tma B from DRAM, 2 producers"),
      make<32, 4, 1, 1, kRS, true, 2, false>("RS N=32, alu 2, narrow, 4 warpgroups"),
      make<32, 4, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=32, alu 2, narrow, 4 warpgroups, tma B from DRAM, 2 producers"),
      make<64, 4, 1, 1, kRS, true, 2, false>("RS N=64, alu 2, narrow, 4 warpgroups"),
      make<64, 4, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=64, alu 2, narrow, 4 warpgroups, tma B from DRAM, 2 producers"),
      make<128, 3, 1, 1, kRS, true, 2, false>("RS N=128, alu 2, 3 warpgroups"),
      make<128, 3, 1, 1, kRS, true, 2, false, false, kTmaDram2>("RS N=128, alu 2, 3 warpgroups, tma B from DRAM, 2 producers"),
      make<128, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixLop3, 0>("RS N=128, mix none (fixed frags)"),
      make<128, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixLop3, 32>("RS N=128, mix 32 LOP3"),
      make<128, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixLop3, 64>("RS N=128, mix 64 LOP3"),
      make<128, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixPrmt, 64>("RS N=128, mix 64 PRMT"),
      make<128, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixHmul2, 32>("RS N=128, mix 32 HMUL2"),
      make<128, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixHmul2, 64>("RS N=128, mix 64 HMUL2"),
      make<128, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixImad, 64>("RS N=128, mix 64 IMAD"),
      make<128, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixShf, 64>("RS N=128, mix 64 SHF"),
      make<128, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixFfma, 64>("RS N=128, mix 64 FFMA"),
      make<128, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixLop3, 128>("RS N=128, mix 128 LOP3"),
      make<192, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixLop3, 128>("RS N=192, mix 128 LOP3"),
      make<128, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixOther + kMixLop3, 0>("RS N=128, mix other: spin only"),
      make<128, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixOther + kMixLop3, 64>("RS N=128, mix other: LOP3"),
      make<128, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixOther + kMixHmul2, 64>("RS N=128, mix other: HMUL2"),
      make<128, 2, 1, 1, kRS, true, 0, false, false, kNoLoads, false, kMixOther + kMixPrmt, 64>("RS N=128, mix other: PRMT"),
  };
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  int sms = 0, dev = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  // FL_PROBE_CTAS=n: n CTAs (n SMs busy) instead of one per SM: the clock the same work gets at a part of the
  // chip's load (the per-SM rates and the GHz column are per busy SM; TFLOP/s is the n SMs' together)
  int ctas = sms;
  if (const char* e = std::getenv("FL_PROBE_CTAS")) ctas = std::max(1, std::min(sms, std::atoi(e)));
  float* sink = nullptr;
  unsigned long long* cyc = nullptr;
  CHECK(cudaMalloc(&sink, (size_t)sms * 512 * sizeof(float)));
  CHECK(cudaMalloc(&cyc, (size_t)sms * 4 * sizeof(unsigned long long)));
  uint8_t *abuf = nullptr, *bbuf = nullptr;
  CHECK(cudaMalloc(&abuf, kABufBytes));
  CHECK(cudaMalloc(&bbuf, kBDramBytes));
  // tma rows' tensor maps, encoded as the launcher encodes the GEMM's (launcher_impl.h encode_byte_map),
  // through the driver's entry point (no link to libcuda)
  Driver drv;
  {
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&drv.tensor_map_encode_tiled),
                                           12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !drv.tensor_map_encode_tiled) {
      std::fprintf(stderr, "cuTensorMapEncodeTiled not found\n");
      return 1;
    }
  }
  char msg[256] = "";
  Error err{msg, sizeof(msg)};
  auto byte_map = [&](CUtensorMap* m, void* base, uint64_t pitch, uint64_t rows, uint32_t box_bytes, uint32_t box_rows,
                      CUtensorMapSwizzle swizzle) {
    if (encode_byte_map(drv, m, base, pitch, rows, box_bytes, box_rows, swizzle, err) != FL_OK) {
      std::fprintf(stderr, "%s\n", msg);
      std::exit(1);
    }
  };
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::printf("%d SMs, %d CTAs, %d K steps of 4 k16 wgmma per warpgroup and launch\n", sms, ctas, kSteps);
  std::printf("%-40s | %-38s | %-38s\n", "", "zeros", "random");
  std::printf("%-40s | %8s %6s %7s %7s %5s | %8s %6s %7s %7s %5s\n", "config", "FLOP/clk", "%peak", "clk/K", "TFLOP/s",
              "GHz", "FLOP/clk", "%peak", "clk/K", "TFLOP/s", "GHz");
  for (const Config& c : configs) {
    if (argc > 1 && !std::strstr(c.name, argv[1])) continue;
    CHECK(cudaFuncSetAttribute(c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, c.smem));
    std::printf("%-40s", c.name);
    CUtensorMap map_a{}, map_b{};
    if (is_tma(c.kind)) {
      byte_map(&map_a, abuf, kAPitch, kARows, kRowBytes, (uint32_t)c.n, CU_TENSOR_MAP_SWIZZLE_128B);
      const size_t bbytes = c.kind == kTmaL2 ? kBL2Bytes : kBDramBytes;
      byte_map(&map_b, bbuf, kBPitch, bbytes / kBPitch, 32, 128, CU_TENSOR_MAP_SWIZZLE_NONE);
    }
    for (const Data& data : {kZeros, kRandom}) {
      uint32_t on = c.guard_on;
      Data d = data;
      if (c.loads) {
        for (auto [buf, bytes] : {std::pair{abuf, kABufBytes}, std::pair{bbuf, kBDramBytes}}) {
          if (data.fill) fill_random<<<4 * sms, 256>>>(reinterpret_cast<uint32_t*>(buf), bytes / 4, 12345u);
          else CHECK(cudaMemset(buf, 0, bytes));
        }
        CHECK(cudaGetLastError());
      }
      void* args[] = {&on, &d, &sink, &cyc, &abuf, &bbuf, &map_a, &map_b};
      const dim3 grid(ctas), block(128 * (c.wgs + 1));
      float best_ms = 1e30f;
      for (int rep = 0; rep < 4; ++rep) {
        CHECK(cudaEventRecord(e0));
        CHECK(cudaLaunchKernel(c.fn, grid, block, args, c.smem, 0));
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms = 0.f;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep > 0) best_ms = std::min(best_ms, ms);
      }
      std::vector<unsigned long long> h((size_t)ctas * c.wgs);
      CHECK(cudaMemcpy(h.data(), cyc, h.size() * sizeof(h[0]), cudaMemcpyDeviceToHost));
      std::sort(h.begin(), h.end());
      const double clk = (double)h[h.size() / 2];
      const double n_total = (double)c.n * c.mb + (c.guard && c.guard_on ? 64.0 : 0.0);
      const double flop_sm = (double)c.wgs * kSteps * 4 * 2.0 * 64 * n_total * 16;  // per SM and launch
      const double per_clk = flop_sm / clk;
      std::printf(" | %8.0f %5.1f%% %7.0f %7.1f %5.2f", per_clk, 100.0 * per_clk / 4096.0, clk / kSteps,
                  flop_sm * ctas / (best_ms * 1e-3) / 1e12, clk / (best_ms * 1e6));
      if (c.other_nops) {  // the other warps' instructions per consumer K step, per warp (median over the grid)
        std::vector<unsigned long long> t(ctas);
        CHECK(cudaMemcpy(t.data(), cyc + 3 * ctas, t.size() * sizeof(t[0]), cudaMemcpyDeviceToHost));
        std::sort(t.begin(), t.end());
        std::printf(" [other warps: %.0f per K step]", (double)t[t.size() / 2] * c.other_nops / kSteps);
      }
    }
    std::printf("\n");
  }
  CHECK(cudaFree(abuf));
  CHECK(cudaFree(bbuf));
  CHECK(cudaFree(sink));
  CHECK(cudaFree(cyc));
  return 0;
}
