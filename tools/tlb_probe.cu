// What a call's first read of an input costs after the L2 flush the benchmarks run before each call, and
// how much of it is the address translation: one thread per CTA reads one line on each of 16 pages of
// 2 MB (a chain: each address depends on the previous load), every CTA its own lines, right after a
// 512 MB cudaMemset (as tools/bench_kernels.py's flush). Before the reads, nothing else ("cold"), or a
// kernel of one thread that touched another line of every page (by a load, `prefetch.global.L2` or
// `cp.async.bulk.prefetch.L2`), so the pages' translations are warm and the lines read are not. The same
// chain again in the same kernel gives an L2 hit's latency. One CTA alone, then 132 CTAs at once.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -I kernels -o /tmp/fl_tlb tools/tlb_probe.cu && /tmp/fl_tlb
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda_check.h"
#include "ptx/memorder.cuh"
#include "ptx/timer.cuh"

namespace {

constexpr int kPages = 16;
constexpr size_t kPage = 2u << 20;
constexpr size_t kFlushBytes = 512u << 20;
constexpr int kReps = 15;

enum Warm { kCold, kLoad, kPrefetch, kBulkPrefetch, kWarms };
const char* kWarmNames[kWarms] = {"cold", "warmed by a load", "warmed by prefetch.global.L2",
                                  "warmed by cp.async.bulk.prefetch.L2"};

// Line 0 of every page (the measured lines are others).
__global__ void warm(const uint8_t* base, int how, uint32_t* sink) {
  uint32_t acc = 0;
  for (int p = 0; p < kPages; ++p) {
    const uint8_t* a = base + p * kPage;
    if (how == kLoad) acc += fl::ptx::ld_cg_u32(a);
    else if (how == kPrefetch) asm volatile("prefetch.global.L2 [%0];" ::"l"(a) : "memory");
    else asm volatile("cp.async.bulk.prefetch.L2.global [%0], 128;" ::"l"(a) : "memory");
  }
  if (how == kLoad) *sink = acc;
}

// times[b * 2 + pass]: ns of the chain of kPages loads, pass 0 (cold lines) and 1 (the same lines again).
__global__ void chain(const uint8_t* base, uint32_t zero, uint64_t* times, uint32_t* sink) {
  if (threadIdx.x != 0) return;
  const size_t off = (size_t)(blockIdx.x + 1) * 4096 + 256;  // CTA b's line on every page
  uint32_t v = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const uint64_t t0 = fl::ptx::globaltimer();
    for (int p = 0; p < kPages; ++p) v = fl::ptx::ld_cg_u32(base + p * kPage + off + (v & zero));
    const uint64_t t1 = fl::ptx::globaltimer() + (v & zero);
    times[blockIdx.x * 2 + pass] = t1 - t0;
  }
  sink[blockIdx.x] = v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  uint8_t *flush, *target;
  uint64_t* times;
  uint32_t* sink;
  CHECK(cudaMalloc(&flush, kFlushBytes));
  CHECK(cudaMalloc(&target, kPages * kPage));
  CHECK(cudaMalloc(&times, 2 * 1024 * sizeof(uint64_t)));
  CHECK(cudaMalloc(&sink, 1024 * sizeof(uint32_t)));
  CHECK(cudaMemset(target, 1, kPages * kPage));
  std::printf("ns per load of a chain of %d loads, one line per 2 MB page, after a %zu MB flush (median of %d)\n",
              kPages, kFlushBytes >> 20, kReps);
  std::printf("| CTAs | pages before the reads | cold line | L2 hit | cold - hit |\n|---|---|---|---|---|\n");
  for (int ctas : {1, 132}) {
    for (int w = 0; w < kWarms; ++w) {
      std::vector<double> cold, hit;
      std::vector<uint64_t> h(2 * ctas);
      for (int r = 0; r < kReps; ++r) {
        CHECK(cudaMemset(flush, r & 0xff, kFlushBytes));
        if (w != kCold) warm<<<1, 1>>>(target, w, sink);
        chain<<<ctas, 32>>>(target, 0u, times, sink);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpy(h.data(), times, h.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
        std::vector<double> c, t;
        for (int b = 0; b < ctas; ++b) {
          c.push_back((double)h[2 * b] / kPages);
          t.push_back((double)h[2 * b + 1] / kPages);
        }
        cold.push_back(median(c));
        hit.push_back(median(t));
      }
      const double mc = median(cold), mh = median(hit);
      std::printf("| %d | %s | %.0f | %.0f | %.0f |\n", ctas, kWarmNames[w], mc, mh, mc - mh);
    }
  }
  return 0;
}
