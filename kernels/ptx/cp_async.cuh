// cp.async (sm_80+): copies from global to shared memory that no register holds, waited for by the issuing
// thread (then a barrier makes them visible to the others).
#pragma once
#include <cstdint>

namespace fl::ptx {

// 4 bytes from global `src` to shared `dst` (both 4-byte aligned), through L1.
__device__ __forceinline__ void cp_async_4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src)
               : "memory");
}

// Closes the thread's group of copies issued so far.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Waits for every copy this thread issued.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

}  // namespace fl::ptx
