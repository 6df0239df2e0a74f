// Whether the GEMM's CTAs can start beside the A conversion's instead of after it. A GEMM CTA holds
// 384 x 168 = 64512 of an SM's 65536 registers and kSmemBytes of shared memory, so today every SM that runs
// a conversion CTA (128 threads, 48 registers) gets its GEMM CTA only once that CTA has left.
//
// Stand-ins, timed the way bench_kernels times a call (a 512 MB memset before each, CUDA events around it):
// a conversion that waits for the previous grid, lets the next launch and spins a fixed time, then by
// programmatic dependent launch 132 GEMM stand-ins of 384 threads with the GEMM's shared memory, which
// record their entry and SM, wait for the conversion (griddepcontrol.wait, as the GEMM's A producer does)
// and spin. Each kernel carries enough floats through its spin that ptxas takes the registers of the form
// it stands for. Forms: today's (96 conversion CTAs of 128 threads at 48 registers, the GEMM at 168);
// d132's (one warp per SM at 16 registers beside the GEMM at 168); x133's (the GEMM at
// 160, the conversion at 32, so one conversion CTA of 128 threads fits in the 4096 registers left); and
// the GEMM at 160 beside today's conversion. Per form: how many GEMM CTAs entered before the conversion's
// last CTA left, when they entered after its first entry, and the event time per call. (d132 ran the first
// two forms with both conversions at 14 registers, a834318's probe.)
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -I kernels -Xptxas -v -o /tmp/fl_coresident tools/coresident_probe.cu
//   /tmp/fl_coresident
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda_check.h"
#include "pdl_launch.h"
#include "ptx/griddep.cuh"
#include "ptx/timer.cuh"
#include "sm90_group_gemm.cuh"

namespace {

constexpr int kGemmThreads = 384;
constexpr int kGemmCtas = 132;
constexpr size_t kFlushBytes = size_t(512) << 20;

struct Rec {
  unsigned long long entry, exit;
  int sm;
};

// The conversion's stand-in: T threads per CTA, shared memory as the conversion's (4 KB per warp), LIVE floats
// per thread carried through its spin so that ptxas takes the registers of the form it stands for.
template <int T, int LIVE>
__device__ __forceinline__ void conv_body(uint64_t ns, const float* src, Rec* rec, float* sink) {
  __shared__ alignas(16) uint4 chunks[T / 32][32][8];
  fl::ptx::griddep_wait();
  fl::ptx::griddep_launch_dependents();
  const unsigned long long t0 = fl::ptx::globaltimer();
  float v[LIVE > 0 ? LIVE : 1];
#pragma unroll
  for (int i = 0; i < LIVE; ++i) v[i] = src[(threadIdx.x + i * 128) % 4096];
  chunks[threadIdx.x / 32][threadIdx.x % 32][0] = make_uint4(threadIdx.x, 0, 0, 0);
  while (fl::ptx::globaltimer() - t0 < ns) {
#pragma unroll
    for (int i = 0; i < LIVE; ++i) v[i] = fmaf(v[i], 0.999f, 1.0f);
  }
  __syncthreads();
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < LIVE; ++i) s += v[i];
  if (chunks[0][0][0].x == 12345u || s == 12345.0f) sink[0] = 1.0f;
  if (threadIdx.x == 0) rec[blockIdx.x] = Rec{t0, fl::ptx::globaltimer(), (int)fl::ptx::smid()};
}

// Today's conversion (128 threads at ~48 registers), d132's one-warp form (16), and x133's (128 at 32).
__global__ void __maxnreg__(48) conv_today(uint64_t ns, const float* src, Rec* rec, float* sink) {
  conv_body<128, 36>(ns, src, rec, sink);
}
__global__ void __maxnreg__(32) conv_one_warp(uint64_t ns, const float* src, Rec* rec, float* sink) {
  conv_body<32, 0>(ns, src, rec, sink);
}
__global__ void __maxnreg__(32) conv_x133(uint64_t ns, const float* src, Rec* rec, float* sink) {
  conv_body<128, 20>(ns, src, rec, sink);
}

// The GEMM's stand-in at REGS registers per thread (168: today's launch; 160: x133's).
template <int REGS>
__global__ void __maxnreg__(REGS) gemm_standin(uint64_t ns, const float* src, Rec* rec, float* sink) {
  constexpr int kLive = REGS - 8;  // floats carried through the spin: ptxas must take all REGS
  const unsigned long long t0 = fl::ptx::globaltimer();
  float v[kLive];
#pragma unroll
  for (int i = 0; i < kLive; ++i) v[i] = src[(threadIdx.x + i * 384) % 4096];
  fl::ptx::griddep_wait();
  const uint64_t w0 = fl::ptx::globaltimer();
  while (fl::ptx::globaltimer() - w0 < ns) {  // every value carried from trip to trip: all live at once
#pragma unroll
    for (int i = 0; i < kLive; ++i) v[i] = fmaf(v[i], 0.999f, 1.0f);
  }
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kLive; ++i) s = fmaf(s, 1.0001f, v[i]);
  if (s == 12345.0f) sink[1] = s;
  if (threadIdx.x == 0) rec[blockIdx.x] = Rec{t0, fl::ptx::globaltimer(), (int)fl::ptx::smid()};
}

