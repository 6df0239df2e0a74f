// Probe: how fast one CTA per SM streams a decode step's B (packed E2M1 rows with their 512-byte scale blocks) into
// a ring of shared-memory stages by TMA, by the shape of the B box: its bytes per row (one K step of 64 values is 32
// bytes a row), the stages in the ring, and optionally L2 prefetches of the steps past the ring. No arithmetic: a
// consumer warp releases each stage as soon as it lands, so the time is the loads' alone. The GEMM's masked decode
// (8 experts x N 2048 x K 7168, 128 tiles of 128 B rows, one per CTA) moves 4.6 KB a K step per CTA in 128 x
// 32-byte boxes through six stages and ran ~290 ns a step; this asks whether the box's row count or the bytes in
// flight sets that. The first variant adds the narrow build's A box (32 rows x 128 bytes a step, from L2) to be the
// decode step's loads; the others stream B alone.
//
// nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I kernels -o /tmp/tma_stream tools/tuning/tma_stream.cu
// /tmp/tma_stream [rows K]    (default 16384 rows of K 7168: 8 experts x 2048; prints one line per variant)
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"

namespace {

constexpr int kTileRows = 128;       // B rows per CTA tile, as the GEMM's
constexpr int kStepBytes = 32;       // one K step (64 values) of one row
constexpr int kScaleStepBytes = 512; // one K step's scale block of 128 rows
constexpr int kMaxStages = 16;

struct Args {
  CUtensorMap map;       // B: rows x row_bytes, box kTileRows x box_bytes
  const uint8_t* sfb;    // scale blocks: tile t's K steps at sfb + (t * ksteps + kc) * 512
  int tiles, ksteps;     // tiles of kTileRows rows, K steps of a row
  int box_steps;         // K steps per box (box bytes / 32)
  int stages;            // ring stages, each one box and its scale blocks
  int ahead;             // steps past the ring requested into L2 (0: none)
  int scales;            // load the scale blocks too
  CUtensorMap map_a;     // fp16 A as the decode step reads it: 32 rows x 128 bytes a step (kARows), L2-resident
  int a_rows;            // 0, or kARows: each step also loads tile t's expert's A box, as the narrow build does
  int tiles_per_a;       // tiles sharing one expert's A rows
};
constexpr int kARows = 32;
constexpr int kARowBytes = 128;  // one K step of fp16 A

__global__ void __launch_bounds__(64, 1) stream(const __grid_constant__ Args a) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t base = fl::ptx::smem_u32(smem);
  const uint32_t stage_bytes = kTileRows * a.box_steps * kStepBytes + (a.scales ? a.box_steps * kScaleStepBytes : 0) +
                               a.a_rows * a.box_steps * kARowBytes;
  const uint32_t bars = base + a.stages * ((stage_bytes + 1023) / 1024 * 1024);
  const auto full = [&](int s) { return bars + 8u * s; };
  const auto empty = [&](int s) { return bars + 8u * (kMaxStages + s); };
  if (threadIdx.x == 0) {
    for (int s = 0; s < a.stages; ++s) fl::ptx::mbar_init(full(s), 1), fl::ptx::mbar_init(empty(s), 1);
    fl::ptx::fence_mbar_init();
  }
  __syncthreads();
  const int t = blockIdx.x;
  if (t >= a.tiles) return;
  const int boxes = a.ksteps / a.box_steps;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {  // producer
    const int ahead0 = a.stages;
    if (lane < a.ahead && ahead0 + lane < boxes) {
      fl::ptx::tma_prefetch_2d(&a.map, (ahead0 + lane) * a.box_steps * kStepBytes, t * kTileRows);
      if (a.scales)
        fl::ptx::bulk_prefetch_l2(a.sfb + ((int64_t)t * a.ksteps + (ahead0 + lane) * a.box_steps) * kScaleStepBytes,
                                  a.box_steps * kScaleStepBytes);
    }
    int s = 0;
    uint32_t ph = 0;
    for (int b = 0; b < boxes; ++b) {
      fl::ptx::mbar_wait(empty(s), ph ^ 1);
      if (lane == 0) {
        const uint32_t dst = base + s * ((stage_bytes + 1023) / 1024 * 1024);
        fl::ptx::mbar_arrive_expect_tx(full(s), stage_bytes);
        fl::ptx::tma_load_2d(dst, &a.map, b * a.box_steps * kStepBytes, t * kTileRows, full(s), fl::ptx::kEvictFirst);
        if (a.scales)
          fl::ptx::bulk_load(dst + kTileRows * a.box_steps * kStepBytes,
                             a.sfb + ((int64_t)t * a.ksteps + b * a.box_steps) * kScaleStepBytes,
                             a.box_steps * kScaleStepBytes, full(s), fl::ptx::kEvictLast);
        for (int q = 0; a.a_rows && q < a.box_steps; ++q)  // A: one box a K step, as the GEMM's A producer
          fl::ptx::tma_load_2d(dst + kTileRows * a.box_steps * kStepBytes + a.box_steps * kScaleStepBytes +
                                   q * kARows * kARowBytes,
                               &a.map_a, (b * a.box_steps + q) * kARowBytes, t / a.tiles_per_a * kARows, full(s),
                               fl::ptx::kEvictLast);
        const int next = b + a.stages + a.ahead;
        if (a.ahead > 0 && next < boxes) {
          fl::ptx::tma_prefetch_2d(&a.map, next * a.box_steps * kStepBytes, t * kTileRows);
          if (a.scales)
            fl::ptx::bulk_prefetch_l2(a.sfb + ((int64_t)t * a.ksteps + next * a.box_steps) * kScaleStepBytes,
                                      a.box_steps * kScaleStepBytes);
        }
      }
      __syncwarp();
      if (++s == a.stages) s = 0, ph ^= 1;
    }
  } else {  // consumer: release each stage once it has landed
    int s = 0;
    uint32_t ph = 0;
    for (int b = 0; b < boxes; ++b) {
      fl::ptx::mbar_wait(full(s), ph);
      __syncwarp();
      if (lane == 0) fl::ptx::mbar_arrive(empty(s));
      if (++s == a.stages) s = 0, ph ^= 1;
    }
  }
}

