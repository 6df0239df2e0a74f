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

// 16 bytes from global `src` to shared address `dst` (both 16-byte aligned), past L1; `bytes` (0 or 16) of them read,
// the rest of the 16 written as zeros (0: nothing is read, and src need not point at anything valid).
__device__ __forceinline__ void cp_async_16_fill(uint32_t dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}

// 4 bytes alike (4-byte aligned), through L1; `bytes` 0 or 4.
__device__ __forceinline__ void cp_async_4_fill(uint32_t dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}

// Closes the thread's group of copies issued so far.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Waits until at most N of the thread's committed groups are still in flight (the older ones have landed).
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Waits for every copy this thread issued.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

}  // namespace fl::ptx
