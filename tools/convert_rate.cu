// The A conversion's rate against plain traffic of its bytes (v119 in docs/sm90_kernel_notes.md): the
// benchmarks' A (1024, 1024, 512 and 512 rows of the contract's M; K 7168 / 2048 / 4096 / 1536) converted
// into the fp16 workspace by
//   eight      v67's form: eight threads per unit (one row, one 64-wide K step), one 16-byte chunk of the
//              unit's 128 output bytes each (a warp has 128 bytes of A in flight)
//   present    the launcher's (sm90::convert_units): one thread per unit, its 32 bytes in two 16-byte
//              loads, the chunks through shared memory so each store writes four units' 512 bytes
// beside a kernel that only writes the same bytes (16-byte stores, grid-stride) and one that reads as many
// bytes as A's packed ones and writes the output's (the traffic with none of the work). The two forms'
// outputs are compared bit for bit. CUDA events around one kernel, a 512 MB memset (the L2 flush, as the
// benchmarks') before each repetition, median of 30.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -I kernels -o /tmp/convert_rate tools/convert_rate.cu
//   /tmp/convert_rate
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_check.h"
#include "sm90_convert_a.cuh"

namespace {

using fl::sm90::ConvertParams;

__global__ void write_only(uint4* dst, int64_t chunks) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < chunks; i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = make_uint4((uint32_t)i, 1u, 2u, 3u);
}

// Each thread reads one 4-byte word of A and writes the 16 bytes a quarter of a unit's output holds.
__global__ void read_write(const uint32_t* src, uint4* dst, int64_t words) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < words; i += (int64_t)gridDim.x * blockDim.x) {
    const uint32_t w = src[i];
    dst[i] = make_uint4(w, w ^ 1u, w ^ 2u, w ^ 3u);
  }
}

// v67's conversion, kept here as the baseline: eight threads per unit, one chunk each.
constexpr int kEightThreads = 512;
__global__ void __launch_bounds__(kEightThreads) eight_kernel(const __grid_constant__ ConvertParams p) {
  using namespace fl;
  using namespace fl::sm90;
  const int q = threadIdx.x % kChunksPerUnit, s4 = q / 2, b = q % 2;
  const int units_per_block = kEightThreads / kChunksPerUnit;
  int g = 0;
  for (int u = blockIdx.x * units_per_block + threadIdx.x / kChunksPerUnit; u < p.num_units;
       u += gridDim.x * units_per_block) {
    while (u >= p.groups[g].unit_end) ++g;
    const auto& gr = p.groups[g];
    const int local = u - (g ? p.groups[g - 1].unit_end : 0);
    const int steps = gr.k / kBlockK;
    const int row = local / steps, kc = local % steps;
    const uint32_t* src = reinterpret_cast<const uint32_t*>(gr.a + (int64_t)row * (gr.k / 2) + kc * (kBlockK / 2));
    const uint32_t sf = *reinterpret_cast<const uint32_t*>(
        gr.sfa + ((int64_t)(row / 128) * steps + kc) * kSfBlockBytes + sf_row_offset(row));
    uint32_t v[4];
#pragma unroll
    for (int c = 0; c < 4; ++c)
      v[c] = ptx::mul_f16x2(e2m1_pair(src[2 * c + b], s4), ptx::e4m3_to_f16x2_bcast(sf >> (8 * c)));
    uint4* dst = reinterpret_cast<uint4*>(gr.a16 + (int64_t)row * p.a16_pitch + kc * kBlockK);
    dst[q] = make_uint4(v[0], v[1], v[2], v[3]);
  }
}

__global__ void __launch_bounds__(fl::sm90::kConvertThreads) present_kernel(const __grid_constant__ ConvertParams p) {
  fl::sm90::convert_units(p);
}

