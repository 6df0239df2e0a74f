// Rewriting TMA descriptors on the device (sm_90a): edit a copy in shared memory, publish it to
// global memory with a release through the tensormap proxy, acquire before the first TMA use.
#pragma once
#include <cstdint>

namespace fl::ptx {

__device__ __forceinline__ void tmap_replace_address(uint32_t smem_map, uint64_t addr) {
  asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;" ::"r"(smem_map), "l"(addr)
               : "memory");
}

template <int DIM>
__device__ __forceinline__ void tmap_replace_dim(uint32_t smem_map, uint32_t extent) {
  asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], %1, %2;" ::"r"(smem_map), "n"(DIM),
               "r"(extent)
               : "memory");
}

// STRIDE_IDX 0 is the byte stride of dimension 1.
template <int STRIDE_IDX>
__device__ __forceinline__ void tmap_replace_stride(uint32_t smem_map, uint64_t bytes) {
  asm volatile("tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], %1, %2;" ::"r"(smem_map),
               "n"(STRIDE_IDX), "l"(bytes)
               : "memory");
}

// Whole warp: copies the 128-byte descriptor to global memory and releases it to the tensormap proxy.
__device__ __forceinline__ void tmap_publish(void* gmem_map, uint32_t smem_map) {
  asm volatile(
      "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%0], [%1], 128;" ::"l"(
          gmem_map),
      "r"(smem_map)
      : "memory");
}

// The thread that issues TMA with this descriptor runs this once after it was published.
__device__ __forceinline__ void tmap_acquire(const void* gmem_map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(gmem_map) : "memory");
}

}  // namespace fl::ptx
