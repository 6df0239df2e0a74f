// Where a small launch of the skinny kernel (kernels/sm90_skinny.cuh) spends its time: the kernel built
// with its trace points on (FL_SKINNY_MARK: every warp's lane 0 writes %globaltimer, the earliest and the
// latest per mark over the grid), launched the way the launcher launches it (programmatic stream
// serialisation, a cluster where the plan splits K), timed the way bench_kernels times a call: CUDA events
// around the launch, a 512 MB memset (the L2 flush) before each repetition, median of the repetitions. Beside
// each launch, an empty kernel of the same grid, threads, shared memory and attributes (its marks 0, 1, 6).
//
// Columns (us, medians): events; then from the first warp's entry (mark 0, earliest) to the latest warp's
// mark: griddepcontrol.wait returned (1; in the empty kernel mostly the trace's own first constant load), the
// CTA's item and part of K known (7), A's rows in shared memory (2), the earliest warp's first B unit used (3,
// earliest), the latest warp's units done (4), split only: the cluster's sums written (5), the latest warp's
// stores issued (6). events - span is what the launch costs outside the kernel's instructions.
// A second table times a lone thread's first loads after the flush: one after another or all at once, from
// separate allocations or from one.
//
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -diag-suppress 1886 -arch=sm_90a -I kernels \
//     -o /tmp/skinny_latency tools/skinny_latency.cu
//   /tmp/skinny_latency [reps]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_check.h"
#include "ptx/timer.cuh"

constexpr int kMarks = 8;
constexpr int kMaxCtas = 2048;
__device__ unsigned long long g_late[kMaxCtas * kMarks];   // per CTA and mark: the latest warp's time
__device__ unsigned long long g_early[kMaxCtas * kMarks];  // the earliest warp's

#define FL_SKINNY_MARK(i)                                                               \
  do {                                                                                  \
    if ((threadIdx.x & 31) == 0) {                                                      \
      const unsigned long long t_ = fl::ptx::globaltimer();                              \
      atomicMax(&g_late[blockIdx.x * kMarks + (i)], t_);                                \
      atomicMin(&g_early[blockIdx.x * kMarks + (i)], t_);                               \
    }                                                                                   \
  } while (0)

#include "sm90_skinny.cuh"

namespace {

using fl::sm90::SkinnyParams;
using fl::sm90::SkinnyPlan;

__global__ void __launch_bounds__(fl::sm90::kSkinnyThreads) empty_kernel(const __grid_constant__ SkinnyParams p) {
  FL_SKINNY_MARK(0);
  fl::ptx::griddep_wait();
  FL_SKINNY_MARK(1);
  if (p.split < 1) p.groups[0].c[0] = __float2half(0.f);  // never: keeps the parameter block
  FL_SKINNY_MARK(6);
  fl::ptx::griddep_launch_dependents();
}

void* g_flush;
constexpr size_t kFlushBytes = size_t(512) << 20;

struct Case {
  int m, n, k, split;  // one group; split 0: the planner's
};

// The skinny kernel's build `build` (an index into kSkinnyBuilds, as SkinnyPlan::build) with `lanes` lanes per
// B row (SkinnyPlan::lanes).
template <int I = 0>
void* skinny_kernel(int build, int lanes) {
  using namespace fl::sm90;
  if constexpr (I == kNumSkinnyBuilds * kNumSkinnyLanes) {
    return nullptr;
  } else {
    constexpr int b = I / kNumSkinnyLanes, l = I % kNumSkinnyLanes;
    return build == b && lanes == kSkinnyLanes[l] ? reinterpret_cast<void*>(&skinny_gemm<kSkinnyBuilds[b], kSkinnyLanes[l]>)
                                                  : skinny_kernel<I + 1>(build, lanes);
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One row: the launch `kernel` with `p` on `plan`'s grid, `reps` times.
void timed(const char* label, const Case& c, const SkinnyPlan& plan, void* kernel, const SkinnyParams& p, int reps,
           bool pdl = true) {
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fl::sm90::kSkinnySmemMax));
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = plan.split;
  attr[1].val.clusterDim.y = attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = plan.ctas;
  cfg.blockDim = fl::sm90::kSkinnyThreads;
  cfg.dynamicSmemBytes = plan.smem;
  cfg.attrs = pdl ? attr : attr + 1;
  cfg.numAttrs = (pdl ? 1 : 0) + (plan.split > 1 ? 1 : 0);
  void* args[1] = {const_cast<SkinnyParams*>(&p)};
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  void *late_p, *early_p;
  CHECK(cudaGetSymbolAddress(&late_p, g_late));
  CHECK(cudaGetSymbolAddress(&early_p, g_early));
  const size_t bytes = sizeof(unsigned long long) * kMarks * plan.ctas;
  std::vector<unsigned long long> late(kMarks * plan.ctas), early(kMarks * plan.ctas);
  std::vector<double> ev, col[kMarks], span;
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaMemsetAsync(late_p, 0, bytes));
    CHECK(cudaMemsetAsync(early_p, 0xFF, bytes));
    CHECK(cudaMemsetAsync(g_flush, 0, kFlushBytes));
    CHECK(cudaEventRecord(a));
    CHECK(cudaLaunchKernelExC(&cfg, kernel, args));
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaGetLastError());
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    CHECK(cudaMemcpy(late.data(), late_p, bytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(early.data(), early_p, bytes, cudaMemcpyDeviceToHost));
    if (r < 3) continue;  // warm-up
    ev.push_back(ms * 1e3);
    unsigned long long t0 = ~0ull, last[kMarks] = {}, first3 = ~0ull;
    for (int q = 0; q < plan.ctas; ++q) {
      t0 = std::min(t0, early[q * kMarks + 0]);
      first3 = std::min(first3, early[q * kMarks + 3]);
      for (int i = 0; i < kMarks; ++i) last[i] = std::max(last[i], late[q * kMarks + i]);
    }
    for (int i = 1; i < kMarks; ++i) {
      const unsigned long long t = i == 3 ? (first3 == ~0ull ? 0 : first3) : last[i];
      if (t) col[i].push_back((double)(t - t0) * 1e-3);
    }
    span.push_back((double)(last[6] - t0) * 1e-3);
  }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  auto cell = [&](int i) {
    static char buf[8][16];
    const double v = median(col[i]);
    if (v < 0) std::snprintf(buf[i], sizeof buf[i], "-");
    else std::snprintf(buf[i], sizeof buf[i], "%.2f", v);
    return buf[i];
  };
  const double e = median(ev), sp = median(span);
  std::printf("| %s | 1 x %d x %d x %d | %d | %d | %.2f | %.2f | %s | %s | %s | %s | %s | %s | %.2f |\n", label, c.m,
              c.n, c.k, plan.split, plan.ctas, e, sp, cell(1), cell(7), cell(2), cell(3), cell(4), cell(5), e - sp);
}

