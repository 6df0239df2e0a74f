// sm_100a NVFP4 grouped GEMM: C[g] (M x N, fp16) = A[g] (M x K) . B[g] (N x K)^T, fp32 accumulation
// in tensor memory by tcgen05.mma .kind::mxf4nvf4 (E2M1 operands, E4M3 scales per 16 K values).
//
// Computed as C^T = B . A^T (kernels/sm100/desc.h): a tile is 128 B rows (the MMA's M) by up to 128 A rows
// (the MMA's N, the valid rows rounded up to 16, set per tile in the instruction descriptor), so a
// group with small M wastes little. One CTA = 6 warps, warp-specialised, persistent over tiles:
//   warp 4      TMA: patches the group's tensor maps in a CTA-private pool slot, loads per 256-wide
//               K stage the A and B tiles (2D TMA, 128-byte swizzle) and their 512-byte scale blocks
//               (bulk copies: the reordered layout keeps a tile's blocks of one stage contiguous);
//   warp 5      MMA: copies a stage's scale blocks into tensor memory (tcgen05.cp), issues one MMA
//               per 64 K, commits the stage back to TMA and the finished tile to the epilogue;
//   warps 0-3   epilogue: tensor memory -> registers -> fp16 C, lane = C column, 32 per warp.
// Two accumulator buffers let the epilogue drain one tile while the MMA fills the next.
// K need only be a multiple of 64: the last stage may be partial (TMA zero-fills past K, and only
// its valid chunks are copied and multiplied).
#pragma once
#include <cuda.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/group_operands.h"
#include "common/map_pool.cuh"
#include "ptx/griddep.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/tcgen05.cuh"
#include "ptx/tma.cuh"
#include "sm100/desc.h"

