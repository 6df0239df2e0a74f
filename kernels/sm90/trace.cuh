// Trace points of the sm_90a GEMM (experiments: FASTLAUNCH_SM90_TRACE, tools/tuning/trace_sm90.py).
#pragma once
#include <cstdint>

#include "ptx/timer.cuh"

namespace fl::sm90 {

// CTA b writes event e as (globaltimer ns, clock64) at trace[(b * kTraceEvents + e) * 2]; event
// kTrSm holds the SM id, and in the masked form kTrRowShare and kTrRowWalk the CTA's part of the schedule it made
// and kTrRowA16 the fp16 A bytes it was made for (kernels/sm90/gemm.cuh). No-op when the trace buffer is null.
constexpr int kTraceEvents = 16;
enum TraceEvent {
  kTrEntry, kTrInit, kTrGridWait, kTrMapsReady, kTrFirstTma, kTrFirstFull, kTrFirstMainloop, kTrFirstEpilogue,
  kTrConsumerDone, kTrExit, kTrBShare, kTrBFirstTma, kTrRowShare, kTrRowWalk, kTrRowA16, kTrSm = kTraceEvents - 1
};

__device__ __forceinline__ void trace(uint64_t* tr, int e) {
  if (tr) {
    uint64_t* q = tr + ((uint64_t)blockIdx.x * kTraceEvents + e) * 2;
    q[0] = ptx::globaltimer();
    q[1] = ptx::clock64();
  }
}

}  // namespace fl::sm90
