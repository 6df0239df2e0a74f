// Warpgroup MMA (sm_90a): fences, commit/wait groups and shared-memory matrix descriptors.
// The MMA wrappers themselves are generated into wgmma_rs.cuh.
#pragma once
#include <cstdint>

#include "wgmma_rs.cuh"

namespace fl::ptx {

// Before the first wgmma, and after registers it reads (A fragments, accumulators) were written.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Matrix descriptor, no swizzle: core matrices of 8 rows x 16 bytes, `lbo` bytes apart along K
// and `sbo` bytes apart along M/N (PTX ISA, "Matrix Descriptor Format" for wgmma).
__host__ __device__ constexpr uint64_t smem_desc_noswizzle(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((smem_addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFFu) << 16) |
         ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32);
}

// Matrix descriptor, K-major with 128-byte swizzle (as TMA writes a box of 128-byte rows with
// CU_TENSOR_MAP_SWIZZLE_128B): 8-row atoms of 1024 bytes `sbo` apart; the leading offset is unused
// (encoded as 1); the tile starts on a 1024-byte boundary, and a k16 step inside the atom advances
// the start address by 32 bytes (PTX ISA, "Matrix Descriptor Format" and "Shared Memory Matrix
// Layout" for wgmma).
__host__ __device__ constexpr uint64_t smem_desc_swizzle128(uint32_t smem_addr, uint32_t sbo) {
  return (uint64_t)((smem_addr & 0x3FFFFu) >> 4) | (uint64_t{1} << 16) | ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32) |
         (uint64_t{1} << 62);
}

}  // namespace fl::ptx
