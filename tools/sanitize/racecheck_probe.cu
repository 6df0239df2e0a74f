// The sm_90a GEMM's producer/consumer pattern alone, correct by construction, for compute-sanitizer racecheck:
// one thread of the CTA puts bytes into a ring of shared-memory stages with cp.async.bulk, completing on the
// stage's "full" mbarrier (expect_tx); every thread waits on it, reads the stage byte by byte (ld.shared.u8, as
// the GEMM's consumers read B's scales), then arrives on the stage's "empty" mbarrier; the producer waits on
// "empty" before the next copy into the stage. The mbarriers order every access, so a hazard racecheck reports
// here is one it reports on this pattern whatever the code around it: it does not model the copy engine's writes
// as ordered by the mbarrier's completion. Checks its own result and exits 1 on a wrong byte.
//   nvcc -O3 -std=c++17 -arch=sm_90a -I kernels -o /tmp/racecheck_probe tools/sanitize/racecheck_probe.cu
//   compute-sanitizer --tool racecheck /tmp/racecheck_probe
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"

namespace {

constexpr int kStages = 2, kStageBytes = 512, kThreads = 128, kSteps = 8;

__global__ void ring(const uint8_t* src, uint32_t* out) {
  __shared__ alignas(128) uint8_t stage[kStages][kStageBytes];
  __shared__ alignas(8) uint64_t full[kStages], empty[kStages];
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      fl::ptx::mbar_init(fl::ptx::smem_u32(&full[s]), 1);
      fl::ptx::mbar_init(fl::ptx::smem_u32(&empty[s]), kThreads);
    }
    fl::ptx::fence_mbar_init();
  }
  __syncthreads();
  uint32_t sum = 0;
  for (int k = 0; k < kSteps; ++k) {
    const int s = k % kStages;
    const uint32_t phase = (k / kStages) & 1;
    if (threadIdx.x == 0) {
      if (k >= kStages) fl::ptx::mbar_wait(fl::ptx::smem_u32(&empty[s]), phase ^ 1);  // every reader done
      fl::ptx::mbar_arrive_expect_tx(fl::ptx::smem_u32(&full[s]), kStageBytes);
      fl::ptx::bulk_load(fl::ptx::smem_u32(stage[s]), src + k * kStageBytes, kStageBytes, fl::ptx::smem_u32(&full[s]),
                         fl::ptx::kEvictNormal);
    }
    fl::ptx::mbar_wait(fl::ptx::smem_u32(&full[s]), phase);
    for (int i = threadIdx.x; i < kStageBytes; i += kThreads) {
      uint32_t v;
      asm volatile("ld.shared.u8 %0, [%1];" : "=r"(v) : "r"(fl::ptx::smem_u32(&stage[s][i])));
      sum += v;
    }
    fl::ptx::mbar_arrive(fl::ptx::smem_u32(&empty[s]));
  }
  out[threadIdx.x] = sum;
}

}  // namespace

int main() {
  std::vector<uint8_t> host(kSteps * kStageBytes);
  for (size_t i = 0; i < host.size(); ++i) host[i] = (uint8_t)(i * 7 + 3);
  uint8_t* src = nullptr;
  uint32_t* out = nullptr;
  if (cudaMalloc(&src, host.size()) != cudaSuccess || cudaMalloc(&out, kThreads * 4) != cudaSuccess) {
    std::printf("cudaMalloc failed\n");
    return 1;
  }
  cudaMemcpy(src, host.data(), host.size(), cudaMemcpyHostToDevice);
  ring<<<1, kThreads>>>(src, out);
  std::vector<uint32_t> got(kThreads);
  const cudaError_t rc = cudaMemcpy(got.data(), out, kThreads * 4, cudaMemcpyDeviceToHost);
  if (rc != cudaSuccess) {
    std::printf("kernel failed: %s\n", cudaGetErrorString(rc));
    return 1;
  }
  int wrong = 0;
  for (int t = 0; t < kThreads; ++t) {
    uint32_t expect = 0;
    for (int k = 0; k < kSteps; ++k)
      for (int i = t; i < kStageBytes; i += kThreads) expect += host[k * kStageBytes + i];
    wrong += got[t] != expect;
  }
  std::printf("racecheck probe: %d steps through %d stages, %d of %d threads' sums wrong\n", kSteps, kStages, wrong,
              kThreads);
  return wrong ? 1 : 0;
}
