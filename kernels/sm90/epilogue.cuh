// Epilogue of the sm_90a GEMM: one consumer warpgroup's C^T accumulators (wgmma layout, times 2^-28)
// to rows of C (fp16, or in the masked form fp16 or bf16 with an optional scale per expert: out_form; [m, n]
// row-major) through shared memory.
//
// Per 64 A rows at a time (one pass): stmatrix.trans writes each warp's 16 B rows x
// 8 A rows fragments as 16-byte pieces of C rows into the warpgroup's buffer (row a = A row, 8 chunks
// of 8 B rows, chunk q stored at q ^ (a % 8): conflict-free for stmatrix and for the row reads), then
// in launches of up to 16 groups with every C row aligned, one TMA store of the whole pass (TMA, store_pass);
// else each thread stores 16-byte chunks of whole C rows (a warp writes four 128-byte rows per
// instruction). C rows at any alignment (N not a multiple of 8, or C's pointer off 16 bytes): in the
// kernels compiled for it (ANY), each row in the aligned 16-byte chunks of global memory it covers, the
// partial chunks at its ends one element per thread (store_row_unaligned, kernels/common/row_pieces.h); in the
// others (launches whose every C row is aligned: a separate instantiation, so this code does not move
// the K loops' register allocation) element by element, as is the last chunk of a row past N.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "common/nvfp4.cuh"
#include "common/out_form.cuh"
#include "ptx/memorder.cuh"
#include "ptx/stmatrix.cuh"
#include "ptx/tma.cuh"
#include "common/row_pieces.h"

