// Clocks: for in-kernel timing experiments (trace points) and the time limit of bounded barrier waits
// (mbarrier.cuh mbar_wait_bounded); never on a path that results depend on.
#pragma once
#include <cstdint>

namespace fl::ptx {

// Device-wide nanoseconds (comparable across SMs; coarse ticks).
__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// This SM's cycle counter.
__device__ __forceinline__ uint64_t clock64() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint32_t smid() {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

}  // namespace fl::ptx