void fill(void* p, size_t n, uint8_t lo, uint8_t hi, unsigned seed) {
  std::vector<uint8_t> h(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    h[i] = (uint8_t)(lo + (seed >> 24) % (hi - lo + 1));
  }
  CHECK(cudaMemcpy(p, h.data(), n, cudaMemcpyHostToDevice));
}

void run_case(const Case& c, int reps, int sms) {
  const int64_t m = c.m, n = c.n, k = c.k;
  SkinnyPlan plan;
  if (!fl::sm90::skinny_plan(&m, &n, &k, 1, sms, plan, c.split)) {
    std::printf("| no skinny plan for 1 x %d x %d x %d split %d |\n", c.m, c.n, c.k, c.split);
    return;
  }
  if (plan.ctas > kMaxCtas) {
    std::printf("| 1 x %d x %d x %d: %d CTAs, more than the probe's %d |\n", c.m, c.n, c.k, plan.ctas, kMaxCtas);
    return;
  }
  const size_t a_bytes = (size_t)m * k / 2, b_bytes = (size_t)n * k / 2;
  const size_t sfa_bytes = (size_t)((m + 127) / 128) * (k / 64) * 512;
  const size_t sfb_bytes = (size_t)((n + 127) / 128) * (k / 64) * 512;
  uint8_t *a, *b, *sfa, *sfb;
  __half* cc;
  CHECK(cudaMalloc(&a, a_bytes));
  CHECK(cudaMalloc(&b, b_bytes));
  CHECK(cudaMalloc(&sfa, sfa_bytes));
  CHECK(cudaMalloc(&sfb, sfb_bytes));
  CHECK(cudaMalloc(&cc, (size_t)m * n * 2));
  fill(a, a_bytes, 0, 255, 1);
  fill(b, b_bytes, 0, 255, 2);
  fill(sfa, sfa_bytes, 0x30, 0x40, 3);  // E4M3 0.5 .. 2
  fill(sfb, sfb_bytes, 0x30, 0x40, 4);
  SkinnyParams p{};
  p.split = plan.split;
  p.runs = fl::sm90::skinny_item_runs(plan.items, plan.ctas / plan.split);
  p.scales = (int32_t)plan.scales, p.scale_buf = (int32_t)plan.scale_buf;  // < kSkinnySmemMax
  p.sums = (int32_t)plan.sums;
  fl::sm90::SkinnyGroup& g = p.groups[0];
  g.a = a, g.b = b, g.sfa = sfa, g.sfb = sfb, g.c = cc;
  g.m = c.m, g.n = c.n, g.k = c.k;
  g.item_end = (int32_t)plan.items;
  timed("skinny", c, plan, skinny_kernel(plan.build, plan.lanes), p, reps);
  timed("empty", c, plan, reinterpret_cast<void*>(&empty_kernel), p, reps);
  if (c.split == 1 && c.m <= 2) timed("empty, no PDL", c, plan, reinterpret_cast<void*>(&empty_kernel), p, reps, false);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(sfa));
  CHECK(cudaFree(sfb));
  CHECK(cudaFree(cc));
}