namespace fl::sm90 {

// C's rounding and scale (kernels/common/out_form.cuh): the task form's, fp16 and the accumulators' 2^28. The masked
// form's C (CallC, kernels/sm90/gemm.cuh) has its own overload.
template <class Group>
__device__ __forceinline__ OutForm out_form(const Group&) {
  return {kNvfp4Unscale, false};
}

// The buffer of one consumer warpgroup: [64 A rows][64 B rows] of C's 16-bit values (C rows of 128 bytes).
constexpr uint32_t kEpiRows = 64;
constexpr uint32_t kEpiWgBytes = kEpiRows * 128;

// Elements e, e + 1 (e even, 0 <= e <= 62) of a buffer row (`brow`, swizzled by `sw`) as one word.
__device__ __forceinline__ uint32_t buffer_pair(uint32_t brow, int sw, int e) {
  return ptx::lds32(brow + (((e >> 3) ^ sw) << 4) + (e & 7) * 2);
}

// Element e (0 <= e < 64) of a buffer row.
__device__ __forceinline__ __half buffer_half(uint32_t brow, int sw, int e) {
  return __ushort_as_half(ptx::lds16(brow + (((e >> 3) ^ sw) << 4) + (e & 7) * 2));
}

// One C row's 64 columns of a pass (the buffer's row `brow`, swizzled by `sw` = its row % 8) to `seg`
// at any alignment, by thread q of the row's eight (kernels/common/row_pieces.h): its whole aligned 16-byte chunk
// of global memory, gathered from the buffer in element pairs (shifted by one element where the chunk
// starts at an odd element), and its element of each partial chunk at the row's ends (`len` = N - n0:
// the row may end inside the segment).
__device__ __forceinline__ void store_row_unaligned(uint32_t brow, int sw, __half* seg, int64_t len, int q) {
  const int end = len < 64 ? (int)len : 64;  // the segment's elements: [0, end)
  const int mis = (int)((reinterpret_cast<uintptr_t>(seg) >> 1) & 7);  // half-words past a 16-byte boundary
  const RowPiece p = row_piece(mis, end, q);
  if (p.full >= 0) {
    const int e0 = p.full;
    uint4 v;
    if ((e0 & 1) == 0) {
      v = make_uint4(buffer_pair(brow, sw, e0), buffer_pair(brow, sw, e0 + 2), buffer_pair(brow, sw, e0 + 4),
                     buffer_pair(brow, sw, e0 + 6));
    } else {  // e0 >= 1 and e0 + 7 <= 63: the pairs from e0 - 1 to e0 + 7 lie in the row
      const uint32_t p0 = buffer_pair(brow, sw, e0 - 1), p1 = buffer_pair(brow, sw, e0 + 1),
                     p2 = buffer_pair(brow, sw, e0 + 3), p3 = buffer_pair(brow, sw, e0 + 5),
                     p4 = buffer_pair(brow, sw, e0 + 7);
      v = make_uint4(__funnelshift_r(p0, p1, 16), __funnelshift_r(p1, p2, 16), __funnelshift_r(p2, p3, 16),
                     __funnelshift_r(p3, p4, 16));
    }
    ptx::st_v4(seg + e0, v);
  }
  if (p.head >= 0) seg[p.head] = buffer_half(brow, sw, p.head);
  if (p.tail >= 0) seg[p.tail] = buffer_half(brow, sw, p.tail);
}

// TMA: this thread's TMA stores have read their shared-memory source. Every thread of the warpgroup may call it
// (a thread with no store waits for nothing): no branch on the thread, so nothing is kept live for it.
template <bool TMA>
__device__ __forceinline__ void epilogue_buffer_read() {
  if constexpr (TMA) ptx::bulk_wait_read_all();
}

__device__ __forceinline__ int tid_in_warpgroup() {
  int tid;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
  return tid % 128;
}

// Pass H (A rows [64 H, 64 H + 64) of a tile W wide): `acc` is the warpgroup's accumulators (64 B
// rows x W A rows), `n0` its first C column, `rows` the tile's valid A rows from C row m0. `gr` is the
// group (fields c: C, [m, n] row-major; m; n), read where used.
// TMA (launches whose C rows are all aligned, with a C tensor map per group: `cmap`, fp16 C as bytes,
// box 64 rows x 128 bytes, 128-byte swizzle): the buffer is the box in the map's swizzle (the layout above
// with a 1024-byte aligned buffer), stored by one TMA store that thread 0 of the warpgroup issues; the
// map's extents clip rows past the group's M (a tile's rows past `rows` are past M: every width is a
// multiple of 64) and columns past N. Thread 0 waits for the store's reads of the buffer before the
// warpgroup writes it again: at the next pass (epilogue_buffer_read), or before anything else writes the
// buffer or the CTA ends (the callers), so the wait after a tile's last pass overlaps the next K loop.
template <int W, int H, bool ANY, bool TMA, class Group>
__device__ __forceinline__ void store_pass(uint32_t buf, const float (&acc)[W / 2], const Group& gr, int64_t m0,
                                           int rows, int64_t n0, bool vec, int cw, int wq, int lane,
                                           const void* cmap) {
  static_assert(!(TMA && ANY), "TMA stores: aligned C rows only");
  static_assert(!TMA || W % (int)kEpiRows == 0, "TMA stores: a tile's rows past the pass's are past M");
  constexpr int kRows = W - (int)kEpiRows * H < (int)kEpiRows ? W - (int)kEpiRows * H : (int)kEpiRows;
  // thread in the warpgroup; ANY: read again (volatile), so what the stores derive from it is not hoisted
  // into the K loops (there it made ptxas rematerialise the loops' own thread constants)
  const int t = ANY ? tid_in_warpgroup() : wq * 32 + lane;
  epilogue_buffer_read<TMA>();      // (thread 0) the previous pass's TMA store has read the buffer
  ptx::named_barrier(1 + cw, 128);  // the previous pass's reads of the buffer are done
  // stmatrix: lane -> matrix q = lane / 8 (8-row block of A rows +q/2, B-row half q%2), row lane % 8.
  const int sq = lane / 8, srow = lane % 8;
  const int schunk = 2 * wq + (sq % 2);
  const OutForm form = out_form(gr);
#pragma unroll
  for (int i = 0; i < kRows / 8; i += 2) {
    uint32_t r[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int e = 4 * ((int)kEpiRows / 8 * H + i + q / 2) + 2 * (q % 2);
      r[q] = out_pair(acc[e], acc[e + 1], form);
    }
    const int a = 8 * (i + sq / 2) + srow;  // A row inside the pass
    ptx::stmatrix_x4_trans(buf + a * 128 + ((schunk ^ (a % 8)) << 4), r[0], r[1], r[2], r[3]);
  }
  if constexpr (TMA) {
    ptx::fence_proxy_async_smem();    // this thread's stmatrix writes, before the TMA unit reads them
    ptx::named_barrier(1 + cw, 128);  // the buffer holds this pass's C rows
    if (t == 0) {
      ptx::tma_store_2d(cmap, buf, (int)(n0 * 2), (int)(m0 + (int)kEpiRows * H));
      ptx::bulk_commit();
    }
    return;
  }
  ptx::named_barrier(1 + cw, 128);  // the buffer holds this pass's C rows
  const int q = t % 8;
  const int64_t n = n0 + 8 * q;
  if constexpr (ANY) {
    if (vec) {  // N % 8 == 0: n + 8 <= N wherever n < N
#pragma unroll
      for (int rr = 0; rr < kRows / 16; ++rr) {
        const int a = t / 8 + 16 * rr;
        const int row = (int)kEpiRows * H + a;
        if (row < rows && n < gr.n)
          *reinterpret_cast<uint4*>(gr.c + (m0 + row) * gr.n + n) = ptx::lds128(buf + a * 128 + ((q ^ (a % 8)) << 4));
      }
    } else {
      for (int rr = 0; rr < kRows / 16; ++rr) {
        const int a = t / 8 + 16 * rr;
        const int row = (int)kEpiRows * H + a;
        if (row < rows) store_row_unaligned(buf + a * 128, a % 8, gr.c + (m0 + row) * gr.n + n0, gr.n - n0, q);
      }
    }
  } else {
#pragma unroll
    for (int rr = 0; rr < kRows / 16; ++rr) {
      const int a = t / 8 + 16 * rr;
      const int row = (int)kEpiRows * H + a;
      if (row < rows && n < gr.n) {
        const uint4 v = ptx::lds128(buf + a * 128 + ((q ^ (a % 8)) << 4));
        __half* dst = gr.c + (m0 + row) * gr.n + n;
        if (vec && n + 8 <= gr.n) {
          *reinterpret_cast<uint4*>(dst) = v;
        } else {
          const __half* e = reinterpret_cast<const __half*>(&v);
          for (int x = 0; x < 8 && n + x < gr.n; ++x) dst[x] = e[x];
        }
      }
    }
  }
}

// Passes H, H + 1, ... of a tile W wide whose first `rows` A rows are valid; SHARED (half tiles, whose
// two warpgroups hold the same 64 B rows): only warpgroup cw's passes, H % 2 == cw.
template <int W, int H, bool SHARED, bool ANY, bool TMA, class Group>
__device__ __forceinline__ void store_passes(uint32_t buf, const float (&acc)[W / 2], const Group& gr, int64_t m0,
                                             int rows, int64_t n0, bool vec, int cw, int wq, int lane,
                                             const void* cmap) {
  if constexpr (H * (int)kEpiRows < W) {
    if (H == 0 || rows > H * (int)kEpiRows) {  // uniform over the warpgroup (named barriers)
      if (!SHARED || H % 2 == cw) store_pass<W, H, ANY, TMA>(buf, acc, gr, m0, rows, n0, vec, cw, wq, lane, cmap);
      store_passes<W, H + 1, SHARED, ANY, TMA>(buf, acc, gr, m0, rows, n0, vec, cw, wq, lane, cmap);
    }
  }
}

// One consumer warpgroup (cw, warp wq) of a tile W A rows wide from C row m0 and 64 B rows from C
// column n0 + 64 cw of group `gr` (SHARED, a half tile: its passes H % 2 == cw of the 64 B rows from
// column n0); `buf` is the warpgroup's buffer (kEpiWgBytes). Every thread of the warpgroup calls it
// (named barriers). ANY: C rows at any alignment are stored in aligned chunks (see the top). TMA: each
// pass by a TMA store through `cmap`, the group's C map (store_pass).
template <int W, bool SHARED, bool ANY, bool TMA, class Group>
__device__ __forceinline__ void store_tile(uint32_t buf, const float (&acc)[W / 2], const Group& gr, int m0, int n0,
                                           int cw, int wq, int lane, const void* cmap) {
  static_assert(W % 16 == 0, "passes of whole stmatrix.x4 pairs");
  const bool vec = (gr.n % 8) == 0 && (reinterpret_cast<uintptr_t>(gr.c) % 16) == 0;
  const int rows = min(W, gr.m - m0);  // valid A rows of the tile (uniform: no early exit before barriers)
  store_passes<W, 0, SHARED, ANY, TMA>(buf, acc, gr, m0, rows, (int64_t)n0 + (SHARED ? 0 : 64 * cw), vec, cw, wq,
                                       lane, cmap);
}

}  // namespace fl::sm90
