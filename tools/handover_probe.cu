// What a split tile's hand-over costs between two SMs, alone: the GEMM's way (one CTA writes its fp32
// partial sums to global memory and raises a flag per consumer warp; the other waits for the flags and
// reads them, sm90_share.cuh) against the same bytes moved through distributed shared memory inside a
// thread-block cluster of two (the writer stores them straight into its partner's shared memory, then
// one cluster barrier). Each in two forms: one-way (CTA 2i hands all its sums to CTA 2i + 1, as main's
// split tiles do) and symmetric (each CTA hands one warpgroup's 64 B rows to the other and finishes the
// other's: x123 in docs/sm90_kernel_notes.md). Tiles of W A rows (W / 2 fp32 sums per thread, 8 consumer
// warps); P pairs run at once, one CTA per SM (the GEMM's shared memory), as benchmark 3's 48 pair tiles.
//
// Per pair: from the first CTA's first store (its %globaltimer) to the last thread's last add; per launch:
// CUDA events around the kernel (L2 flushed before each), beside the same kernel with no hand-over.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -I kernels -o /tmp/fl_handover tools/handover_probe.cu && /tmp/fl_handover
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda_check.h"
#include "ptx/cluster.cuh"
#include "ptx/memorder.cuh"
#include "ptx/timer.cuh"
#include "sm90_share.cuh"

namespace {

constexpr int kThreads = 256;            // the GEMM's two consumer warpgroups
constexpr int kWarps = kThreads / 32;
constexpr int kSmem = 200 * 1024;        // one CTA per SM, as the GEMM
constexpr int kReps = 25;

enum Mode { kNone, kGlobal, kGlobalSym, kDsmem, kDsmemSym, kModes };
const char* kNames[kModes] = {"none", "global, one-way", "global, symmetric", "cluster, one-way", "cluster, symmetric"};
__host__ __device__ bool clustered(int m) { return m == kDsmem || m == kDsmemSym; }

__device__ __forceinline__ void st_cluster_v4(uint32_t addr, float a, float b, float c, float d) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}

template <int W>
__global__ void __launch_bounds__(kThreads, 1)
    handover(int mode, float* partials, int32_t* flags, int32_t epoch, float* out, uint64_t* times) {
  extern __shared__ __align__(16) float sm[];
  const int b = blockIdx.x, role = b % 2, w = threadIdx.x / 32, l = threadIdx.x % 32;
  const int wg = w / 4;
  float acc[W / 2];
#pragma unroll
  for (int i = 0; i < W / 2; ++i) acc[i] = (float)(b * 7 + threadIdx.x + i);
  if (clustered(mode)) fl::ptx::cluster_sync();  // both CTAs running (the GEMM: K loops done)
  const uint64_t t0 = fl::ptx::globaltimer();
  // who writes (this thread's sums leave) and who reads (this thread adds its partner's)
  const bool sym = mode == kGlobalSym || mode == kDsmemSym;
  const bool writes = mode != kNone && (sym ? wg != role : role == 0);
  const bool reads = mode != kNone && (sym ? wg == role : role == 1);
  if (mode == kGlobal || mode == kGlobalSym) {
    float* mine = partials + (size_t)b * kWarps * 32 * (W / 2);
    if (writes) {  // the GEMM's own store of a warp's sums (all W rows valid), then its flag
      fl::sm90::write_partial<W>(acc, mine, W, w, l);
      __syncwarp();
      if (l == 0) fl::ptx::st_release_gpu(flags + b * kWarps + w, epoch);
    }
    if (reads) {
      const int other = b ^ 1;
      while (fl::ptx::ld_acquire_gpu(flags + other * kWarps + w) != epoch) {
      }
      __syncwarp();
      const float* src = partials + (size_t)other * kWarps * 32 * (W / 2);
      constexpr int kBatch = W / 16;  // the GEMM's half: loads in flight before their adds
#pragma unroll
      for (int j0 = 0; j0 < W / 8; j0 += kBatch) {
        float4 v[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) v[j] = fl::ptx::ld_cg_v4(src + fl::sm90::partial_index(W, w, l, j0 + j));
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const int e = 4 * (j0 + j);
          acc[e] += v[j].x, acc[e + 1] += v[j].y, acc[e + 2] += v[j].z, acc[e + 3] += v[j].w;
        }
      }
    }
  } else if (mode == kDsmem || mode == kDsmemSym) {
    if (writes) {
      const uint32_t dst = fl::ptx::map_shared_rank(sm, fl::ptx::cluster_ctarank() ^ 1);
#pragma unroll
      for (int j = 0; j < W / 8; ++j)
        st_cluster_v4(dst + 4 * fl::sm90::partial_index(W, w, l, j), acc[4 * j], acc[4 * j + 1], acc[4 * j + 2],
                      acc[4 * j + 3]);
    }
    fl::ptx::cluster_sync();  // the partner's stores into this CTA's shared memory are visible
    if (reads) {
#pragma unroll
      for (int j = 0; j < W / 8; ++j) {
        const float4 v = *reinterpret_cast<const float4*>(sm + fl::sm90::partial_index(W, w, l, j));
        acc[4 * j] += v.x, acc[4 * j + 1] += v.y, acc[4 * j + 2] += v.z, acc[4 * j + 3] += v.w;
      }
    }
  }
  float s = 0;
