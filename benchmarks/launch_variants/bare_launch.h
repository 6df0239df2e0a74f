// The driver's floor under each of fastlaunch's launches (benchmarks/bench_serving.py): a bare cuLaunchKernelEx of an
// empty kernel whose one parameter is one of the sm_90a kernels' parameter blocks, from a C loop. Compiled with nvcc
// (bare_launch.cu) without torch headers; bench_ext.cpp exposes it as fastlaunch._bench.param_blocks and
// fastlaunch._bench.bare_launch_ns.
#pragma once
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace flbench {

// One parameter block: the kernel that takes it ("gemm" or "conversion"), the most groups a launch on it holds,
// and its size in bytes (sizeof of the struct the kernel takes, kernels/sm90/params.cuh).
struct ParamBlock {
  std::string kernel;
  int max_groups;
  int64_t bytes;
};

// Every block of the sm_90a GEMM and A conversion, smallest first for each kernel.
std::vector<ParamBlock> param_blocks();

// Host ns per launch of the empty kernel taking `param_bytes` bytes (one of param_blocks()' sizes) on `stream`
// (a cudaStream_t as an integer; 0: the legacy default stream) on the current device, one CTA of 128 threads per
// SM: `batches` batches of `iters` launches, timed around each batch with nothing else inside, the stream drained
// between batches. pdl: with the programmatic-stream-serialisation attribute fastlaunch's launches carry (else no
// attribute). Returns (median, p10, p90) over the batches. Throws std::runtime_error on a CUDA error or an unknown
// size.
std::tuple<double, double, double> bare_launch_ns(int64_t param_bytes, int iters, int batches, uintptr_t stream,
                                                  bool pdl);

}  // namespace flbench
