// What a kernel launch costs on the GPU's side as the parameter block grows, measured the way
// bench_kernels measures a call: CUDA events around the launch, a 512 MB memset (the L2 flush) before
// each repetition, median of 200. One launch, and two in a row with the second a programmatic
// dependent launch (the Hopper call's shape: conversion, then GEMM), for parameter blocks from 64 bytes
// to the sizes of the sm90 kernels' own (Params<16>, <64> and <256>, printed first), with and without
// 200 KB of dynamic shared memory, on 3 and on 132 CTAs. The kernel reads one parameter byte. The
// last columns launch the same one and two kernels as one CUDA graph (captured from a stream, the
// programmatic dependency kept as the graph's edge), to show what submitting them together saves.
// Last, the host's side of the same choice at Params<16>'s size: host us per call (median over batches
// of 20 calls, the GPU drained between batches) of the two launches direct, of the graph's launch alone,
// and of the graph's launch after both kernel nodes' parameters are set again (what a call with new
// pointers would pay).
//
//   nvcc -O2 -std=c++17 -arch=sm_90a -I kernels -o /tmp/launch_latency tools/launch_latency.cu
//   /tmp/launch_latency
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_check.h"
#include "pdl_launch.h"
#include "sm90_params.cuh"

namespace {

template <int N>
struct Block {
  unsigned char bytes[N];
};

template <int N>
__global__ void touch(const __grid_constant__ Block<N> p, int* out) {
  if (threadIdx.x == 0) out[blockIdx.x] = p.bytes[N - 1];
}

void* g_flush;
int* g_out;
constexpr size_t kFlushBytes = size_t(512) << 20;

template <class F>
float median_us(F launch, int reps = 200) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaMemsetAsync(g_flush, 0, kFlushBytes));
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3f);
  }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// touch<N>, then touch<N> again by programmatic dependent launch, on `stream`: the Hopper call's two launches.
template <int N>
struct TwoLaunches {
  const Block<N>& p;
  int grid, threads, smem;
  cudaStream_t stream;
  PdlLaunch pdl;
  TwoLaunches(const Block<N>& p, int grid, int threads, int smem, cudaStream_t stream)
      : p(p), grid(grid), threads(threads), smem(smem), stream(stream), pdl(grid, threads, smem, stream) {}
  void operator()() const {
    touch<N><<<grid, threads, smem, stream>>>(p, g_out);
    CHECK(cudaLaunchKernelEx(&pdl.cfg, touch<N>, p, g_out));
  }
};

// What `launches` issues on `stream`, captured into *graph and instantiated.
template <class F>
cudaGraphExec_t capture(cudaStream_t stream, const F& launches, cudaGraph_t* graph) {
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  launches();
  CHECK(cudaStreamEndCapture(stream, graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, *graph, 0));
  return exec;
}

