// Benchmark-only entry points (built as fastlaunch._bench with FASTLAUNCH_BUILD_BENCH=1).
// Other ways to reach the same launcher, for benchmarks/bench_launch.py:
//   launch_vec(a, b, c, sfa, sfb, m, n, k)          pybind11, std::vector<at::Tensor> + int lists
//   torch.ops.fastlaunch_bench.launch(same)         TORCH_LIBRARY custom op taking Tensor[]
// Both pack the same int64 buffer as fast_launch and call fl_launch from fastlaunch._C with its
// workspace allocator, both looked up with dlsym after bind(path to fastlaunch._C).
// The driver's floor under each launch, for benchmarks/bench_serving.py (bare_launch.h, bare_launch.cu):
//   param_blocks() -> [(kernel, max_groups, bytes), ...]   the sm_90a kernels' parameter blocks
//   bare_launch_ns(param_bytes, iters=20, batches=200, stream=0, pdl=False) -> (median, p10, p90)
//                                                     host ns per bare cuLaunchKernelEx of an empty kernel
#include <c10/cuda/CUDAStream.h>
#include <dlfcn.h>
#include <torch/extension.h>
#include <torch/library.h>

#include "bare_launch.h"
#include "launcher.h"

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace {

using LaunchFn = decltype(&fl_launch);
LaunchFn g_launch = nullptr;
const fl_allocator* g_alloc = nullptr;

void bind(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  TORCH_CHECK(h, "fastlaunch._C is not loaded: ", path);
  g_launch = reinterpret_cast<LaunchFn>(dlsym(h, "fl_launch"));
  TORCH_CHECK(g_launch, "fl_launch not found in ", path);
  g_alloc = reinterpret_cast<const fl_allocator*>(dlsym(h, "fl_torch_allocator"));
  TORCH_CHECK(g_alloc, "fl_torch_allocator not found in ", path);
}

void launch_impl(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, const std::vector<at::Tensor>& c,
                 const std::vector<at::Tensor>& sfa, const std::vector<at::Tensor>& sfb, const std::vector<int64_t>& m,
                 const std::vector<int64_t>& n, const std::vector<int64_t>& k) {
  TORCH_CHECK(g_launch, "call bind() first");
  const int G = (int)a.size();
  std::vector<int64_t> buf(8 * G);
  for (int g = 0; g < G; ++g) {
    buf[0 * G + g] = (int64_t)a[g].data_ptr();
    buf[1 * G + g] = (int64_t)b[g].data_ptr();
    buf[2 * G + g] = (int64_t)c[g].data_ptr();
    buf[3 * G + g] = (int64_t)sfa[g].data_ptr();
    buf[4 * G + g] = (int64_t)sfb[g].data_ptr();
    buf[5 * G + g] = m[g];
    buf[6 * G + g] = n[g];
    buf[7 * G + g] = k[g];
  }
  const int dev = a[0].get_device();
  char err[512];
  const int rc =
      g_launch(buf.data(), G, c10::cuda::getCurrentCUDAStream(dev).stream(), dev, g_alloc, err, sizeof(err));
  TORCH_CHECK(rc == 0, err);
}

void launch_op(at::TensorList a, at::TensorList b, at::TensorList c, at::TensorList sfa, at::TensorList sfb,
               at::IntArrayRef m, at::IntArrayRef n, at::IntArrayRef k) {
  launch_impl(a.vec(), b.vec(), c.vec(), sfa.vec(), sfb.vec(), m.vec(), n.vec(), k.vec());
}

}  // namespace

TORCH_LIBRARY(fastlaunch_bench, lib) {
  lib.def("launch(Tensor[] a, Tensor[] b, Tensor[] c, Tensor[] sfa, Tensor[] sfb, int[] m, int[] n, int[] k) -> ()");
}

TORCH_LIBRARY_IMPL(fastlaunch_bench, CUDA, lib) { lib.impl("launch", &launch_op); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, mod) {
  mod.def("bind", &bind);
  mod.def("launch_vec", &launch_impl);
  mod.def(
      "param_blocks",
      [] {
        std::vector<std::tuple<std::string, int, int64_t>> out;
        for (const flbench::ParamBlock& p : flbench::param_blocks()) out.emplace_back(p.kernel, p.max_groups, p.bytes);
        return out;
      },
      "[(kernel, max_groups, bytes), ...]: the sm_90a GEMM's and A conversion's parameter blocks");
  mod.def("bare_launch_ns", &flbench::bare_launch_ns, pybind11::arg("param_bytes"), pybind11::arg("iters") = 20,
          pybind11::arg("batches") = 200, pybind11::arg("stream") = 0, pybind11::arg("pdl") = false,
          "(median, p10, p90) host ns per bare cuLaunchKernelEx of an empty kernel taking param_bytes bytes "
          "(one of param_blocks()' sizes) on `stream` (a cudaStream_t as an int), batches of iters launches, the "
          "stream drained between batches; pdl: with the programmatic-stream-serialisation attribute");
}