namespace fl::sm100 {

struct Group : GroupOperands {  // a, b, sfa, sfb, c
  uint64_t policy_a;   // L2 hints: the larger operand streams (evict first), the smaller stays
  uint64_t policy_b;
  int32_t m, n, k;
  int32_t tile_end;    // exclusive end of this group's tiles in the launch's tile order
};

template <int MAXG>
struct Params {
  CUtensorMap tmpl;    // any valid map with the 128 x 128-byte box; address, extents, stride rewritten
  int32_t num_groups;
  int32_t num_tiles;
  uint64_t wait_cycles;  // limit of a barrier wait for one pipeline step (kWaitCycles; the self-check's is lower)
  Group groups[MAXG];
};

// Bounded barrier waits (ptx::mbar_wait_bounded): a stuck pipeline traps instead of spinning forever. A wait for one
// pipeline step (a stage loaded, a stage consumed, an accumulator drained) lasts microseconds, milliseconds under
// heavy contention from other work; kWaitCycles, 2^34 cycles of the SM clock (about 9 s at 1.9 GHz, longer at lower
// clocks), is over a thousand times the longest of those, so a wait that reaches it is a hang. The epilogue's wait for
// a tile's accumulator spans the tile's whole K loop, one step per K stage: it is allowed (stages + 1) such limits.
// Waits of this kernel outside its mbarriers (griddepcontrol.wait on the previous grid, the tensor-map pool, the
// tensor-memory allocation) are not bounded: what they wait for is other work, which may legitimately run for long.
constexpr uint64_t kWaitCycles = uint64_t{1} << 34;

// Shared memory (bytes): a 1024-byte header, then the stages (1024-byte aligned for the swizzle).
constexpr uint32_t kTileBytes = kTileB * kBlockK / 2;  // also kTileA rows: 16 KB
static_assert(kTileA == kTileB, "one map template serves both operands");
constexpr uint32_t kOffA = 0;
constexpr uint32_t kOffB = kOffA + kTileBytes;
constexpr uint32_t kOffSfa = kOffB + kTileBytes;
constexpr uint32_t kOffSfb = kOffSfa + kChunks * kSfBlockBytes;
constexpr uint32_t kStageBytes = kOffSfb + kChunks * kSfBlockBytes;
constexpr uint32_t kOffMapStage = 0;  // two 128-byte tensor maps being patched
constexpr uint32_t kOffBars = 256;
constexpr uint32_t kNumBars = 2 * kStages + 2 * kAccBuffers;
constexpr uint32_t kOffTmemSlot = kOffBars + 8 * kNumBars;
constexpr uint32_t kHeaderBytes = 1024;
constexpr uint32_t kSmemBytes = kHeaderBytes + kStages * kStageBytes;
static_assert(kStageBytes % 1024 == 0, "stages start on 128-byte-swizzle atom boundaries");
static_assert(kOffTmemSlot + 4 <= kHeaderBytes, "header");
static_assert(kSmemBytes <= 227 * 1024, "exceeds the sm_100 shared-memory limit per block");

constexpr int kEpilogueWarps = 4;
constexpr int kTmaWarp = 4;
constexpr int kMmaWarp = 5;
static_assert(kThreads == 32 * (kEpilogueWarps + 2), "warp roles");

// Tensor-map pool: a slot is a ring of kMapRing (A, B) map pairs; the TMA warp moves to the next
// pair when its tile changes group. A pair is rewritten only after kMapRing >= kStages + 1 later
// tiles (each at least one stage) were issued, by when the TMA warp has waited for the stage that
// last used it to be consumed, so no TMA still reads it.
constexpr int kPoolSlots = 1024;  // >= resident CTAs of this kernel on any device (1 per SM)
constexpr int kPoolWords = kPoolSlots / 64;
constexpr int kMapPairBytes = 256;
__device__ unsigned long long g_pool_bits[kPoolWords];
__device__ __align__(128) uint8_t g_pool_maps[kPoolSlots][kMapRing][kMapPairBytes];

struct Smem {
  uint32_t base;
  __device__ uint32_t full(int s) const { return base + kOffBars + 8u * s; }             // TMA landed
  __device__ uint32_t empty(int s) const { return base + kOffBars + 8u * (kStages + s); }  // MMAs done
  __device__ uint32_t acc_full(int b) const { return base + kOffBars + 8u * (2 * kStages + b); }
  __device__ uint32_t acc_empty(int b) const { return base + kOffBars + 8u * (2 * kStages + kAccBuffers + b); }
  __device__ uint32_t stage(int s) const { return base + kHeaderBytes + s * kStageBytes; }
};

// Accumulator buffer of the CTA's i-th tile, and the parity of its use.
template <bool kPersistent>
__device__ __forceinline__ uint32_t acc_buf(uint32_t i) { return kPersistent ? i % kAccBuffers : 0; }

// ------------------------------------------------------------------------ TMA warp
template <int MAXG>
__device__ __forceinline__ void tma_warp(const Params<MAXG>& p, const Smem& sm, uint8_t* smem, int step, int lane,
                                         int slot) {
  int cur_g = -1, ring = kMapRing - 1, hint = 0;
  uint32_t it = 0;
  for (int t = blockIdx.x; t < p.num_tiles; t += step) {
    const TileCoord tc = decode_tile(p.groups, t, hint);
    hint = tc.g;
    const Group& gr = p.groups[tc.g];
    if (tc.g != cur_g) {
      cur_g = tc.g;
      ring = (ring + 1) % kMapRing;
      uint8_t* pair = g_pool_maps[slot][ring];
      pool::patch_map_2d(smem + kOffMapStage, p.tmpl, pair, gr.a, gr.k / 2, gr.m, lane);
      pool::patch_map_2d(smem + kOffMapStage + 128, p.tmpl, pair + 128, gr.b, gr.k / 2, gr.n, lane);
    }
    const void* map_a = g_pool_maps[slot][ring];
    const void* map_b = g_pool_maps[slot][ring] + 128;
    const int64_t blocks_k = gr.k / kMmaK;  // 512-byte scale blocks per 128 rows
    const uint8_t* sfa = gr.sfa + (int64_t)(tc.m0 / kTileA) * blocks_k * kSfBlockBytes;
    const uint8_t* sfb = gr.sfb + (int64_t)(tc.n0 / kTileB) * blocks_k * kSfBlockBytes;
    const int ks = kstages(gr.k);
    for (int kc = 0; kc < ks; ++kc, ++it) {
      const int s = it % kStages;
      ptx::mbar_wait_bounded(sm.empty(s), ((it / kStages) & 1) ^ 1, p.wait_cycles);
      if (lane == 0) {
        const uint32_t st = sm.stage(s);
        const uint32_t sf_bytes = (kc + 1 < ks ? kChunks : last_chunks(gr.k)) * kSfBlockBytes;
        const int64_t sf_off = (int64_t)kc * kChunks * kSfBlockBytes;
        // TMA counts whole boxes, the zero-filled part past K or past the last row included.
        ptx::mbar_arrive_expect_tx(sm.full(s), 2 * kTileBytes + 2 * sf_bytes);
        ptx::tma_load_2d(st + kOffA, map_a, kc * (kBlockK / 2), tc.m0, sm.full(s), gr.policy_a);
        ptx::tma_load_2d(st + kOffB, map_b, kc * (kBlockK / 2), tc.n0, sm.full(s), gr.policy_b);
        ptx::bulk_load(st + kOffSfa, sfa + sf_off, sf_bytes, sm.full(s), gr.policy_a);
        ptx::bulk_load(st + kOffSfb, sfb + sf_off, sf_bytes, sm.full(s), gr.policy_b);
      }
      __syncwarp();
    }
  }
}

// ------------------------------------------------------------------------ MMA warp
template <int MAXG, bool kPersistent>
__device__ __forceinline__ void mma_warp(const Params<MAXG>& p, const Smem& sm, uint32_t tmem, int step, int lane) {
  int hint = 0;
  uint32_t it = 0, i = 0;
  for (int t = blockIdx.x; t < p.num_tiles; t += step, ++i) {
    const TileCoord tc = decode_tile(p.groups, t, hint);
    hint = tc.g;
    const Group& gr = p.groups[tc.g];
    const uint32_t idesc = idesc_mxf4nvf4(kTileB, mma_n(gr.m, tc.m0));
    const uint32_t buf = acc_buf<kPersistent>(i);
    if (kPersistent) ptx::mbar_wait_bounded(sm.acc_empty(buf), ((i / kAccBuffers) & 1) ^ 1, p.wait_cycles);
    ptx::tcgen05_fence_after();
    const uint32_t d = tmem + acc_col(buf);
    const int ks = kstages(gr.k);
    for (int kc = 0; kc < ks; ++kc, ++it) {
      const int s = it % kStages;
      ptx::mbar_wait_bounded(sm.full(s), (it / kStages) & 1, p.wait_cycles);
      ptx::tcgen05_fence_after();
      if (lane == 0) {
        const uint32_t st = sm.stage(s);
        const int chunks = kc + 1 < ks ? kChunks : last_chunks(gr.k);
        // Same-thread tcgen05.cp then tcgen05.mma execute in order: no fence between them.
        for (int c = 0; c < chunks; ++c) {
          ptx::tmem_cp_32x128b_warpx4(tmem + sf_col(s, 0, c), smem_desc_scales(st + kOffSfb + c * kSfBlockBytes));
          ptx::tmem_cp_32x128b_warpx4(tmem + sf_col(s, 1, c), smem_desc_scales(st + kOffSfa + c * kSfBlockBytes));
        }
        for (int c = 0; c < chunks; ++c)
          ptx::mma_mxf4nvf4(d, smem_desc_operand(st + kOffB, c), smem_desc_operand(st + kOffA, c), idesc,
                            tmem + sf_col(s, 0, c), tmem + sf_col(s, 1, c), kc > 0 || c > 0);
        ptx::tcgen05_commit(sm.empty(s));  // frees the stage (smem and its scale columns) when done
      }
      __syncwarp();
    }
    if (lane == 0) ptx::tcgen05_commit(sm.acc_full(buf));
    __syncwarp();
  }
}

// ------------------------------------------------------------------------ epilogue warps
// Thread (warp w, lane l) owns tensor-memory lane 32w + l: B row n0 + 32w + l, i.e. C column.
template <int MAXG, bool kPersistent>
__device__ __forceinline__ void epilogue_warps(const Params<MAXG>& p, const Smem& sm, uint32_t tmem, int step,
                                               int warp, int lane) {
  int hint = 0;
  uint32_t i = 0;
  for (int t = blockIdx.x; t < p.num_tiles; t += step, ++i) {
    const TileCoord tc = decode_tile(p.groups, t, hint);
    hint = tc.g;
    const Group& gr = p.groups[tc.g];
    const uint32_t buf = acc_buf<kPersistent>(i);
    ptx::mbar_wait_bounded(sm.acc_full(buf), (i / kAccBuffers) & 1, p.wait_cycles * (uint64_t)(kstages(gr.k) + 1));
    ptx::tcgen05_fence_after();
    const int n = mma_n(gr.m, tc.m0);
    const int64_t col = (int64_t)tc.n0 + 32 * warp + lane;
    for (int j0 = 0; j0 < n; j0 += 16) {  // n is warp-uniform: every lane takes part in each load
      uint32_t v[16];
      ptx::tmem_ld_32x32b_x16(tmem + tmem_addr(32 * warp, acc_col(buf) + j0), v);
      ptx::tmem_wait_ld();
      if (col < gr.n) {
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const int64_t row = (int64_t)tc.m0 + j0 + j;
          if (row < gr.m) gr.c[row * gr.n + col] = __float2half_rn(__uint_as_float(v[j]));
        }
      }
    }
    ptx::tcgen05_fence_before();
    __syncwarp();
    if (kPersistent && lane == 0) ptx::mbar_arrive(sm.acc_empty(buf));
  }
}

