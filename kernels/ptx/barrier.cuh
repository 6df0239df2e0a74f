// Named CTA barriers (bar.sync with an id and a thread count), for syncing one warpgroup.
#pragma once
#include <cstdint>

namespace fl::ptx {

// Waits until `threads` threads (a multiple of 32) have arrived at barrier `id` (1..15; 0 is
// __syncthreads). Orders their shared-memory accesses like __syncthreads does.
__device__ __forceinline__ void named_bar_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace fl::ptx
