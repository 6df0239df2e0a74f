// The sm_100a self-check's device side (kernels/sm100/self_check_run.h: allocation, inputs, launches, the bounded
// wait, the outputs back, the comparison and every failure message) and the bounded barrier wait
// (kernels/ptx/mbarrier.cuh mbar_wait_bounded), run on any GPU of compute capability 9.0 or later with stand-in
// kernels where the sm_100a kernel would run; for tests/gpu/test_sm100_self_check_host.py. One scenario per process
// (a trap or a hang leaves the context unusable):
//   pass       a plain CUDA-core GEMM from the contract's bytes, written here: the check passes
//   wrong      the same, with launch 2's C[3, 17] of group 1 written as 2.5
//   unwritten  the same, leaving launch 3's C[127, 63] of group 7 as it was
//   guard      the same, writing launch 4's group 8 one element past its C
//   refuse     launch 2 is refused (cudaErrorInvalidValue, as a driver refusing a launch returns)
//   trap       launch 1 waits on an mbarrier that never completes, with mbar_wait_bounded (2^27 cycles): a trap
//   hang       launch 1 waits on it with the unbounded mbar_wait; the host gives up after 2 s
// Prints "status RC", then the message (or the note), then "ms ELAPSED".
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "ptx/mbarrier.cuh"
#include "sm100/self_check_run.h"

namespace {

__device__ float e2m1_value(unsigned nibble) {
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (nibble & 8) ? -mag[nibble & 7] : mag[nibble & 7];
}

__device__ float e4m3_value(uint8_t byte) {
  const int e = (byte >> 3) & 15, m = byte & 7;
  const float v = e == 0 ? ldexpf(m / 8.0f, -6) : ldexpf(1.0f + m / 8.0f, e - 7);
  return (byte & 0x80) ? -v : v;
}

// One thread per C element: sum over K of (e2m1 x scale) products in fp32. `skip`: an element left unwritten
// (-1: none); `set`: an element written as `value` (-1: none); `extra`: elements written past the end of C.
__global__ void plain_gemm(const uint8_t* a, const uint8_t* b, const uint8_t* sfa, const uint8_t* sfb, __half* c,
                           int m, int n, int k, int64_t skip, int64_t set, float value, int extra) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= (int64_t)m * n + extra) return;
  if (e >= (int64_t)m * n) {
    c[e] = __float2half_rn(1.0f);
    return;
  }
  if (e == skip) return;
  const int i = (int)(e / n), j = (int)(e % n);
  float sum = 0;
  for (int kk = 0; kk < k; ++kk) {
    const int blk = kk / 16;
    const auto scale = [&](const uint8_t* sf, int row) {
      const int at = (((row / 128) * (k / 64) + blk / 4) * 32 + row % 32) * 16 + ((row % 128) / 32) * 4 + blk % 4;
      return e4m3_value(sf[at]);
    };
    const uint8_t ba = a[(int64_t)i * (k / 2) + kk / 2], bb = b[(int64_t)j * (k / 2) + kk / 2];
    const float x = e2m1_value((kk & 1) ? ba >> 4 : ba & 15) * scale(sfa, i);
    const float y = e2m1_value((kk & 1) ? bb >> 4 : bb & 15) * scale(sfb, j);
    sum += x * y;
  }
  c[e] = __float2half_rn(e == set ? value : sum);
}

// A barrier whose phase 0 never completes (it expects one arrival and gets none).
__global__ void stuck(uint64_t limit, int bounded) {
  __shared__ __align__(8) uint64_t bar;
  const uint32_t b = fl::ptx::smem_u32(&bar);
  if (threadIdx.x == 0) {
    fl::ptx::mbar_init(b, 1);
    fl::ptx::fence_mbar_init();
  }
  __syncthreads();
  if (bounded) fl::ptx::mbar_wait_bounded(b, 0, limit);
  else fl::ptx::mbar_wait(b, 0);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "pass";
  if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    std::printf("status -1\nno CUDA device\nms 0\n");
    return 1;
  }
  const auto launch = [&](int i, const int64_t* buf, int G, cudaStream_t stream, fl::Error& err) -> int {
    if (scenario == "refuse" && i == 1)
      return err.cuda(cudaErrorInvalidValue, "plain_gemm<<<...>>>", __FILE__, __LINE__);
    if ((scenario == "trap" || scenario == "hang") && i == 0) {
      stuck<<<1, 32, 0, stream>>>(uint64_t{1} << 27, scenario == "trap");
      if (cudaError_t rc = cudaGetLastError()) return err.cuda(rc, "stuck<<<1, 32>>>", __FILE__, __LINE__);
    }
    for (int g = 0; g < G; ++g) {
      const int m = (int)buf[5 * G + g], n = (int)buf[6 * G + g], k = (int)buf[7 * G + g];
      const bool wrong = scenario == "wrong" && i == 1 && g == 1;
      const bool unwritten = scenario == "unwritten" && i == 2 && g == 7;
      const int extra = scenario == "guard" && i == 3 && g == 8 ? 1 : 0;
      const int64_t elements = (int64_t)m * n + extra;
      plain_gemm<<<(unsigned)((elements + 255) / 256), 256, 0, stream>>>(
          reinterpret_cast<const uint8_t*>(buf[0 * G + g]), reinterpret_cast<const uint8_t*>(buf[1 * G + g]),
          reinterpret_cast<const uint8_t*>(buf[3 * G + g]), reinterpret_cast<const uint8_t*>(buf[4 * G + g]),
          reinterpret_cast<__half*>(buf[2 * G + g]), m, n, k, unwritten ? 127 * 64 + 63 : -1,
          wrong ? 3 * n + 17 : -1, 2.5f, extra);
      if (cudaError_t rc = cudaGetLastError()) return err.cuda(rc, "plain_gemm<<<...>>>", __FILE__, __LINE__);
    }
    return FL_OK;
  };
  char msg[1024] = "", note[512] = "";
  fl::Error err{msg, sizeof(msg)};
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = fl::sm100::check::run(0, scenario == "hang" ? 2.0 : 10.0, launch, note, sizeof(note), err);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("status %d\n%s\nms %.0f\n", rc, rc == FL_OK ? note : msg, ms);
  std::fflush(stdout);
  // After a hang the stand-in still spins: leave without the runtime's teardown, which would wait for it; the
  // driver ends the process's work when it exits.
  if (scenario == "hang") _exit(0);
  return 0;
}
