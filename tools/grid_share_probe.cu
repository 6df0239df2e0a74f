// Whether one call can run several GEMM kernels side by side, each on SMs of its own: a stand-in for the
// A conversion (two CTAs per SM, griddepcontrol.wait then launch_dependents, as sm90_convert_a.cuh), then
// P "parts" chained by programmatic dependent launch, each a persistent grid of one CTA per SM (the GEMM's
// shared memory) that spins for a fixed time. The first part waits for the conversion (griddepcontrol.wait)
// and then lets the next part launch; a later part lets the next one launch at its entry and waits at its
// end for the part before it (griddepcontrol.wait), so its end implies every earlier part's and the next
// call's conversion, which waits for the last part, waits for them all. P = 1 is today's call.
//
// Per call (from %globaltimer records): the span from the conversion's first entry to the last part's last
// exit, each part's first entry after part 0's, and how many SMs held CTAs of two parts. Per case, calls
// back to back as the benchmarks issue them: CUDA events around the batch, per call.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -I kernels -o /tmp/fl_grid_share tools/grid_share_probe.cu && /tmp/fl_grid_share
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda_check.h"
#include "ptx/griddep.cuh"
#include "ptx/timer.cuh"

namespace {

constexpr int kPartThreads = 384;        // the GEMM's three warpgroups
constexpr int kPartSmem = 227 * 1024;    // one CTA per SM and nothing beside it (the GEMM: its registers)
constexpr int kConvThreads = 512;
constexpr int kConvSmem = 8 * 1024;     // the conversion stages its stores in shared memory
constexpr int kMaxParts = 4;
constexpr int kCalls = 40;               // calls per batch; records kept for each
constexpr int kMaxSlots = 160;           // CTA records per call (all parts together)

struct Rec {
  unsigned long long entry, exit;
  int sm, part;
};

__device__ __forceinline__ void spin(uint64_t ns) {
  const uint64_t t0 = fl::ptx::globaltimer();
  while (fl::ptx::globaltimer() - t0 < ns) {
  }
}

// The conversion's stand-in: its own spin, the call's first and last moments kept by atomics.
__global__ void __launch_bounds__(kConvThreads) conv_stub(uint64_t ns, unsigned long long* first_last) {
  extern __shared__ __align__(16) uint8_t smem[];
  if (threadIdx.x == 0) smem[0] = 1;
  fl::ptx::griddep_wait();
  fl::ptx::griddep_launch_dependents();
  if (threadIdx.x == 0) atomicMin(&first_last[0], (unsigned long long)fl::ptx::globaltimer());
  spin(ns);
  if (threadIdx.x == 0) atomicMax(&first_last[1], (unsigned long long)fl::ptx::globaltimer());
}

__global__ void __launch_bounds__(kPartThreads, 1) part(int index, int slot0, uint64_t ns, Rec* rec) {
  extern __shared__ __align__(16) uint8_t smem[];
  if (index == 0) fl::ptx::griddep_wait();  // the conversion's writes
  fl::ptx::griddep_launch_dependents();      // the next part may take the SMs left
  const uint64_t t0 = fl::ptx::globaltimer();
  if (threadIdx.x == 0) smem[0] = 1;  // the shared memory is the point: keep it allocated and touched
  spin(ns);
  __syncthreads();
  if (index > 0) fl::ptx::griddep_wait();  // the part before ends first
  if (threadIdx.x == 0) {
    Rec& r = rec[slot0 + blockIdx.x];
    r.entry = t0;
    r.exit = fl::ptx::globaltimer();
    r.sm = (int)fl::ptx::smid();
    r.part = index;
  }
}

cudaError_t launch(const void* fn, int grid, int threads, int smem, void** args, cudaStream_t st, bool pdl) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelExC(&cfg, fn, args);
}

struct Case {
  const char* name;
  int parts;
  int ctas[kMaxParts];
  uint64_t ns[kMaxParts];
};

}  // namespace

