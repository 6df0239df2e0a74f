// The sm_90a GEMM's stage hand-off alone, for compute-sanitizer racecheck: the kernel's own shared-memory layout,
// barriers and consumer code (kernels/sm90/gemm.cuh, included), on data whose every result is known exactly.
//
// One CTA = the kernel's 3 warpgroups. Warp 0 (B producer) and warp 1 (A producer) wait on a stage's "empty"
// mbarrier with every lane; lane 0 then announces its bytes on the stage's "full" mbarrier (arrive.expect_tx, count
// 2: one arrival per producer) and issues the copies: B's packed 128 x 32-byte tile by TMA (tma_load_2d) and its
// 512-byte scale block by a bulk copy (bulk_load) for warp 0, the fp16 A tile (128 rows of 128 bytes, 128-byte
// swizzle) by TMA for warp 1; then __syncwarp. Warps 2, 3 only hand their registers over (setmaxnreg). The 8
// consumer warps (warpgroups 1, 2) wait on "full", read the stage with lds64 (B) and lds8 (B's scales) in
// dequant_b, issue the step's wgmma on the A stage, and release a stage on "empty". Several units of K steps run
// back to back, the ring position carried over (a unit's first step retires nothing; its end retires its last
// stage), so every stage is reused kStages steps later, by units that start at different stages.
//
// The variant (argv[1]) is the consumers' release; the rest is the same:
//   lane0        the kernel's (k_loop, consumer_step): the previous step's stage after wgmma_wait<1>, __syncwarp,
//                then one arrival by lane 0; "empty" counts kConsumerWarps (8)
//   elected      the narrow build's: the same with the arrival by elect.sync (mbar_arrive_elected)
//   all_lanes    every lane arrives after wgmma_wait<1> (no __syncwarp); "empty" counts 256
//   no_delay     the step's own stage after wgmma_wait<0>, __syncwarp, lane 0 (no wgmma left in flight)
//   proxy_fence  lane0 with fence.proxy.async.shared::cta by every lane before the __syncwarp
//   all          every variant in turn (a plain run; under racecheck run one variant per process)
// Each consumer thread compares every accumulator with the sum of its unit, to 1e-4 (stage k holds B nibbles, B
// scales and A values that depend on k: a stage read before its copy landed, or overwritten before it was read,
// gives another sum). Prints "probe <variant>: ok" or "probe <variant>: WRONG ..."; exits 1 on a wrong sum.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I kernels -o /tmp/probe
//        tools/sanitize/racecheck_probe.cu     (one command line)
//   compute-sanitizer --tool racecheck /tmp/probe lane0
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "sm90/gemm.cuh"