// kPersistent: grid = min(tiles, SMs), CTAs stride over the tile table with two accumulator
// buffers. Otherwise one tile per CTA (grid = tiles <= SMs), one accumulator buffer.
template <int MAXG, bool kPersistent>
__global__ void __launch_bounds__(kThreads, 1) nvfp4_group_gemm(const __grid_constant__ Params<MAXG> p) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const Smem sm{ptx::smem_u32(smem)};
  const int step = kPersistent ? (int)gridDim.x : p.num_tiles;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbar_init(sm.full(s), 1);
      ptx::mbar_init(sm.empty(s), 1);  // tcgen05.commit arrives once
    }
    for (uint32_t b = 0; b < kAccBuffers; ++b) {
      ptx::mbar_init(sm.acc_full(b), 1);
      ptx::mbar_init(sm.acc_empty(b), kEpilogueWarps);
    }
    ptx::fence_mbar_init();
  }
  if (warp == kMmaWarp) {
    ptx::tmem_alloc(sm.base + kOffTmemSlot, kTmemCols);
    ptx::tmem_relinquish_alloc_permit();
  }
  ptx::tcgen05_fence_before();
  __syncthreads();
  ptx::tcgen05_fence_after();
  const uint32_t tmem = *reinterpret_cast<volatile uint32_t*>(smem + kOffTmemSlot);

  // Inputs, outputs and the slot pool may still be in use by the previous grid in the stream.
  ptx::griddep_wait();
  ptx::griddep_launch_dependents();

  int slot = 0;
  if (warp == kTmaWarp) {
    if (lane == 0) slot = pool::acquire(g_pool_bits, kPoolWords);
    slot = __shfl_sync(0xffffffffu, slot, 0);
    tma_warp<MAXG>(p, sm, smem, step, lane, slot);
  } else if (warp == kMmaWarp) {
    mma_warp<MAXG, kPersistent>(p, sm, tmem, step, lane);
  } else {
    epilogue_warps<MAXG, kPersistent>(p, sm, tmem, step, warp, lane);
  }

  ptx::tcgen05_fence_before();
  __syncthreads();  // every TMA that used the map slot and every MMA into tensor memory is done
  if (warp == kMmaWarp) {
    ptx::tcgen05_fence_after();
    ptx::tmem_dealloc(tmem, kTmemCols);
  }
  if (warp == kTmaWarp && lane == 0) pool::release(g_pool_bits, slot);
}

}  // namespace fl::sm100