struct Result {
  float event_us;
  int before_last_exit;     // GEMM CTAs that entered before the conversion's last CTA left
  float entry_median, entry_max;  // us after the conversion's first entry
  float conv_span;          // the conversion's first entry to its last exit, us
};

using Kernel = void (*)(uint64_t, const float*, Rec*, float*);

Result run(Kernel conv, int conv_ctas, int conv_threads, Kernel gemm, uint64_t conv_ns, uint64_t gemm_ns, void* flush,
           Rec* rc, Rec* rg, const float* src, float* sink, int reps) {
  const PdlLaunch gemm_launch(kGemmCtas, kGemmThreads, fl::sm90::kSmemBytes, 0);
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> ev, med, mx, span;
  std::vector<int> before;
  std::vector<Rec> hc(conv_ctas), hg(kGemmCtas);
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaMemsetAsync(flush, 0, kFlushBytes));
    CHECK(cudaEventRecord(a));
    conv<<<conv_ctas, conv_threads>>>(conv_ns, src, rc, sink);
    CHECK(cudaLaunchKernelEx(&gemm_launch.cfg, gemm, gemm_ns, src, rg, sink));
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    ev.push_back(ms * 1e3f);
    CHECK(cudaMemcpy(hc.data(), rc, conv_ctas * sizeof(Rec), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hg.data(), rg, kGemmCtas * sizeof(Rec), cudaMemcpyDeviceToHost));
    unsigned long long first = ~0ull, last = 0;
    for (const Rec& x : hc) first = std::min(first, x.entry), last = std::max(last, x.exit);
    std::vector<float> e;
    int n = 0;
    for (const Rec& x : hg) {
      e.push_back((float)((long long)(x.entry - first)) * 1e-3f);
      n += x.entry < last;
    }
    std::sort(e.begin(), e.end());
    med.push_back(e[e.size() / 2]);
    mx.push_back(e.back());
    span.push_back((float)(last - first) * 1e-3f);
    before.push_back(n);
  }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  auto median = [](std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  std::sort(before.begin(), before.end());
  return Result{median(ev), before[before.size() / 2], median(med), median(mx), median(span)};
}

int regs(Kernel k) {
  cudaFuncAttributes fa;
  CHECK(cudaFuncGetAttributes(&fa, k));
  return fa.numRegs;
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  struct Form {
    const char* name;
    Kernel conv;
    int ctas, threads;
    Kernel gemm;
  };
  const Form forms[] = {
      {"today", conv_today, 96, 128, gemm_standin<168>},
      {"one warp (d132)", conv_one_warp, prop.multiProcessorCount, 32, gemm_standin<168>},
      {"x133: GEMM at 160, conversion at 32", conv_x133, 96, 128, gemm_standin<160>},
      {"GEMM at 160, today's conversion", conv_today, 96, 128, gemm_standin<160>},
  };
  // every kernel asks for the largest shared-memory carveout, so an SM the conversion reaches first is
  // already configured for the GEMM's shared memory
  for (Kernel k : {conv_today, conv_one_warp, conv_x133, gemm_standin<168>, gemm_standin<160>}) {
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fl::sm90::kSmemBytes));
  }
  void* flush;
  Rec *rc, *rg;
  float *src, *sink;
  CHECK(cudaMalloc(&flush, kFlushBytes));
  CHECK(cudaMalloc(&rc, 1024 * sizeof(Rec)));
  CHECK(cudaMalloc(&rg, kGemmCtas * sizeof(Rec)));
  CHECK(cudaMalloc(&src, 4096 * sizeof(float)));
  CHECK(cudaMalloc(&sink, 16));
  CHECK(cudaMemset(src, 0, 4096 * sizeof(float)));
  std::printf("%s, %d SMs; GEMM stand-ins %d threads and %u bytes of shared memory\n\n", prop.name,
              prop.multiProcessorCount, kGemmThreads, fl::sm90::kSmemBytes);
  std::printf("| form | conversion CTAs x threads, registers | GEMM registers | its spin us | GEMM CTAs entered before "
              "its last CTA left | GEMM entry after its first entry, median / last us | conversion span us | event us "
              "per call |\n|---|---|---|---|---|---|---|---|\n");
  const uint64_t gemm_ns = 3000;
  for (uint64_t conv_ns : {500ull, 1500ull})
    for (const Form& f : forms) {
      const Result r = run(f.conv, f.ctas, f.threads, f.gemm, conv_ns, gemm_ns, flush, rc, rg, src, sink, 30);
      std::printf("| %s | %d x %d, %d | %d | %.1f | %d of %d | %.2f / %.2f | %.2f | %.2f |\n", f.name, f.ctas, f.threads,
                  regs(f.conv), regs(f.gemm), conv_ns * 1e-3, r.before_last_exit, kGemmCtas, r.entry_median,
                  r.entry_max, r.conv_span, r.event_us);
    }
  return 0;
}
