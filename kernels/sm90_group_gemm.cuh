// sm_90a NVFP4 grouped GEMM: C[g] (M x N, fp16) = A[g] (M x K) . B[g] (N x K)^T, fp32 accumulation.
//
// Computed as C^T = B . A^T so that the large operand B is wgmma's A (dequantised straight into
// registers) and the small per-group M is wgmma's N: the launch's tile width W (64, 128, 192 or 256,
// one kernel each; plan.h picks W per launch).
//
// One CTA = 3 warpgroups, persistent over tiles of 128 B rows x W A rows:
//   warp 0          producer: patches the group's tensor maps, issues TMA for A/B tiles and the
//                   512-byte scale blocks of each 64-wide K stage (warps 1..3 only hand over registers);
//   warpgroups 1, 2 consumers: 64 B rows each, dequantise them into wgmma A fragments; together they
//                   also convert the A tile of the next K step (NVFP4 -> fp16, scale folded in) into
//                   shared memory while this step's wgmma run; epilogue.
//
// K permutation. An MMA sums over K, so both operands may be read in any one order of K. Thread
// lane%4 == c of a consumer warp owns K range [16c, 16c+16) of a 64-wide stage (one scale block,
// 8 bytes of a row); its two 32-bit words w0 (K 16c..16c+7) and w1 (K 16c+8..16c+15) give, for
// wgmma step s (0..3), the f16x2 fragments e2m1_pair(w0, s) for logical K (16s + 2c, +1) and
// e2m1_pair(w1, s) for logical K (16s + 8 + 2c, +1). The A conversion writes A in the same logical
// order, so logical K position 16s + 8b + 2c (+1) holds A's K values 16c + 8b + s (and + 4).
#pragma once
#include <cuda.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "map_pool.cuh"
#include "nvfp4.cuh"
#include "plan.h"
#include "ptx/cvt.cuh"
#include "ptx/griddep.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/setmaxnreg.cuh"
#include "ptx/tensormap.cuh"
#include "ptx/tma.cuh"
#include "ptx/wgmma.cuh"

