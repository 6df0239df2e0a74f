// mbarrier: shared-memory barriers that count thread arrivals and async-copy bytes.
#pragma once
#include <cstdint>

#include "ptx/timer.cuh"

namespace fl::ptx {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

// Makes barrier initialisation visible to the async proxy (TMA completes on these barriers).
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// One arrival by one lane of the (converged) warp, the lane chosen by elect.sync: no lane index in a
// register. Where register pressure had ptxas rematerialise `lane == 0` from %tid every K step (S2R, a
// variable-latency read on the step's path), this takes its place.
__device__ __forceinline__ void mbar_arrive_elected(uint32_t bar) {
  asm volatile(
      "{\n .reg .b32 r;\n .reg .pred p;\n"
      " elect.sync r|p, 0xffffffff;\n"
      " @p mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n}"
      ::"r"(bar)
      : "memory");
}

// One arrival that also announces `bytes` of async-copy traffic to wait for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n .reg .pred p;\n"
      " mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
      " selp.u32 %0, 1, 0, p;\n}"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// Waits until the phase with the given parity has completed. A fresh barrier counts its
// (non-existent) previous phase, parity 1, as complete: producers start by waiting on parity 1.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

// The most one turn of mbar_wait_bounded's loop counts, in SM clock cycles (about 8 ms at 2 GHz). %clock64 is
// per SM; a CTA moved to another SM (compute preemption) may see it jump either way, and such a jump counts as one
// turn at most: the limit measures cycles spent waiting, not the time a CTA was off the GPU.
constexpr uint64_t kWaitTurnCycles = uint64_t{1} << 24;

// mbar_wait with a limit: where the phase has not completed after about `limit` cycles of this SM's clock spent
// in the wait, the thread executes trap, so a stuck pipeline ends the kernel with an error the host sees (at its
// next synchronisation; a sticky one: the context is unusable after it) instead of spinning forever. The first try
// is mbar_wait's; the clock is read only after it fails. Choose `limit` far above the longest legitimate wait.
__device__ __forceinline__ void mbar_wait_bounded(uint32_t bar, uint32_t parity, uint64_t limit) {
  if (mbar_try_wait(bar, parity)) return;
  uint64_t waited = 0, last = ptx::clock64();
  while (!mbar_try_wait(bar, parity)) {
    const uint64_t now = ptx::clock64();
    const uint64_t turn = now - last;  // huge where the counter went back
    last = now;
    waited += turn < kWaitTurnCycles ? turn : kWaitTurnCycles;
    if (waited > limit) __trap();
  }
}

}  // namespace fl::ptx