namespace {

using namespace fl::sm90;
namespace ptx = fl::ptx;

enum Release : int { kLane0, kElected, kAllLanes, kNoDelay, kProxyFence, kNumVariants };
const char* const kVariantNames[kNumVariants] = {"lane0", "elected", "all_lanes", "no_delay", "proxy_fence"};

constexpr int kW = kWidths[0];  // the tile width: wgmma N, A rows per stage
constexpr int kUnits = 3;
constexpr int kUnitSteps = 2 * kStages + 3;  // odd and past two turns of the ring: units start at other stages
constexpr int kSteps = kUnits * kUnitSteps;
constexpr int kCtas = 2;
constexpr int kConsumers = kThreads - 128;
constexpr float kTolerance = 1e-4f;  // relative; the sums are exact in fp32, the tolerance leaves the MMA's rounding

struct ProbeParams {
  CUtensorMap map_a, map_b;
  const uint8_t* sfb;        // kSteps scale blocks of kSfBlockBytes
  float expect[kUnits];      // every accumulator's value at the end of unit u
  int* wrong;                // per consumer thread and CTA: accumulators that differ from expect
  float* first_bad;          // per consumer thread and CTA: the first such value
};

// The stage's release where it differs from the kernel's consumer_step: the same wait, dequantisation and wgmma.
template <int R>
__device__ __forceinline__ void probe_step(const Smem& sm, float (&acc)[kW / 2], uint32_t (&f)[4][4],
                                           ConsumerPos& pos, int kc, int r0, int c, int lane) {
  ptx::mbar_wait(sm.full(pos.r.s), pos.r.ph);
  dequant_b<false>(f, sm.b_stage(pos.r.s), r0, c, 0);
  mma_step<kW>(acc, f, sm.a_desc_lo(pos.r.s), kc == 0);
  if constexpr (R == kNoDelay) {
    ptx::wgmma_wait<0>();
    __syncwarp();
    if (lane == 0) ptx::mbar_arrive(sm.empty(pos.r.s));
  } else if (kc > 0) {
    ptx::wgmma_wait<1>();
    if constexpr (R == kAllLanes) {
      ptx::mbar_arrive(sm.empty(pos.prev));
    } else {
      static_assert(R == kProxyFence, "lane0 and elected run the kernel's own k_loop");
      ptx::fence_proxy_async_smem();
      __syncwarp();
      if (lane == 0) ptx::mbar_arrive(sm.empty(pos.prev));
    }
  }
  pos.next();
}

// One unit's K loop and the release of its last stage, as consumer_unit runs them (lane0, elected) or as the
// variant releases.
template <int R>
__device__ __forceinline__ void probe_unit(const Smem& sm, float (&all)[kMaxWidth / 2], ConsumerPos& pos, int r0,
                                           int c, int lane) {
  if constexpr (R == kLane0 || R == kElected) {
    k_loop<kW, R == kElected>(sm, all, pos, kUnitSteps, r0, c, lane);
    __syncwarp();
    if (lane == 0) ptx::mbar_arrive(sm.empty(pos.prev));
  } else {
    float(&acc)[kW / 2] = *reinterpret_cast<float(*)[kW / 2]>(&all[0]);
    uint32_t fa[4][4], fb[4][4];
    for (int kc = 0; kc < kUnitSteps; kc += 2) {
      probe_step<R>(sm, acc, fa, pos, kc, r0, c, lane);
      if (kc + 1 < kUnitSteps) probe_step<R>(sm, acc, fb, pos, kc + 1, r0, c, lane);
    }
    ptx::wgmma_wait<0>();
    if constexpr (R == kAllLanes) {
      ptx::mbar_arrive(sm.empty(pos.prev));
    } else if constexpr (R == kProxyFence) {
      ptx::fence_proxy_async_smem();
      __syncwarp();
      if (lane == 0) ptx::mbar_arrive(sm.empty(pos.prev));
    }
  }
}

template <int R>
__global__ void __launch_bounds__(kThreads, 1) probe_kernel(const __grid_constant__ ProbeParams p) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const int warp = __shfl_sync(0xffffffffu, (int)threadIdx.x / 32, 0);
  const int lane = threadIdx.x % 32;
  const int wg = warp / 4;
  const Smem sm{ptx::smem_u32(smem)};
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbar_init(sm.full(s), 2);  // the A and the B producer, each with its bytes
      ptx::mbar_init(sm.empty(s), R == kAllLanes ? kConsumers : kConsumerWarps);
    }
    ptx::fence_mbar_init();
  }
  __syncthreads();
  if (wg == 0) {
    ptx::setmaxnreg_dec<kProducerRegs>();
    RingPos<kStages> rp;
    if (warp == 0) {  // B producer
      for (int k = 0; k < kSteps; ++k, rp.next()) {
        ptx::mbar_wait(sm.empty(rp.s), rp.ph ^ 1);
        if (lane == 0) {
          const uint32_t st = sm.b_stage(rp.s), full = sm.full(rp.s);
          ptx::mbar_arrive_expect_tx(full, kBStageBytes);
          ptx::tma_load_2d(st, &p.map_b, k * (kBlockK / 2), 0, full, ptx::kEvictFirst);
          ptx::bulk_load(st + kBRawBytes, p.sfb + (size_t)k * kSfBlockBytes, kSfBlockBytes, full, ptx::kEvictLast);
        }
        __syncwarp();
      }
    } else if (warp == 1) {  // A producer
      for (int k = 0; k < kSteps; ++k, rp.next()) {
        ptx::mbar_wait(sm.empty(rp.s), rp.ph ^ 1);
        if (lane == 0) {
          ptx::mbar_arrive_expect_tx(sm.full(rp.s), kW * kA16RowBytes);
          ptx::tma_load_2d(sm.a_stage(rp.s), &p.map_a, k * kA16RowBytes, 0, sm.full(rp.s), ptx::kEvictLast);
        }
        __syncwarp();
      }
    }
  } else {
    ptx::setmaxnreg_inc<kConsumerRegs>();
    const int cw = wg - 1, wq = warp % 4, c = lane % 4;
    const int r0 = 64 * cw + 16 * wq + lane / 4;
    const int t = blockIdx.x * kConsumers + (threadIdx.x - 128);
    ConsumerPos pos;
    int wrong = 0;
    float first_bad = 0.f;
    for (int u = 0; u < kUnits; ++u) {
      float all[kMaxWidth / 2];
      probe_unit<R>(sm, all, pos, r0, c, lane);
#pragma unroll
      for (int i = 0; i < kW / 2; ++i) {
        if (!(fabsf(all[i] - p.expect[u]) <= kTolerance * p.expect[u])) {
          if (!wrong) first_bad = all[i];
          ++wrong;
        }
      }
    }
    p.wrong[t] = wrong;
    p.first_bad[t] = first_bad;
  }
}