namespace fl::sm90 {

struct Group {
  const uint8_t* a;    // [m, k/2] packed E2M1, row-major
  const uint8_t* b;    // [n, k/2]
  const uint8_t* sfa;  // reordered E4M3 scales: (ceil(m/128), k/64, 32, 4, 4) contiguous
  const uint8_t* sfb;
  __half* c;           // [m, n]
  int32_t m, n, k;
  int32_t tile_m;      // rows of A per tile: the launch's tile width W (plan_width)
  int32_t tile_end;    // exclusive end of this group's tiles in the launch's tile order
  int32_t pad_;
};

template <int MAXG>
struct Params {
  CUtensorMap tmpl_a;  // any valid map with A's box; address, extents and stride are rewritten
  CUtensorMap tmpl_b;
  int32_t num_groups;
  int32_t num_tiles;
  Group groups[MAXG];
};

// Shared memory (bytes). A raw stage holds what TMA brings for one 64-wide K step; an A16 stage the
// converted fp16 A tile of one K step. The two rings advance together, one entry per K step.
constexpr uint32_t kSfBlockBytes = 512;  // 128 rows x 4 scale blocks
constexpr uint32_t kARawBytes = kBlockM * kBlockK / 2;
constexpr uint32_t kBRawBytes = kBlockN * kBlockK / 2;
constexpr uint32_t kSfaBytes = 3 * kSfBlockBytes;  // a tile's rows may touch 3 blocks of 128 rows
constexpr uint32_t kSfbBytes = kSfBlockBytes;
constexpr uint32_t kOffARaw = 0;
constexpr uint32_t kOffBRaw = kOffARaw + kARawBytes;
constexpr uint32_t kOffSfa = kOffBRaw + kBRawBytes;
constexpr uint32_t kOffSfb = kOffSfa + kSfaBytes;
constexpr uint32_t kRawBytes = kOffSfb + kSfbBytes;
constexpr uint32_t kA16Bytes = kBlockM * kBlockK * 2;  // A as fp16, core-matrix layout
// Header: two 128-byte tensor-map staging copies, then the mbarriers.
constexpr uint32_t kOffMapStage = 0;
constexpr uint32_t kOffBars = 256;
constexpr uint32_t kNumBars = 2 * kRawStages + 2 * kA16Stages;
constexpr uint32_t kHeaderBytes = 1024;
constexpr uint32_t kOffRaw = kHeaderBytes;
constexpr uint32_t kOffA16 = kOffRaw + kRawStages * kRawBytes;
constexpr uint32_t kSmemBytes = kOffA16 + kA16Stages * kA16Bytes;
// A16 core-matrix layout: element (row, k) of the stage at
//   (k / 8) * kKGroupStride + (row / 8) * 128 + (row % 8) * 16 + (k % 8) * 2.
constexpr uint32_t kKGroupStride = kBlockM / 8 * 128;

static_assert(kBlockK == 64, "one stage is one 512-byte scale block per 128 rows");
static_assert(kBlockN == 128, "two consumer warpgroups of 64 rows share one 128-row scale block");
static_assert(kBlockM == 256 && kBlockM <= ptx::kWgmmaNMax, "tile width is wgmma N (<= 256)");
static_assert(kWgmmaNStep == ptx::kWgmmaNStep, "plan.h and the generated wgmma table disagree");
static_assert(kRawBytes % 128 == 0 && kOffA16 % 128 == 0, "stage alignment");
static_assert(kOffBars + 8 * kNumBars <= kHeaderBytes, "barriers fit the header");
static_assert(kSmemBytes <= 227 * 1024, "exceeds the sm_90 shared-memory limit per block");
static_assert(kThreads == 384, "warp 0 producer, warpgroups 1-2 consumers");

// Tensor-map slots. Two launches may run at once (two streams, or the next launch starting early
// under programmatic dependent launch), so a CTA owns a slot from a device-wide pool for its
// lifetime instead of indexing by blockIdx. A slot is a ring of kMapRing (A, B) map pairs; the
// producer moves to the next pair when its tile changes group. A pair is rewritten only after
// kMapRing >= kRawStages + 1 later tiles (each at least one stage) were issued, by when the producer
// has waited for the stage that last used it to be consumed, so no TMA still reads it.
constexpr int kPoolSlots = 1024;  // >= resident CTAs of this kernel on any device (1 per SM)
constexpr int kPoolWords = kPoolSlots / 64;
constexpr int kMapPairBytes = 256;

__device__ unsigned long long g_pool_bits[kPoolWords];
__device__ __align__(128) uint8_t g_pool_maps[kPoolSlots][kMapRing][kMapPairBytes];

struct Tile {
  int g;       // group
  int m0, n0;  // first A row, first B row
  int width;   // wgmma N: valid A rows rounded up to kWgmmaNStep
  int kstages;
};

// Tiles are numbered group by group; inside a group the A-row tiles of one B-row tile are
// adjacent, so CTAs running at the same time share B tiles in L2. `g` is a hint (tiles only grow).
template <int MAXG>
__device__ __forceinline__ Tile decode_tile(const Params<MAXG>& p, int t, int g) {
  while (t >= p.groups[g].tile_end) ++g;
  const Group& gr = p.groups[g];
  const int local = t - (g ? p.groups[g - 1].tile_end : 0);
  const int mt = (gr.m + gr.tile_m - 1) / gr.tile_m;
  Tile tile;
  tile.g = g;
  tile.m0 = (local % mt) * gr.tile_m;
  tile.n0 = (local / mt) * kBlockN;
  const int rows = min(gr.tile_m, gr.m - tile.m0);
  tile.width = (rows + kWgmmaNStep - 1) / kWgmmaNStep * kWgmmaNStep;
  tile.kstages = gr.k / kBlockK;
  return tile;
}

__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint2 lds64(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint32_t lds8(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u8 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ void sts64(uint32_t addr, uint32_t x, uint32_t y) {
  asm volatile("st.shared.v2.b32 [%0], {%1, %2};" ::"r"(addr), "r"(x), "r"(y) : "memory");
}

// Timing experiments (tools/sweep_sm90.py --diag): kernels that leave one part of the K step out.
// Their results are wrong; the launcher selects them only through FASTLAUNCH_SM90_DIAG.
constexpr int kDiagNoConvertA = 1;  // A16 stages are not written
constexpr int kDiagNoDequantB = 2;  // raw B words go to the wgmma as they are
constexpr int kDiagNoMma = 4;       // no wgmma is issued
constexpr int kDiagNoA16Wait = 8;   // the wgmma does not wait for the other warps' A conversion

// Byte offset of row r's four scales (K blocks 0..3 of the stage) inside a 512-byte scale block.
__device__ __forceinline__ uint32_t sf_row_offset(int r) { return (r % 32) * 16 + ((r % 128) / 32) * 4; }

// B rows r0 and r0+8, K block c of a raw stage -> the four steps' wgmma A fragments (see the K
// permutation at the top of this file).
template <int DIAG>
__device__ __forceinline__ void dequant_b(uint32_t (&f)[4][4], uint32_t raw, int r0, int c) {
  const int r1 = r0 + 8;
  const uint2 b0 = lds64(raw + kOffBRaw + r0 * 32 + 8 * c);
  const uint2 b1 = lds64(raw + kOffBRaw + r1 * 32 + 8 * c);
  if constexpr ((DIAG & kDiagNoDequantB) != 0) {
#pragma unroll
    for (int s4 = 0; s4 < 4; ++s4) f[s4][0] = b0.x, f[s4][1] = b1.x, f[s4][2] = b0.y, f[s4][3] = b1.y;
    return;
  }
  const uint32_t s0 = ptx::e4m3_to_f16x2_bcast(lds8(raw + kOffSfb + sf_row_offset(r0) + c));
  const uint32_t s1 = ptx::e4m3_to_f16x2_bcast(lds8(raw + kOffSfb + sf_row_offset(r1) + c));
#pragma unroll
  for (int s4 = 0; s4 < 4; ++s4) {
    f[s4][0] = ptx::mul_f16x2(e2m1_pair(b0.x, s4), s0);
    f[s4][1] = ptx::mul_f16x2(e2m1_pair(b1.x, s4), s1);
    f[s4][2] = ptx::mul_f16x2(e2m1_pair(b0.y, s4), s0);
    f[s4][3] = ptx::mul_f16x2(e2m1_pair(b1.y, s4), s1);
  }
}

// The four k16 steps of one 64-wide K step against an A16 stage, with wgmma N = the launch's tile
// width W (a tile narrower than W, a group's last, computes columns it does not store); `first`
// starts from zero. One N per kernel: ptxas serialises wgmma when one kernel mixes several N, and a
// branch between wgmma instructions costs more than the padding.
template <int W, int DIAG>
__device__ __forceinline__ void mma_step(float (&acc)[W / 2], const uint32_t (&f)[4][4], uint32_t a16, bool first) {
  if constexpr ((DIAG & kDiagNoMma) != 0) return;
  ptx::wgmma_fence();
#pragma unroll
  for (int s4 = 0; s4 < 4; ++s4) {
    const uint64_t desc = ptx::smem_desc_noswizzle(a16 + 2 * s4 * kKGroupStride, kKGroupStride, 128);
    ptx::WgmmaRS<W>::mma(acc, f[s4][0], f[s4][1], f[s4][2], f[s4][3], desc, !(first && s4 == 0));
  }
  ptx::wgmma_commit();
}

// Barrier and stage addresses in shared memory.
struct Smem {
  uint32_t base;
  __device__ uint32_t raw_full(int s) const { return base + kOffBars + 8u * s; }  // TMA bytes landed
  __device__ uint32_t raw_empty(int s) const { return base + kOffBars + 8u * (kRawStages + s); }  // read
  __device__ uint32_t a16_full(int s) const { return base + kOffBars + 8u * (2 * kRawStages + s); }  // converted
  __device__ uint32_t a16_empty(int s) const {  // wgmma done
    return base + kOffBars + 8u * (2 * kRawStages + kA16Stages + s);
  }
  __device__ uint32_t raw(int s) const { return base + kOffRaw + s * kRawBytes; }
  __device__ uint32_t a16(int s) const { return base + kOffA16 + s * kA16Bytes; }
};

// Barrier arrival counts: one arrival per consumer warp (lane 0 after __syncwarp).
constexpr uint32_t kConsumerWarps = 8;
constexpr int kConsumerThreads = 256;

// This thread's share of converting the A tile of step `it` from its raw stage into the A16 stage,
// then its warp's arrival on a16_full. The work is cut into half rows (32 K values, two scale
// blocks) so that every consumer thread gets a share from a tile width of 128 up. Waits for the raw
// data and for the A16 stage to be free (its wgmma from kA16Stages steps ago retired).
template <int DIAG>
__device__ __forceinline__ void convert_a(const Smem& sm, uint32_t it, const Tile& tile, int ct, int lane) {
  const int s = it % kRawStages, d = it % kA16Stages;
  ptx::mbar_wait(sm.raw_full(s), (it / kRawStages) & 1);
  ptx::mbar_wait(sm.a16_empty(d), ((it / kA16Stages) & 1) ^ 1);
  const uint32_t st = sm.raw(s);
  const uint32_t out = sm.a16(d);
  const int blk0 = tile.m0 / 128;
  for (int u = ct; u < 2 * tile.width && !(DIAG & kDiagNoConvertA); u += kConsumerThreads) {
    const int row = u / 2, h = u % 2;  // scale blocks 2h and 2h + 1 of the row
    const uint4 w = lds128(st + kOffARaw + row * 32 + 16 * h);
    const int grow = tile.m0 + row;
    const uint32_t sf = lds32(st + kOffSfa + (grow / 128 - blk0) * kSfBlockBytes + sf_row_offset(grow)) >> (16 * h);
    const uint32_t sc0 = ptx::e4m3_to_f16x2_bcast(sf), sc1 = ptx::e4m3_to_f16x2_bcast(sf >> 8);
    const uint32_t dst = out + (row / 8) * 128 + (row % 8) * 16 + 8 * h;
#pragma unroll
    for (int s4 = 0; s4 < 4; ++s4) {
      const uint32_t v00 = ptx::mul_f16x2(e2m1_pair(w.x, s4), sc0), v01 = ptx::mul_f16x2(e2m1_pair(w.y, s4), sc0);
      const uint32_t v10 = ptx::mul_f16x2(e2m1_pair(w.z, s4), sc1), v11 = ptx::mul_f16x2(e2m1_pair(w.w, s4), sc1);
      sts64(dst + (2 * s4) * kKGroupStride, v00, v10);
      sts64(dst + (2 * s4 + 1) * kKGroupStride, v01, v11);
    }
  }
  ptx::fence_proxy_async_smem();  // each writer, before the wgmma (async proxy) reads
  __syncwarp();
  if (lane == 0) ptx::mbar_arrive(sm.a16_full(d));
}

// One consumer K step at pipeline position `it`: wait for its B data, take it into registers, issue
// the step's wgmma once its A16 stage is complete, convert this thread's share of the next step's A
// while they run (its A raw rows were converted one step earlier, so the raw stage is then free),
// and retire step it-1 (its wgmma done), freeing that A16 stage. Callers alternate two fragment
// sets, so the registers of step it-1's wgmma are not overwritten while it may still run.
template <int W, int DIAG>
__device__ __forceinline__ void consumer_step(const Smem& sm, float (&acc)[W / 2], uint32_t (&f)[4][4],
                                              uint32_t it, const Tile& tile, int kc, int r0, int c, int ct,
                                              int lane) {
  const int s = it % kRawStages, d = it % kA16Stages;
  ptx::mbar_wait(sm.raw_full(s), (it / kRawStages) & 1);
  dequant_b<DIAG>(f, sm.raw(s), r0, c);
  __syncwarp();
  if (lane == 0) ptx::mbar_arrive(sm.raw_empty(s));
  if constexpr ((DIAG & kDiagNoA16Wait) == 0) ptx::mbar_wait(sm.a16_full(d), (it / kA16Stages) & 1);
  mma_step<W, DIAG>(acc, f, sm.a16(d), kc == 0);
  if (kc + 1 < tile.kstages) convert_a<DIAG>(sm, it + 1, tile, ct, lane);
  if (kc > 0) {
    ptx::wgmma_wait<1>();
    if (lane == 0) ptx::mbar_arrive(sm.a16_empty((it - 1) % kA16Stages));
  }
}

// One tile: the K loop, then the epilogue.
template <int W, int DIAG>
__device__ __forceinline__ void consumer_tile(const Smem& sm, float (&acc)[W / 2], uint32_t (&fa)[4][4],
                                              uint32_t (&fb)[4][4], const Group& gr, const Tile& tile, uint32_t& it,
                                              int r0, int c, int ct, int lane) {
  convert_a<DIAG>(sm, it, tile, ct, lane);  // the first step's A; later steps' overlap the wgmma
  for (int kc = 0; kc < tile.kstages; kc += 2) {
    consumer_step<W, DIAG>(sm, acc, fa, it++, tile, kc, r0, c, ct, lane);
    if (kc + 1 < tile.kstages) consumer_step<W, DIAG>(sm, acc, fb, it++, tile, kc + 1, r0, c, ct, lane);
  }
  ptx::wgmma_wait<0>();
  if (lane == 0) ptx::mbar_arrive(sm.a16_empty((it - 1) % kA16Stages));
  // acc[4i + {0,1,2,3}] = C^T rows (r0, r0, r0+8, r0+8) x A rows (8i + 2c + {0,1,0,1}).
  const int64_t n_a = tile.n0 + r0, n_b = tile.n0 + r0 + 8;
#pragma unroll
  for (int i = 0; i < W / 8; ++i) {
    if (8 * i < tile.width) {
      const int64_t m = tile.m0 + 8 * i + 2 * c;
      if (m < gr.m) {
        if (n_a < gr.n) gr.c[m * gr.n + n_a] = __float2half_rn(acc[4 * i + 0] * kNvfp4Unscale);
        if (n_b < gr.n) gr.c[m * gr.n + n_b] = __float2half_rn(acc[4 * i + 2] * kNvfp4Unscale);
      }
      if (m + 1 < gr.m) {
        if (n_a < gr.n) gr.c[(m + 1) * gr.n + n_a] = __float2half_rn(acc[4 * i + 1] * kNvfp4Unscale);
        if (n_b < gr.n) gr.c[(m + 1) * gr.n + n_b] = __float2half_rn(acc[4 * i + 3] * kNvfp4Unscale);
      }
    }
  }
}

template <int MAXG, int W, int DIAG = 0>
__global__ void __launch_bounds__(kThreads, 1) nvfp4_group_gemm(const __grid_constant__ Params<MAXG> p) {
  static_assert(W % kWgmmaNStep == 0 && W <= kBlockM, "tile width is a wgmma N");
  extern __shared__ __align__(1024) uint8_t smem[];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int wg = warp / 4;

  const Smem sm{ptx::smem_u32(smem)};

  if (threadIdx.x == 0) {
    for (int s = 0; s < kRawStages; ++s) {
      ptx::mbar_init(sm.raw_full(s), 1);
      ptx::mbar_init(sm.raw_empty(s), kConsumerWarps);  // its B and A have been read
    }
    for (int s = 0; s < kA16Stages; ++s) {
      ptx::mbar_init(sm.a16_full(s), kConsumerWarps);
      ptx::mbar_init(sm.a16_empty(s), kConsumerWarps);
    }
    ptx::fence_mbar_init();
  }
  __syncthreads();
  // Inputs, outputs and the slot pool may still be in use by the previous grid in the stream.
  ptx::griddep_wait();
  ptx::griddep_launch_dependents();

  int slot = 0;
  if (wg == 0) {
    ptx::setmaxnreg_dec<24>();
    if (warp == 0) {
      // ---------------------------------------------------------------- producer
      if (lane == 0) slot = pool::acquire(g_pool_bits, kPoolWords);
      slot = __shfl_sync(0xffffffffu, slot, 0);
      int cur_g = -1, ring = kMapRing - 1, g_hint = 0;
      uint32_t it = 0;
      for (int t = blockIdx.x; t < p.num_tiles; t += gridDim.x) {
        const Tile tile = decode_tile(p, t, g_hint);
        g_hint = tile.g;
        const Group& gr = p.groups[tile.g];
        if (tile.g != cur_g) {
          cur_g = tile.g;
          ring = (ring + 1) % kMapRing;
          uint8_t* pair = g_pool_maps[slot][ring];
          pool::patch_map_2d(smem + kOffMapStage, p.tmpl_a, pair, gr.a, gr.k / 2, gr.m, lane);
          pool::patch_map_2d(smem + kOffMapStage + 128, p.tmpl_b, pair + 128, gr.b, gr.k / 2, gr.n, lane);
        }
        const void* map_a = g_pool_maps[slot][ring];
        const void* map_b = g_pool_maps[slot][ring] + 128;
        const int kt = gr.k / kBlockK;  // 512-byte scale blocks per 128 rows
        // Scale blocks of the tile's valid rows (the tile may start inside a block of 128 rows).
        const int blk0 = tile.m0 / 128;
        const int nblk = (min(tile.m0 + tile.width, gr.m) - 1) / 128 - blk0 + 1;
        const uint32_t bytes = kARawBytes + kBRawBytes + kSfbBytes + nblk * kSfBlockBytes;
        for (int kc = 0; kc < tile.kstages; ++kc, ++it) {
          const int s = it % kRawStages;
          ptx::mbar_wait(sm.raw_empty(s), ((it / kRawStages) & 1) ^ 1);
          if (lane == 0) {
            const uint32_t st = sm.raw(s);
            ptx::mbar_arrive_expect_tx(sm.raw_full(s), bytes);
            ptx::tma_load_2d(st + kOffARaw, map_a, kc * (kBlockK / 2), tile.m0, sm.raw_full(s), ptx::kEvictLast);
            ptx::tma_load_2d(st + kOffBRaw, map_b, kc * (kBlockK / 2), tile.n0, sm.raw_full(s), ptx::kEvictFirst);
            const uint8_t* sfb = gr.sfb + ((int64_t)(tile.n0 / 128) * kt + kc) * kSfBlockBytes;
            ptx::bulk_load(st + kOffSfb, sfb, kSfBlockBytes, sm.raw_full(s), ptx::kEvictLast);
            for (int b = 0; b < nblk; ++b) {
              const uint8_t* sfa = gr.sfa + ((int64_t)(blk0 + b) * kt + kc) * kSfBlockBytes;
              ptx::bulk_load(st + kOffSfa + b * kSfBlockBytes, sfa, kSfBlockBytes, sm.raw_full(s), ptx::kEvictLast);
            }
          }
          __syncwarp();
        }
      }
    }
  } else {
    // ------------------------------------------------------------------ consumers
    ptx::setmaxnreg_inc<240>();
    const int cw = wg - 1;          // 0 or 1: B rows [64 cw, 64 cw + 64) of the tile
    const int wq = warp % 4;        // warp inside the warpgroup: 16 rows each
    const int c = lane % 4;         // K block of the stage this thread dequantises
    const int r0 = 64 * cw + 16 * wq + lane / 4;  // tile-local B rows r0 and r0 + 8
    float acc[W / 2];
    uint32_t fa[4][4], fb[4][4];
    int g_hint = 0;
    uint32_t it = 0;
    for (int t = blockIdx.x; t < p.num_tiles; t += gridDim.x) {
      const Tile tile = decode_tile(p, t, g_hint);
      g_hint = tile.g;
      consumer_tile<W, DIAG>(sm, acc, fa, fb, p.groups[tile.g], tile, it, r0, c, threadIdx.x - 128, lane);
    }
  }
  __syncthreads();  // every TMA that used this CTA's map slot has been consumed
  if (threadIdx.x == 0) pool::release(g_pool_bits, slot);
}

}  // namespace fl::sm90