struct Shape {
  const char* name;
  std::vector<int> m;
  int k;
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
float time_us(F launch, void* flush, size_t flush_bytes) {
  cudaEvent_t s, e;
  CHECK(cudaEventCreate(&s));
  CHECK(cudaEventCreate(&e));
  std::vector<float> t;
  for (int r = 0; r < 31; ++r) {
    CHECK(cudaMemsetAsync(flush, r & 0xFF, flush_bytes));
    CHECK(cudaEventRecord(s));
    launch();
    CHECK(cudaEventRecord(e));
    CHECK(cudaEventSynchronize(e));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, s, e));
    if (r > 0) t.push_back(ms * 1e3f);
  }
  CHECK(cudaGetLastError());
  CHECK(cudaEventDestroy(s));
  CHECK(cudaEventDestroy(e));
  return median(t);
}

}  // namespace

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t flush_bytes = 512u << 20;
  void* flush = nullptr;
  CHECK(cudaMalloc(&flush, flush_bytes));
  const std::vector<Shape> shapes = {{"bench 1", {80, 176, 128, 72, 64, 248, 96, 160}, 7168},
                                     {"bench 2", {40, 76, 168, 72, 164, 148, 196, 160}, 2048},
                                     {"bench 3", {192, 320}, 4096},
                                     {"bench 4", {128, 384}, 1536}};
  std::printf("| shape | A fp16 MB | write only us | read + write us | eight us | present us | same bits |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  std::mt19937 rng(20261201);
  bool all_same = true;
  for (const Shape& sh : shapes) {
    const int g = (int)sh.m.size(), k = sh.k, steps = k / 64;
    int rows = 0;
    for (int m : sh.m) rows += m;
    // packed A and reordered scales per group, one allocation each
    std::vector<uint8_t*> a(g), sfa(g);
    ConvertParams p{};
    p.a16_pitch = k;
    __half* a16 = nullptr;
    const size_t a16_bytes = (size_t)rows * k * 2;
    CHECK(cudaMalloc(&a16, a16_bytes));
    int units = 0, row0 = 0;
    for (int i = 0; i < g; ++i) {
      const int m = sh.m[i];
      std::vector<uint8_t> ha((size_t)m * k / 2), hs((size_t)((m + 127) / 128) * steps * 512);
      for (auto& x : ha) x = (uint8_t)(rng() & 0xBB);
      for (auto& x : hs) x = (rng() & 1) ? 0x38 : 0x40;  // E4M3 1.0 / 2.0
      CHECK(cudaMalloc(&a[i], ha.size()));
      CHECK(cudaMalloc(&sfa[i], hs.size()));
      CHECK(cudaMemcpy(a[i], ha.data(), ha.size(), cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(sfa[i], hs.data(), hs.size(), cudaMemcpyHostToDevice));
      units += m * steps;
      p.groups[i] = {a[i], sfa[i], a16 + (size_t)row0 * k, k, units};
      row0 += m;
    }
    p.num_units = units;
    p.num_ctas = 0;  // no flags to zero
    p.flags = nullptr;
    auto grid = [&](int64_t threads_needed, int threads) {
      return (int)std::min<int64_t>((threads_needed + threads - 1) / threads, (int64_t)(2048 / threads) * sms);
    };
    const int64_t chunks = (int64_t)a16_bytes / 16;
    const float t_write = time_us([&] { write_only<<<grid(chunks, 512), 512>>>(reinterpret_cast<uint4*>(a16), chunks); },
                                  flush, flush_bytes);
    uint32_t* packed = nullptr;  // A's packed bytes in one buffer, for the read + write baseline
    CHECK(cudaMalloc(&packed, (size_t)chunks * 4));
    CHECK(cudaMemset(packed, 0, (size_t)chunks * 4));
    const float t_rw = time_us([&] { read_write<<<grid(chunks, 512), 512>>>(packed, reinterpret_cast<uint4*>(a16), chunks); },
                               flush, flush_bytes);
    CHECK(cudaFree(packed));
    // grids as the launchers size them: v67's at 2048 threads per SM, the present one's by plan.h convert_ctas
    auto run_eight = [&] { eight_kernel<<<grid((int64_t)units * fl::sm90::kChunksPerUnit, kEightThreads), kEightThreads>>>(p); };
    const int present_grid = (int)fl::sm90::convert_ctas(units, sms);
    auto run_present = [&] { present_kernel<<<present_grid, fl::sm90::kConvertThreads>>>(p); };
    std::vector<uint8_t> h1(a16_bytes), h2(a16_bytes);
    auto output_of = [&](auto run, std::vector<uint8_t>& h) {
      CHECK(cudaMemset(a16, 0xFF, a16_bytes));
      run();
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy(h.data(), a16, a16_bytes, cudaMemcpyDeviceToHost));
    };
    output_of(run_eight, h1);
    output_of(run_present, h2);
    const bool same = std::memcmp(h1.data(), h2.data(), a16_bytes) == 0;
    all_same = all_same && same;
    const float t_eight = time_us(run_eight, flush, flush_bytes);
    const float t_present = time_us(run_present, flush, flush_bytes);
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %s |\n", sh.name, a16_bytes / 1e6, t_write, t_rw, t_eight,
                t_present, same ? "yes" : "NO");
    for (int i = 0; i < g; ++i) {
      CHECK(cudaFree(a[i]));
      CHECK(cudaFree(sfa[i]));
    }
    CHECK(cudaFree(a16));
  }
  CHECK(cudaFree(flush));
  return all_same ? 0 : 1;
}
