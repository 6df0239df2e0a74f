// A device-wide pool of CTA-private tensor-map slots, and patching a 2D byte-matrix map into one.
//
// Two launches may run at once (two streams, or the next launch starting early under programmatic
// dependent launch), so a CTA owns a slot for its lifetime instead of indexing by blockIdx, and
// never writes a map another CTA may be reading. A kernel family declares its own storage
// (`__device__` bit words and map bytes) and passes it in.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "ptx/mbarrier.cuh"
#include "ptx/tensormap.cuh"

namespace fl::pool {

// One thread: claims a free slot (spins while all are taken; the pool holds at least as many slots
// as CTAs can be resident on the device).
__device__ __forceinline__ int acquire(unsigned long long* bits, int words) {
  for (int i = blockIdx.x % words;; i = (i + 1) % words) {
    const unsigned long long cur = *reinterpret_cast<volatile unsigned long long*>(&bits[i]);
    if (cur == ~0ull) {
      __nanosleep(64);
      continue;
    }
    const int bit = __ffsll(static_cast<long long>(~cur)) - 1;
    const unsigned long long mask = 1ull << bit;
    if ((atomicOr(&bits[i], mask) & mask) == 0) return i * 64 + bit;
  }
}

// One thread, after every use of the slot's maps has completed.
__device__ __forceinline__ void release(unsigned long long* bits, int slot) {
  __threadfence();
  atomicAnd(&bits[slot / 64], ~(1ull << (slot % 64)));
}

// Whole warp: copy `tmpl` to the shared staging area, point it at a [rows, row_bytes] byte matrix and
// publish it to `gmem_map` (release through the tensormap proxy). A thread that issues TMA with it
// acquires it first (ptx::tmap_acquire).
__device__ __forceinline__ void publish_map_2d(uint8_t* stage, const CUtensorMap& tmpl, void* gmem_map,
                                               const void* base, uint32_t row_bytes, uint32_t rows, int lane) {
  if (lane < 8) reinterpret_cast<uint4*>(stage)[lane] = reinterpret_cast<const uint4*>(&tmpl)[lane];
  __syncwarp();
  const uint32_t s = ptx::smem_u32(stage);
  if (lane == 0) {
    ptx::tmap_replace_address(s, reinterpret_cast<uint64_t>(base));
    ptx::tmap_replace_dim<0>(s, row_bytes);
    ptx::tmap_replace_dim<1>(s, rows);
    ptx::tmap_replace_stride<0>(s, row_bytes);
  }
  __syncwarp();
  ptx::tmap_publish(gmem_map, s);
}

// publish_map_2d, then acquired for lane 0, the thread that issues the TMA.
__device__ __forceinline__ void patch_map_2d(uint8_t* stage, const CUtensorMap& tmpl, void* gmem_map,
                                             const void* base, uint32_t row_bytes, uint32_t rows, int lane) {
  publish_map_2d(stage, tmpl, gmem_map, base, row_bytes, rows, lane);
  if (lane == 0) ptx::tmap_acquire(gmem_map);
  __syncwarp();
}

}  // namespace fl::pool