template <int N>
void row(int smem, int grid) {
  const int threads = 384;
  Block<N> p{};
  p.bytes[N - 1] = 1;
  CHECK(cudaFuncSetAttribute(touch<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const float one = median_us([&] { touch<N><<<grid, threads, smem>>>(p, g_out); });
  const TwoLaunches<N> two_direct(p, grid, threads, smem, 0);
  const float two = median_us([&] { two_direct(); });
  CHECK(cudaGetLastError());
  // The same launches captured into graphs, replayed on the legacy stream the events use.
  cudaStream_t cap;
  CHECK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
  const TwoLaunches<N> two_cap(p, grid, threads, smem, cap);
  cudaGraph_t g1, g2;
  cudaGraphExec_t e1 = capture(cap, [&] { touch<N><<<grid, threads, smem, cap>>>(p, g_out); }, &g1);
  cudaGraphExec_t e2 = capture(cap, two_cap, &g2);
  const float one_g = median_us([&] { CHECK(cudaGraphLaunch(e1, 0)); });
  const float two_g = median_us([&] { CHECK(cudaGraphLaunch(e2, 0)); });
  CHECK(cudaGraphExecDestroy(e1));
  CHECK(cudaGraphExecDestroy(e2));
  CHECK(cudaGraphDestroy(g1));
  CHECK(cudaGraphDestroy(g2));
  CHECK(cudaStreamDestroy(cap));
  std::printf("| %d | %d | %d | %.2f | %.2f | %.2f | %.2f |\n", N, smem / 1024, grid, one, two, one_g, two_g);
}

// Host us per call, median over 100 batches of 20 calls with the GPU drained between batches.
template <class F>
float host_us(F call) {
  std::vector<float> t;
  for (int b = 0; b < 101; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) call();
    const auto t1 = std::chrono::steady_clock::now();
    CHECK(cudaDeviceSynchronize());
    if (b) t.push_back(std::chrono::duration<float, std::micro>(t1 - t0).count() / 20);  // batch 0 warms up
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <int N>
void host_rows() {
  const int threads = 384, grid = 132;
  Block<N> p{};
  p.bytes[N - 1] = 1;
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const TwoLaunches<N> two(p, grid, threads, 0, st);
  cudaGraph_t g;
  cudaGraphExec_t e = capture(st, two, &g);
  cudaGraphNode_t nodes[2];
  size_t count = 2;
  CHECK(cudaGraphGetNodes(g, nodes, &count));
  void* args[2] = {&p, &g_out};
  cudaKernelNodeParams kp{};
  kp.func = reinterpret_cast<void*>(touch<N>);
  kp.gridDim = grid;
  kp.blockDim = threads;
  kp.kernelParams = args;
  const float direct = host_us([&] { two(); });
  const float launch = host_us([&] { CHECK(cudaGraphLaunch(e, st)); });
  const float update = host_us([&] {
    p.bytes[0] ^= 1;  // a new parameter block each call, as new pointers would give
    for (size_t i = 0; i < count; ++i) CHECK(cudaGraphExecKernelNodeSetParams(e, nodes[i], &kp));
    CHECK(cudaGraphLaunch(e, st));
  });
  CHECK(cudaGraphExecDestroy(e));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaStreamDestroy(st));
  std::printf("| %d | %zu | %.2f | %.2f | %.2f |\n", N, count, direct, launch, update);
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  CHECK(cudaMalloc(&g_flush, kFlushBytes));
  CHECK(cudaMalloc(&g_out, 4096));
  std::printf("%s; sm90 kernel parameters: Params<16> %zu bytes, Params<64> %zu, Params<256> %zu\n", prop.name,
              sizeof(fl::sm90::Params<16>), sizeof(fl::sm90::Params<64>), sizeof(fl::sm90::Params<256>));
  std::printf("events around nothing: %.2f us\n\n", median_us([] {}));
  std::printf("| parameter bytes | dynamic shared KB | CTAs | one launch us | two launches (PDL) us | one, as a graph us | two (PDL), as a graph us |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  row<64>(0, 3);
  row<1024>(0, 3);
  row<2048>(0, 3);
  row<sizeof(fl::sm90::Params<16>)>(0, 3);
  row<sizeof(fl::sm90::Params<64>)>(0, 3);
  row<8192>(0, 3);
  row<16384>(0, 3);
  row<sizeof(fl::sm90::Params<256>)>(0, 3);
  row<64>(200 * 1024, 3);
  row<sizeof(fl::sm90::Params<16>)>(200 * 1024, 3);
  row<64>(200 * 1024, 132);
  row<sizeof(fl::sm90::Params<16>)>(200 * 1024, 132);
  row<sizeof(fl::sm90::Params<256>)>(200 * 1024, 132);
  std::printf("\nhost us per call, 132 CTAs each:\n\n");
  std::printf("| parameter bytes | graph nodes | two launches (PDL) | graph launch | both nodes' parameters set, then graph launch |\n");
  std::printf("|---|---|---|---|---|\n");
  host_rows<64>();
  host_rows<sizeof(fl::sm90::Params<16>)>();
  return 0;
}
