// Empty kernels taking the sm_90a kernels' own parameter blocks by value (kernels/sm90/params.cuh), launched by a bare
// cuLaunchKernelEx from a C loop: what the driver alone costs the host for a launch of those parameter bytes
// (bare_launch.h). The parameter types are the real ones, so the bytes follow any change to them.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>

#include "bare_launch.h"
#include "sm90/params.cuh"

namespace {

namespace sm90 = fl::sm90;

// Reads nothing: the launch copies the whole block whether or not the kernel uses it (the driver sizes the copy by
// the kernel's declared parameters, checked below with cuFuncGetParamInfo).
template <class P>
__global__ void empty_kernel(const __grid_constant__ P) {}

struct Entry {
  const char* kernel;
  int max_groups;
  size_t bytes;
  const void* sym;
  const void* params;  // a zeroed block of `bytes` bytes (static storage)
};

template <class P>
Entry entry(const char* kernel, int max_groups) {
  static P block{};
  return {kernel, max_groups, sizeof(P), reinterpret_cast<const void*>(&empty_kernel<P>), &block};
}

// Launches of more than kGroupsSmall groups convert A on the masked form's block (kernels/sm90/convert_a.cuh: the
// task form's GEMM block and the counts), so those conversion entries name that type.
const Entry* entries(size_t* count) {
  static const Entry all[] = {
      entry<sm90::Params<sm90::kGroupsSmall>>("gemm", sm90::kGroupsSmall),
      entry<sm90::Params<sm90::kGroupsMid>>("gemm", sm90::kGroupsMid),
      entry<sm90::Params<sm90::kGroupsLarge>>("gemm", sm90::kGroupsLarge),
      entry<sm90::Params<sm90::kGroupsPerLaunch>>("gemm", sm90::kGroupsPerLaunch),
      entry<sm90::ConvertParams>("conversion", sm90::kGroupsSmall),
      entry<sm90::MaskedParams<sm90::kGroupsMid>>("conversion", sm90::kGroupsMid),
      entry<sm90::MaskedParams<sm90::kGroupsLarge>>("conversion", sm90::kGroupsLarge),
      entry<sm90::MaskedParams<sm90::kGroupsPerLaunch>>("conversion", sm90::kGroupsPerLaunch),
  };
  *count = sizeof(all) / sizeof(all[0]);
  return all;
}

using LaunchEx = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
using ParamInfo = CUresult (*)(CUfunction, size_t, size_t*, size_t*);
using ErrorString = CUresult (*)(CUresult, const char**);

struct Driver {
  LaunchEx launch = nullptr;
  ParamInfo param_info = nullptr;  // CUDA 12.4+ drivers; the size check is skipped without it
  ErrorString error_string = nullptr;
};

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("bare_launch_ns: " + what); }

void check_rt(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(rc));
}

void check_drv(const Driver& d, CUresult rc, const char* what) {
  if (rc == CUDA_SUCCESS) return;
  const char* text = nullptr;
  if (d.error_string) d.error_string(rc, &text);
  fail(std::string(what) + ": " + (text ? text : "CUDA driver error " + std::to_string((int)rc)));
}

void* entry_point(const char* name, unsigned version, bool required) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t rc = cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &found);
  if (rc != cudaSuccess) fail(std::string("cudaGetDriverEntryPointByVersion(") + name + "): " + cudaGetErrorString(rc));
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
    if (required) fail(std::string("the CUDA driver has no ") + name);
    return nullptr;
  }
  return fn;
}

const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    Driver x;
    x.error_string = reinterpret_cast<ErrorString>(entry_point("cuGetErrorString", 12000, true));
    x.launch = reinterpret_cast<LaunchEx>(entry_point("cuLaunchKernelEx", 12000, true));
    x.param_info = reinterpret_cast<ParamInfo>(entry_point("cuFuncGetParamInfo", 12040, false));
    d = x;
  });
  return d;
}

}  // namespace

namespace flbench {

std::vector<ParamBlock> param_blocks() {
  size_t count = 0;
  const Entry* all = entries(&count);
  std::vector<ParamBlock> out;
  for (size_t i = 0; i < count; ++i) out.push_back({all[i].kernel, all[i].max_groups, (int64_t)all[i].bytes});
  return out;
}

std::tuple<double, double, double> bare_launch_ns(int64_t param_bytes, int iters, int batches, uintptr_t stream,
                                                  bool pdl) {
  if (iters < 1 || batches < 1) fail("need iters >= 1 and batches >= 1");
  size_t count = 0;
  const Entry* all = entries(&count);
  const Entry* e = nullptr;
  std::vector<size_t> sizes;  // distinct (the larger conversion blocks are the GEMM's)
  for (size_t i = 0; i < count; ++i) {
    if (!e && (int64_t)all[i].bytes == param_bytes) e = &all[i];
    if (std::find(sizes.begin(), sizes.end(), all[i].bytes) == sizes.end()) sizes.push_back(all[i].bytes);
  }
  if (!e) {
    std::string list;
    for (size_t b : sizes) list += (list.empty() ? "" : ", ") + std::to_string(b);
    fail("no empty kernel takes " + std::to_string(param_bytes) + " bytes; compiled: " + list);
  }

  const Driver& d = driver();
  cudaFunction_t rt_fn = nullptr;
  check_rt(cudaGetFuncBySymbol(&rt_fn, e->sym), "cudaGetFuncBySymbol");
  CUfunction fn = reinterpret_cast<CUfunction>(rt_fn);
  if (d.param_info) {  // the driver copies what the kernel declares: make sure that is the whole block
    size_t offset = 0, size = 0;  // (the offset is the block's alignment padding in the parameter bank)
    check_drv(d, d.param_info(fn, 0, &offset, &size), "cuFuncGetParamInfo");
    if (size != e->bytes)
      fail("the empty kernel's parameter has " + std::to_string(size) + " bytes, expected " + std::to_string(e->bytes));
  }
  int device = 0, sms = 0;
  check_rt(cudaGetDevice(&device), "cudaGetDevice");
  check_rt(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");

  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg{};
  cfg.gridDimX = (unsigned)sms;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 128;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = reinterpret_cast<CUstream>(stream);
  cfg.attrs = pdl ? &attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  void* args[] = {const_cast<void*>(e->params)};
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);

  for (int i = 0; i < iters; ++i) check_drv(d, d.launch(&cfg, fn, args, nullptr), "cuLaunchKernelEx");  // warm-up
  check_rt(cudaStreamSynchronize(st), "cudaStreamSynchronize");
  std::vector<double> per(batches);
  for (int b = 0; b < batches; ++b) {
    CUresult rc = CUDA_SUCCESS;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters && rc == CUDA_SUCCESS; ++i) rc = d.launch(&cfg, fn, args, nullptr);
    const auto t1 = std::chrono::steady_clock::now();
    check_drv(d, rc, "cuLaunchKernelEx");
    per[b] = std::chrono::duration<double, std::nano>(t1 - t0).count() / iters;
    check_rt(cudaStreamSynchronize(st), "cudaStreamSynchronize");
  }
  std::sort(per.begin(), per.end());
  const size_t n = per.size();
  const double median = n % 2 ? per[n / 2] : (per[n / 2 - 1] + per[n / 2]) / 2;  // as statistics.median
  return {median, per[n / 10], per[9 * n / 10]};  // p10 and p90 as fastlaunch.timing.host_ns_stats picks them
}

}  // namespace flbench
