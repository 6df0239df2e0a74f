// Compile-only probe (tools/probe_mixed_wgmma.sh): can one sm_90a kernel hold wgmma main loops of
// several N (tile widths), chosen per tile at run time, without ptxas serialising the wgmma?
// SHARED_ACC=0: each width has its own accumulator array, copied into one array for the stores;
// SHARED_ACC=1: narrower widths use a prefix of the widest one's; SHARED_ACC=2: two widths (128,
// 192), each branch storing its own accumulator array. The loops mimic the GEMM's consumer (RS
// wgmma, two fragment sets, one group of k16 steps in flight).
#include <cstdint>

#include "ptx/setmaxnreg.cuh"
#include "ptx/wgmma.cuh"

using namespace fl;

template <int W>
__device__ __forceinline__ void k_loop(float (&acc)[W / 2], const uint32_t* frag, uint32_t smem, int steps) {
  uint32_t fa[4][4], fb[4][4];
  for (int kc = 0; kc < steps; kc += 2) {
#pragma unroll
    for (int s = 0; s < 4; ++s)
      for (int r = 0; r < 4; ++r) fa[s][r] = frag[kc * 16 + s * 4 + r];
    ptx::wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s)
      ptx::WgmmaRS<W>::mma(acc, fa[s][0], fa[s][1], fa[s][2], fa[s][3],
                           ptx::smem_desc_swizzle128(smem + 32 * s, 1024), !(kc == 0 && s == 0));
    ptx::wgmma_commit();
    if (kc > 0) ptx::wgmma_wait<1>();
#pragma unroll
    for (int s = 0; s < 4; ++s)
      for (int r = 0; r < 4; ++r) fb[s][r] = frag[kc * 16 + 64 + s * 4 + r];
    ptx::wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s)
      ptx::WgmmaRS<W>::mma(acc, fb[s][0], fb[s][1], fb[s][2], fb[s][3],
                           ptx::smem_desc_swizzle128(smem + 32 * s, 1024), 1);
    ptx::wgmma_commit();
    ptx::wgmma_wait<1>();
  }
  ptx::wgmma_wait<0>();
}

template <int W, int WMAX>
__device__ __forceinline__ void run(float (&all)[WMAX / 2], const uint32_t* frag, uint32_t smem, int steps) {
#if SHARED_ACC
  k_loop<W>(*reinterpret_cast<float(*)[W / 2]>(&all[0]), frag, smem, steps);
#else
  float acc[W / 2];
  k_loop<W>(acc, frag, smem, steps);
#pragma unroll
  for (int i = 0; i < W / 2; ++i) all[i] = acc[i];
#endif
}

__global__ void __launch_bounds__(384, 1) probe(const int* widths, int tiles, const uint32_t* frag, float* out,
                                                int steps) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  if (threadIdx.x < 128) {  // the producer warpgroup of the real kernel hands over its registers
    ptx::setmaxnreg_dec<40>();
    return;
  }
  ptx::setmaxnreg_inc<232>();
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
#if SHARED_ACC == 2
    if (widths[t] <= 128) {
      float acc[64];
      k_loop<128>(acc, frag, s, steps);
#pragma unroll
      for (int i = 0; i < 64; ++i) out[(t * 384 + threadIdx.x) * 96 + i] = acc[i];
    } else {
      float acc[96];
      k_loop<192>(acc, frag, s, steps);
#pragma unroll
      for (int i = 0; i < 96; ++i) out[(t * 384 + threadIdx.x) * 96 + i] = acc[i];
    }
    continue;
#endif
    float all[96];
    const int w = widths[t];
    if (w <= 64) {
      run<64, 192>(all, frag, s, steps);
    } else if (w <= 96) {
      run<96, 192>(all, frag, s, steps);
    } else if (w <= 128) {
      run<128, 192>(all, frag, s, steps);
    } else if (w <= 160) {
      run<160, 192>(all, frag, s, steps);
    } else {
      run<192, 192>(all, frag, s, steps);
    }
#pragma unroll
    for (int i = 0; i < 96; ++i) out[(t * 384 + threadIdx.x) * 96 + i] = all[i];
  }
}