int main() {
  int sms = 0, dev = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CHECK(cudaFuncSetAttribute(part, cudaFuncAttributeMaxDynamicSharedMemorySize, kPartSmem));
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, part, kPartThreads, kPartSmem));
  std::printf("%d SMs, %d part CTA(s) per SM\n", sms, per_sm);
  if (per_sm != 1 || sms > kMaxSlots) return 1;

  const uint64_t conv_ns = 2000;
  const int h = sms / 2, t = sms / 3, q = sms / 4;
  std::vector<Case> cases;
  for (uint64_t us : {10ull, 30ull}) {
    const uint64_t ns = us * 1000;
    cases.push_back({"one grid (today)", 1, {sms}, {ns}});
    cases.push_back({"two grids, halves", 2, {h, sms - h}, {ns, ns}});
    cases.push_back({"two grids, 1/4 + 3/4", 2, {q, sms - q}, {ns, ns}});
    cases.push_back({"three grids", 3, {t, t, sms - 2 * t}, {ns, ns, ns}});
    cases.push_back({"four grids", 4, {q, q, q, sms - 3 * q}, {ns, ns, ns, ns}});
    cases.push_back({"two grids, 2nd one CTA", 2, {sms - 1, 1}, {ns, ns}});
  }

  Rec* rec = nullptr;
  unsigned long long* fl_dev = nullptr;
  CHECK(cudaMalloc(&rec, sizeof(Rec) * kMaxSlots * kCalls));
  CHECK(cudaMalloc(&fl_dev, sizeof(unsigned long long) * 2 * kCalls));
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));

  std::printf("\n%-24s %5s %8s %9s %9s %23s %9s %9s\n", "case", "us", "event", "span", "span-work",
              "later parts' starts", "shared SM", "side by");
  std::printf("%-24s %5s %8s %9s %9s %23s %9s %9s\n", "", "", "us/call", "median", "median",
              "after part 0 (median us)", "calls", "side");
  for (const Case& c : cases) {
    std::vector<unsigned long long> init(2 * kCalls);
    for (int i = 0; i < kCalls; ++i) init[2 * i] = ~0ull, init[2 * i + 1] = 0;
    float best = 1e30f;
    for (int round = 0; round < 3; ++round) {
      CHECK(cudaMemcpyAsync(fl_dev, init.data(), init.size() * sizeof(init[0]), cudaMemcpyHostToDevice, st));
      CHECK(cudaMemsetAsync(rec, 0, sizeof(Rec) * kMaxSlots * kCalls, st));
      CHECK(cudaStreamSynchronize(st));
      CHECK(cudaEventRecord(e0, st));
      for (int call = 0; call < kCalls; ++call) {
        unsigned long long* fl_call = fl_dev + 2 * call;
        uint64_t cns = conv_ns;
        void* cargs[] = {&cns, &fl_call};
        CHECK(launch((const void*)conv_stub, 2 * sms, kConvThreads, kConvSmem, cargs, st, call > 0));
        int slot = 0;
        for (int p = 0; p < c.parts; ++p) {
          int index = p, slot0 = slot;
          uint64_t ns = c.ns[p];
          Rec* r = rec + (size_t)call * kMaxSlots;
          void* args[] = {&index, &slot0, &ns, &r};
          CHECK(launch((const void*)part, c.ctas[p], kPartThreads, kPartSmem, args, st, true));
          slot += c.ctas[p];
        }
      }
      CHECK(cudaEventRecord(e1, st));
      CHECK(cudaEventSynchronize(e1));
      CHECK(cudaGetLastError());
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      best = std::min(best, ms * 1000.0f / kCalls);
    }
    // the last round's records
    std::vector<Rec> h_rec((size_t)kMaxSlots * kCalls);
    std::vector<unsigned long long> h_fl(2 * kCalls);
    CHECK(cudaMemcpy(h_rec.data(), rec, h_rec.size() * sizeof(Rec), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h_fl.data(), fl_dev, h_fl.size() * sizeof(h_fl[0]), cudaMemcpyDeviceToHost));
    int total = 0;
    for (int p = 0; p < c.parts; ++p) total += c.ctas[p];
    std::vector<double> spans, starts[kMaxParts];
    int shared_calls = 0, missing = 0, later = 0, overlapped = 0;
    for (int call = 1; call < kCalls; ++call) {  // call 0 has no PDL before it
      const Rec* r = &h_rec[(size_t)call * kMaxSlots];
      unsigned long long last = 0, first[kMaxParts];
      std::fill(first, first + kMaxParts, ~0ull);
      std::vector<int> owner(1024, -1);
      bool shared = false;
      for (int i = 0; i < total; ++i) {
        if (r[i].exit == 0) {
          ++missing;
          continue;
        }
        last = std::max(last, r[i].exit);
        first[r[i].part] = std::min(first[r[i].part], r[i].entry);
        int& o = owner[r[i].sm & 1023];
        if (o >= 0 && o != r[i].part) shared = true;
        o = r[i].part;
      }
      shared_calls += shared;
      unsigned long long first_exit0 = ~0ull;
      for (int i = 0; i < total; ++i)
        if (r[i].exit && r[i].part == 0) first_exit0 = std::min(first_exit0, r[i].exit);
      for (int i = 0; i < total; ++i)
        if (r[i].exit && r[i].part > 0) ++later, overlapped += r[i].entry < first_exit0;
      spans.push_back((double)(last - h_fl[2 * call]) / 1000.0);
      for (int p = 1; p < c.parts; ++p) starts[p].push_back(((double)first[p] - (double)first[0]) / 1000.0);
    }
    auto median = [](std::vector<double> v) {
      if (v.empty()) return 0.0;
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    char st_buf[64] = "-";
    int n = 0;
    for (int p = 1; p < c.parts; ++p) n += std::snprintf(st_buf + n, sizeof(st_buf) - n, "%s%.2f", p > 1 ? " " : "", median(starts[p]));
    const double work = (double)(conv_ns + c.ns[0]) / 1000.0;
    std::printf("%-24s %5llu %8.2f %9.2f %9.2f %23s %5d/%d %9.3f%s\n", c.name, (unsigned long long)(c.ns[0] / 1000),
                best, median(spans), median(spans) - work, st_buf, shared_calls, kCalls - 1,
                later ? (double)overlapped / later : 1.0, missing ? " (records missing!)" : "");
  }
  CHECK(cudaFree(rec));
  CHECK(cudaFree(fl_dev));
  return 0;
}