// Step k's data: B's bytes (both nibbles one E2M1 code: 1, 2 or 4), B's scale (E4M3 1 or 2) and A's value (fp16 1 or
// 2), all powers of two; each of the three differs between step k and step k +- kStages (the same stage one turn of
// the ring apart), so a stage read stale or overwritten early moves its unit's sum by 1/480 of it or more, far past
// the check's tolerance.
int turn(int k) { return k / kStages; }
uint8_t b_byte(int k) { return (uint8_t)((2 + 2 * ((k + turn(k)) % 3)) * 0x11); }
uint8_t sf_byte(int k) { return turn(k) % 2 ? 0x40 : 0x38; }
uint16_t a_half(int k) { return turn(k) % 2 ? 0x3C00 : 0x4000; }
double e2m1_value(int code) {
  const double v[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return v[code & 7];
}
double a_value(int k) { return turn(k) % 2 ? 1.0 : 2.0; }

typedef CUresult (*EncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

bool encode(EncodeTiled fn, CUtensorMap* map, void* base, uint64_t row_bytes, uint64_t rows, uint32_t box_bytes,
            uint32_t box_rows, CUtensorMapSwizzle swizzle) {
  const cuuint64_t dims[2] = {row_bytes, rows}, strides[1] = {row_bytes};
  const cuuint32_t box[2] = {box_bytes, box_rows}, elem[2] = {1, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, base, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

#define PROBE_TRY(call)                                                                   \
  do {                                                                                    \
    const cudaError_t rc_ = (call);                                                       \
    if (rc_ != cudaSuccess) {                                                             \
      std::printf("probe: %s failed: %s\n", #call, cudaGetErrorString(rc_));              \
      return 2;                                                                           \
    }                                                                                     \
  } while (0)

template <int R>
int run_variant(const ProbeParams& base, int* wrong_d, float* bad_d) {
  const void* k = reinterpret_cast<const void*>(&probe_kernel<R>);
  PROBE_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBytes));
  PROBE_TRY(cudaMemset(wrong_d, 0xFF, kCtas * kConsumers * sizeof(int)));
  probe_kernel<R><<<kCtas, kThreads, kSmemBytes>>>(base);
  PROBE_TRY(cudaGetLastError());
  PROBE_TRY(cudaDeviceSynchronize());
  std::vector<int> wrong(kCtas * kConsumers);
  std::vector<float> bad(kCtas * kConsumers);
  PROBE_TRY(cudaMemcpy(wrong.data(), wrong_d, wrong.size() * sizeof(int), cudaMemcpyDeviceToHost));
  PROBE_TRY(cudaMemcpy(bad.data(), bad_d, bad.size() * sizeof(float), cudaMemcpyDeviceToHost));
  int threads = 0, first = -1;
  for (size_t t = 0; t < wrong.size(); ++t)
    if (wrong[t]) {
      ++threads;
      if (first < 0) first = (int)t;
    }
  if (threads) {
    std::printf("probe %s: WRONG, %d of %d consumer threads; thread %d: %d accumulators differ, first %g\n",
                kVariantNames[R], threads, (int)wrong.size(), first, wrong[first], bad[first]);
    return 1;
  }
  std::printf("probe %s: ok (%d CTAs, %d units of %d K steps through %d stages, every accumulator right)\n",
              kVariantNames[R], kCtas, kUnits, kUnitSteps, kStages);
  return 0;
}

template <int R = 0>
int run_named(int which, const ProbeParams& base, int* wrong_d, float* bad_d) {
  if constexpr (R < kNumVariants) {
    if (which == R) return run_variant<R>(base, wrong_d, bad_d);
    return run_named<R + 1>(which, base, wrong_d, bad_d);
  } else {
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "lane0";
  int which = -1;
  for (int v = 0; v < kNumVariants; ++v)
    if (!std::strcmp(name, kVariantNames[v])) which = v;
  if (which < 0 && std::strcmp(name, "all")) {
    std::printf("usage: %s [lane0|elected|all_lanes|no_delay|proxy_fence|all]\n", argv[0]);
    return 2;
  }
  // B: 128 rows of kSteps x 32 bytes (step k's tile at byte 32 k of each row); scales: kSteps blocks; A: kW rows
  // of kSteps x 64 fp16 values (step k's tile at element 64 k)
  const size_t b_row = (size_t)kSteps * (kBlockK / 2), a_row = (size_t)kSteps * kBlockK;
  std::vector<uint8_t> b(kBlockN * b_row), sf((size_t)kSteps * kSfBlockBytes);
  std::vector<uint16_t> a(kW * a_row);
  for (int k = 0; k < kSteps; ++k) {
    for (int r = 0; r < kBlockN; ++r) std::memset(&b[r * b_row + k * (kBlockK / 2)], b_byte(k), kBlockK / 2);
    std::memset(&sf[(size_t)k * kSfBlockBytes], sf_byte(k), kSfBlockBytes);
    for (int r = 0; r < kW; ++r)
      for (int i = 0; i < kBlockK; ++i) a[r * a_row + k * kBlockK + i] = a_half(k);
  }
  ProbeParams p{};
  // every accumulator: 64 products per step of (E2M1 value * 2^-14 * scale) (the dequantisation's fp16, the
  // epilogue's 2^28 not applied) and A's value
  for (int u = 0; u < kUnits; ++u) {
    double sum = 0;
    for (int k = u * kUnitSteps; k < (u + 1) * kUnitSteps; ++k)
      sum += 64.0 * e2m1_value(b_byte(k) & 0xF) * (sf_byte(k) == 0x40 ? 2.0 : 1.0) * a_value(k);
    p.expect[u] = (float)(sum / 16384.0);
  }
  void *b_d = nullptr, *a_d = nullptr, *sf_d = nullptr;
  int* wrong_d = nullptr;
  float* bad_d = nullptr;
  PROBE_TRY(cudaMalloc(&b_d, b.size()));
  PROBE_TRY(cudaMalloc(&a_d, a.size() * 2));
  PROBE_TRY(cudaMalloc(&sf_d, sf.size()));
  PROBE_TRY(cudaMalloc(&wrong_d, kCtas * kConsumers * sizeof(int)));
  PROBE_TRY(cudaMalloc(&bad_d, kCtas * kConsumers * sizeof(float)));
  PROBE_TRY(cudaMemcpy(b_d, b.data(), b.size(), cudaMemcpyHostToDevice));
  PROBE_TRY(cudaMemcpy(a_d, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  PROBE_TRY(cudaMemcpy(sf_d, sf.data(), sf.size(), cudaMemcpyHostToDevice));
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  PROBE_TRY(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || !fn) {
    std::printf("probe: the driver has no cuTensorMapEncodeTiled\n");
    return 2;
  }
  const EncodeTiled encode_tiled = reinterpret_cast<EncodeTiled>(fn);
  if (!encode(encode_tiled, &p.map_b, b_d, b_row, kBlockN, kBlockK / 2, kBlockN, CU_TENSOR_MAP_SWIZZLE_NONE) ||
      !encode(encode_tiled, &p.map_a, a_d, a_row * 2, kW, kA16RowBytes, kW, CU_TENSOR_MAP_SWIZZLE_128B)) {
    std::printf("probe: cuTensorMapEncodeTiled failed\n");
    return 2;
  }
  p.sfb = static_cast<const uint8_t*>(sf_d);
  p.wrong = wrong_d;
  p.first_bad = bad_d;
  int rc = 0;
  for (int v = 0; v < kNumVariants; ++v)
    if (which < 0 || which == v) {
      const int r = run_named(v, p, wrong_d, bad_d);
      rc = rc > r ? rc : r;
    }
  return rc;
}
