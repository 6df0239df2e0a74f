// How a kernel turns its fp32 sums into C's 16-bit values: times a scale, then rounded to nearest (ties to even) as
// fp16 or bf16. The task form writes fp16 with the scale its accumulators need (a constant); the masked form takes
// the dtype of its `out` and an optional fp32 global scale per expert (NVFP4 checkpoints carry one per tensor),
// read on the device.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace fl {

struct OutForm {
  float scale;  // multiplies every sum before the rounding
  bool bf16;    // round to bf16 (else fp16)
};

// Two sums (x the lower address) as one word of two 16-bit values.
__device__ __forceinline__ uint32_t out_pair(float x, float y, const OutForm& f) {
  x *= f.scale, y *= f.scale;
  if (f.bf16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  const __half2 v = __floats2half2_rn(x, y);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// One sum to one 16-bit element of C (`dst` holds fp16 or bf16 bits, as `f` says).
__device__ __forceinline__ void out_store(__half* dst, float x, const OutForm& f) {
  x *= f.scale;
  if (f.bf16) *reinterpret_cast<__nv_bfloat16*>(dst) = __float2bfloat16_rn(x);
  else *dst = __float2half_rn(x);
}

}  // namespace fl
