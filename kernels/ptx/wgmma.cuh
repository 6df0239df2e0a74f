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

}  // namespace fl::ptx