#define CK(x)                                                                    \
  do {                                                                           \
    cudaError_t e_ = (x);                                                        \
    if (e_ != cudaSuccess) {                                                     \
      std::printf("CUDA error %s at line %d\n", cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

}  // namespace

int main(int argc, char** argv) {
  const int64_t rows = argc > 2 ? std::atoll(argv[1]) : 16384, k = argc > 2 ? std::atoll(argv[2]) : 7168;
  const int64_t row_bytes = k / 2, ksteps = k / 64, tiles = rows / kTileRows;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  const auto encode = reinterpret_cast<EncodeFn>(fn);
  uint8_t *b, *sfb, *flush;
  const size_t b_bytes = rows * row_bytes, sf_bytes = tiles * ksteps * kScaleStepBytes, flush_bytes = 256u << 20;
  CK(cudaMalloc(&b, b_bytes));
  CK(cudaMalloc(&sfb, sf_bytes));
  CK(cudaMalloc(&flush, flush_bytes));
  CK(cudaMemset(b, 0x35, b_bytes));
  CK(cudaMemset(sfb, 0x38, sf_bytes));
  CK(cudaFuncSetAttribute(stream, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::printf("%lld rows x K %lld (%.1f MB of B, %.1f MB of scales), %lld tiles of %d rows on %d SMs; L2 flushed "
              "before each run, median of 9\n",
              (long long)rows, (long long)k, b_bytes / 1e6, sf_bytes / 1e6, (long long)tiles, kTileRows, sms);
  std::printf("| B box | stages | KB in flight per SM | ahead | promotion | scales | A box | us | B TB/s | "
              "ns per K step |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  // the A the decode step reads beside B: 32 rows per 16 tiles (an expert of N 2048), fp16, L2-resident (the
  // GEMM's A box is 128-byte swizzled; here unswizzled, so that it may follow B in the stage: the same requests)
  const int64_t a_groups = (tiles + 15) / 16, a_bytes = a_groups * kARows * k * 2;
  uint8_t* a16;
  CK(cudaMalloc(&a16, a_bytes));
  CK(cudaMemset(a16, 0x3c, a_bytes));
  CUtensorMap map_a;
  {
    const cuuint64_t dims[2] = {(cuuint64_t)(k * 2), (cuuint64_t)(a_groups * kARows)};
    const cuuint64_t strides[1] = {(cuuint64_t)(k * 2)};
    const cuuint32_t box[2] = {kARowBytes, kARows};
    const cuuint32_t elem[2] = {1, 1};
    if (encode(&map_a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, a16, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) !=
        CUDA_SUCCESS) {
      std::printf("encode failed for A\n");
      return 1;
    }
  }
  struct V { int box_steps, stages, ahead, promo, scales, a; };
  // the first row is the GEMM's decode step (A and B, 32-byte B rows, six stages); then B alone
  const V vs[] = {{1, 6, 0, 128, 1, 1},  {2, 6, 0, 128, 1, 1},  {4, 6, 0, 128, 1, 1},  {1, 6, 0, 128, 1, 0},
                  {1, 12, 0, 128, 1, 0}, {1, 16, 0, 128, 1, 0}, {1, 6, 8, 128, 1, 0},  {1, 6, 0, 0, 1, 0},
                  {1, 6, 0, 256, 1, 0},  {1, 6, 0, 128, 0, 0},  {2, 3, 0, 128, 1, 0},  {2, 6, 0, 128, 1, 0},
                  {2, 8, 0, 128, 1, 0},  {4, 2, 0, 128, 1, 0},  {4, 3, 0, 128, 1, 0},  {4, 6, 0, 128, 1, 0},
                  {4, 8, 0, 128, 1, 0},  {4, 6, 0, 0, 1, 0}};
  for (const V& v : vs) {
    Args a{};
    const cuuint64_t dims[2] = {(cuuint64_t)row_bytes, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)row_bytes};
    const cuuint32_t box[2] = {(cuuint32_t)(v.box_steps * kStepBytes), kTileRows};
    const cuuint32_t elem[2] = {1, 1};
    const CUtensorMapL2promotion promo = v.promo == 0     ? CU_TENSOR_MAP_L2_PROMOTION_NONE
                                         : v.promo == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                                                          : CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
    if (encode(&a.map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, b, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_NONE, promo, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
      std::printf("encode failed for box %d bytes\n", v.box_steps * kStepBytes);
      return 1;
    }
    a.sfb = sfb, a.tiles = (int)tiles, a.ksteps = (int)ksteps, a.box_steps = v.box_steps, a.stages = v.stages;
    a.ahead = v.ahead, a.scales = v.scales, a.map_a = map_a, a.a_rows = v.a ? kARows : 0, a.tiles_per_a = 16;
    const uint32_t stage_bytes = kTileRows * v.box_steps * kStepBytes + (v.scales ? v.box_steps * kScaleStepBytes : 0) +
                                 a.a_rows * v.box_steps * kARowBytes;
    const size_t smem = (size_t)v.stages * ((stage_bytes + 1023) / 1024 * 1024) + 16 * kMaxStages;
    std::vector<float> t;
    for (int r = 0; r < 10; ++r) {
      CK(cudaMemset(flush, r, flush_bytes));
      CK(cudaEventRecord(e0));
      stream<<<sms, 64, smem>>>(a);
      CK(cudaGetLastError());
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (r > 0) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    const float us = t[t.size() / 2];
    const double bytes = (double)b_bytes + (v.scales ? (double)sf_bytes : 0);
    std::printf("| %d x %d B | %d | %.1f | %d | %d | %s | %s | %.1f | %.2f | %.0f |\n", kTileRows,
                v.box_steps * kStepBytes, v.stages, v.stages * stage_bytes / 1024.0, v.ahead, v.promo,
                v.scales ? "yes" : "no", v.a ? "32 x 128 B a step" : "-", us, bytes / us / 1e6, us * 1000 / ksteps);
  }
  return 0;
}
