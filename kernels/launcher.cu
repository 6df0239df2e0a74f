// The extern "C" launcher: per-device set-up (once), architecture dispatch, and the launch.
#include <chrono>
#include <mutex>

#include "launcher_impl.h"

namespace fl {
namespace {

constexpr int kMaxDevices = 64;
DeviceState g_devices[kMaxDevices];
std::mutex g_init_mutex;

int load_driver(Driver& drv, Error& err) {
  struct Entry {
    const char* name;
    void** slot;
  } entries[] = {
      {"cuLaunchKernelEx", reinterpret_cast<void**>(&drv.launch_kernel_ex)},
      {"cuTensorMapEncodeTiled", reinterpret_cast<void**>(&drv.tensor_map_encode_tiled)},
      {"cuGetErrorString", reinterpret_cast<void**>(&drv.get_error_string)},
  };
  for (const Entry& e : entries) {
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    FL_CUDA_TRY(err, cudaGetDriverEntryPointByVersion(e.name, e.slot, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || *e.slot == nullptr)
      return err.set(FL_ERR_CUDA, "the CUDA driver has no %s (driver too old?)", e.name);
  }
  return FL_OK;
}

int init_device(int device, DeviceState& dev, Error& err) {
  if (int rc = load_driver(dev.drv, err)) return rc;
  FL_CUDA_TRY(err, cudaDeviceGetAttribute(&dev.cc_major, cudaDevAttrComputeCapabilityMajor, device));
  FL_CUDA_TRY(err, cudaDeviceGetAttribute(&dev.cc_minor, cudaDevAttrComputeCapabilityMinor, device));
  FL_CUDA_TRY(err, cudaDeviceGetAttribute(&dev.sm_count, cudaDevAttrMultiProcessorCount, device));
  if (dev.cc_major == 9 && dev.cc_minor == 0) {
    dev.launch = sm90_launch;
    dev.launch_masked = sm90_launch_masked;
    return sm90_init(dev, err);
  }
  if (dev.cc_major == 10 && dev.cc_minor == 0) {
    dev.launch = sm100_launch;
    return sm100_init(dev, err);
  }
  return err.set(FL_ERR_UNSUPPORTED, "no fastlaunch kernel for cuda:%d (sm_%d%d); this build has kernels for %s", device,
                 dev.cc_major, dev.cc_minor, fl_supported_archs());
}

// The device's state, set up on first use. Set-up runs on `device` and restores the caller's device.
int device_state(int device, DeviceState** out, Error& err) {
  if (device < 0 || device >= kMaxDevices)
    return err.set(FL_ERR_VALUE, "device index %d is outside 0..%d", device, kMaxDevices - 1);
  DeviceState& dev = g_devices[device];
  int status = dev.status.load(std::memory_order_acquire);
  if (status < 0) {
    std::lock_guard<std::mutex> lock(g_init_mutex);
    status = dev.status.load(std::memory_order_relaxed);
    if (status < 0) {
      Error init_err{dev.message, sizeof(dev.message)};
      int prev = -1;
      FL_CUDA_TRY(err, cudaGetDevice(&prev));
      FL_CUDA_TRY(err, cudaSetDevice(device));
      status = init_device(device, dev, init_err);
      cudaSetDevice(prev);
      // CUDA failures may be transient (e.g. during graph capture): retry on the next call.
      if (status == FL_ERR_CUDA) return err.set(status, "%s", dev.message);
      dev.status.store(status, std::memory_order_release);
    }
  }
  if (status != FL_OK) return err.set(status, "%s", dev.message);
  *out = &dev;
  return FL_OK;
}

// f() with `device` current, the caller's device restored after.
template <class F>
int on_device(int device, Error& err, F&& f) {
  int cur = -1;
  FL_CUDA_TRY(err, cudaGetDevice(&cur));
  if (cur == device) return f();
  FL_CUDA_TRY(err, cudaSetDevice(device));
  const int rc = f();
  cudaSetDevice(cur);
  return rc;
}

int launch_on(DeviceState& dev, const int64_t* buf, int G, void* stream, int device, const fl_allocator* alloc,
              Error& err) {
  return on_device(device, err, [&] { return dev.launch(dev, buf, G, static_cast<cudaStream_t>(stream), alloc, err); });
}

}  // namespace
}  // namespace fl

extern "C" int fl_launch(const int64_t* buf, int num_groups, void* stream, int device, const fl_allocator* alloc,
                         char* err, size_t errlen) {
  fl::Error e{err, errlen};
  if (num_groups < 1) return e.set(FL_ERR_VALUE, "need at least one group, got %d", num_groups);
  fl::DeviceState* dev = nullptr;
  if (int rc = fl::device_state(device, &dev, e)) return rc;
  return fl::launch_on(*dev, buf, num_groups, stream, device, alloc, e);
}

extern "C" int fl_launch_masked(const fl_masked_args* args, void* stream, int device, const fl_allocator* alloc,
                                char* err, size_t errlen) {
  fl::Error e{err, errlen};
  const fl_masked_args& a = *args;
  if (a.groups < 1 || a.groups > fl::kMaxExtent || a.max_m < 0 || a.max_m > fl::kMaxExtent || a.n < 1 ||
      a.n > fl::kMaxExtent || a.k < fl::kKMultiple || a.k % fl::kKMultiple || a.k > fl::kMaxExtent)
    return e.set(FL_ERR_VALUE, "masked form: unsupported sizes G=%lld max_m=%lld N=%lld K=%lld", (long long)a.groups,
                 (long long)a.max_m, (long long)a.n, (long long)a.k);
  if (a.max_m == 0) return FL_OK;  // no row to compute
  fl::DeviceState* dev = nullptr;
  if (int rc = fl::device_state(device, &dev, e)) return rc;
  if (!dev->launch_masked)
    return e.set(FL_ERR_UNSUPPORTED, "the masked form has a kernel for sm_90a (H100, H200) only; cuda:%d is sm_%d%d",
                 device, dev->cc_major, dev->cc_minor);
  return fl::on_device(device, e,
                       [&] { return dev->launch_masked(*dev, a, static_cast<cudaStream_t>(stream), alloc, e); });
}

extern "C" int fl_launch_repeat(const int64_t* buf, int num_groups, void* stream, int device,
                                const fl_allocator* alloc, int iters, double* ns_per_launch, char* err, size_t errlen) {
  fl::Error e{err, errlen};
  if (num_groups < 1 || iters < 1) return e.set(FL_ERR_VALUE, "need groups >= 1 and iters >= 1");
  fl::DeviceState* dev = nullptr;
  if (int rc = fl::device_state(device, &dev, e)) return rc;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    if (int rc = fl::launch_on(*dev, buf, num_groups, stream, device, alloc, e)) return rc;
  const auto t1 = std::chrono::steady_clock::now();
  *ns_per_launch = std::chrono::duration<double, std::nano>(t1 - t0).count() / iters;
  return FL_OK;
}

extern "C" const char* fl_supported_archs(void) {
  return "sm_90a (H100, H200), sm_100a (B200, GB200; compiled and inspected, not yet run on hardware)";
}