// The latency of a kernel's first loads after the flush: one thread loads 16 bytes from each of `n` addresses,
// one after the other (each address depends on the previous value) or all at once, between two reads of
// %globaltimer.
struct Addrs {
  const uint4* p[8];
};

__global__ void first_loads(const __grid_constant__ Addrs a, int n, int parallel, uint32_t zero,
                            unsigned long long* out) {
  if (threadIdx.x != 0) return;
  uint4 v[8];
  uint32_t dep = 0;
  const unsigned long long t0 = fl::ptx::globaltimer();
  if (parallel) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (i < n) v[i] = fl::ptx::ld_nc_v4(reinterpret_cast<const uint8_t*>(a.p[i]));
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (i < n) dep ^= v[i].x;
  } else {
    for (int i = 0; i < n; ++i) {
      const uint4 w = fl::ptx::ld_nc_v4(reinterpret_cast<const uint8_t*>(a.p[i]) + (dep & zero));
      dep ^= w.x;
    }
  }
  out[1] = dep;  // issued once the last value came (its register)
  unsigned long long t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1) : : "memory");  // after that store
  out[0] = t1 - t0;
}

void load_row(const char* label, const Addrs& a, int n, int parallel, bool flush, int reps) {
  unsigned long long* out;
  CHECK(cudaMalloc(&out, 16));
  std::vector<double> t;
  for (int r = 0; r < reps + 3; ++r) {
    if (flush) CHECK(cudaMemsetAsync(g_flush, 0, kFlushBytes));
    first_loads<<<1, 32>>>(a, n, parallel, 0u, out);
    CHECK(cudaGetLastError());
    unsigned long long h[2];
    CHECK(cudaMemcpy(h, out, 16, cudaMemcpyDeviceToHost));
    if (r >= 3) t.push_back((double)h[0] * 1e-3);
  }
  CHECK(cudaFree(out));
  std::printf("| %s | %d | %s | %s | %.2f |\n", label, n, parallel ? "at once" : "one after another",
              flush ? "yes" : "no", median(t));
}

void first_load_table(int reps) {
  std::printf("\n| 16-byte loads of one thread | loads | issued | L2 flushed | us |\n|---|---|---|---|---|\n");
  std::vector<uint8_t*> bufs(8);
  for (auto& b : bufs) {
    CHECK(cudaMalloc(&b, size_t(4) << 20));
    CHECK(cudaMemset(b, 1, size_t(4) << 20));
  }
  Addrs pages{}, lines{};
  for (int i = 0; i < 8; ++i) {
    pages.p[i] = reinterpret_cast<const uint4*>(bufs[i]);                  // 8 allocations of 4 MB
    lines.p[i] = reinterpret_cast<const uint4*>(bufs[0] + (size_t)i * 8192);  // one allocation, 8 KB apart
  }
  for (int n : {1, 2, 4, 8}) {
    load_row("separate allocations", pages, n, 0, true, reps);
    load_row("separate allocations", pages, n, 1, true, reps);
  }
  for (int n : {4, 8}) {
    load_row("one allocation, 8 KB apart", lines, n, 0, true, reps);
    load_row("one allocation, 8 KB apart", lines, n, 1, true, reps);
  }
  load_row("separate allocations", pages, 4, 0, false, reps);
  for (auto b : bufs) CHECK(cudaFree(b));
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 40;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  CHECK(cudaMalloc(&g_flush, kFlushBytes));
  std::printf("%s, %d SMs; skinny kernel trace, medians of %d launches after 3 (us)\n\n", prop.name,
              prop.multiProcessorCount, reps);
  std::printf("| kernel | shape | split | CTAs | events | span | wait | part known | A in smem | first B unit | "
              "units done | sums written | events - span |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  const Case cases[] = {{2, 512, 512, 1},   {1, 512, 512, 1},    {2, 512, 512, 2},    {1, 2048, 7168, 1},
                        {1, 2048, 7168, 0}, {10, 712, 1152, 1},  {10, 712, 1152, 4},  {1, 4096, 7168, 0},
                        {16, 128, 4096, 1}, {16, 128, 4096, 8}};
  for (const Case& c : cases) run_case(c, reps + 3, prop.multiProcessorCount);
  first_load_table(reps);
  return 0;
}