#pragma unroll
  for (int i = 0; i < W / 2; ++i) s += acc[i];
  out[b * kThreads + threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    times[2 * b] = t0;
    times[2 * b + 1] = fl::ptx::globaltimer();
  }
}

template <int W>
void run(int pairs, float* partials, int32_t* flags, float* out, uint64_t* times, void* flush, size_t flush_bytes,
         int32_t& epoch) {
  CHECK(cudaFuncSetAttribute(handover<W>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int mode = 0; mode < kModes; ++mode) {
    std::vector<float> ev, per;
    std::vector<uint64_t> h(4 * pairs);
    for (int r = 0; r < kReps + 3; ++r) {
      ++epoch;
      CHECK(cudaMemsetAsync(flush, r & 0xff, flush_bytes));
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(2 * pairs);
      cfg.blockDim = dim3(kThreads);
      cfg.dynamicSmemBytes = kSmem;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = 2, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
      cfg.attrs = attr;
      cfg.numAttrs = clustered(mode) ? 1 : 0;
      CHECK(cudaEventRecord(e0));
      CHECK(cudaLaunchKernelEx(&cfg, handover<W>, mode, partials, flags, epoch, out, times));
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      if (r < 3) continue;
      float ms;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      ev.push_back(ms * 1e3f);
      CHECK(cudaMemcpy(h.data(), times, h.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
      for (int p = 0; p < pairs; ++p) {
        const uint64_t s = std::min(h[4 * p], h[4 * p + 2]), e = std::max(h[4 * p + 1], h[4 * p + 3]);
        per.push_back((float)(e - s) * 1e-3f);
      }
    }
    std::sort(ev.begin(), ev.end());
    std::sort(per.begin(), per.end());
    std::printf("| %d | %d | %s | %.2f | %.2f | %.2f |\n", W, pairs, kNames[mode], per[per.size() / 2],
                per[per.size() * 9 / 10], ev[ev.size() / 2]);
  }
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  CHECK(cudaGetLastError());
}

}  // namespace

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int max_pairs = sms / 2;
  float *partials, *out;
  int32_t* flags;
  uint64_t* times;
  void* flush;
  const size_t flush_bytes = size_t{512} << 20;
  CHECK(cudaMalloc(&partials, (size_t)2 * max_pairs * kThreads * 96 * sizeof(float)));
  CHECK(cudaMalloc(&flags, (size_t)2 * max_pairs * kWarps * sizeof(int32_t)));
  CHECK(cudaMemset(flags, 0, (size_t)2 * max_pairs * kWarps * sizeof(int32_t)));
  CHECK(cudaMalloc(&out, (size_t)2 * max_pairs * kThreads * sizeof(float)));
  CHECK(cudaMalloc(&times, (size_t)4 * max_pairs * sizeof(uint64_t)));
  CHECK(cudaMalloc(&flush, flush_bytes));
  int32_t epoch = 0;
  std::printf("%d SMs; per pair: first store to last add (median, p90 over pairs and %d launches); launch: "
              "CUDA events, L2 flushed before each\n\n",
              sms, kReps);
  std::printf("| W | pairs | hand-over | per pair us | p90 | launch us |\n|---|---|---|---|---|---|\n");
  for (int pairs : {48, max_pairs}) {
    run<128>(pairs, partials, flags, out, times, flush, flush_bytes, epoch);
    run<192>(pairs, partials, flags, out, times, flush, flush_bytes, epoch);
  }
  return 0;
}
