// The extern "C" launcher: per-device set-up (once), the call's empty groups left out, architecture
// dispatch, and the launch in the device's primary context.
#include <chrono>
#include <memory>
#include <mutex>
#include <new>

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
      {"cuDeviceGet", reinterpret_cast<void**>(&drv.device_get)},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void**>(&drv.primary_ctx_retain)},
      {"cuCtxGetCurrent", reinterpret_cast<void**>(&drv.ctx_get_current)},
      {"cuCtxSetCurrent", reinterpret_cast<void**>(&drv.ctx_set_current)},
  };
  for (const Entry& e : entries) {
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    FL_CUDA_TRY(err, cudaGetDriverEntryPointByVersion(e.name, e.slot, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || *e.slot == nullptr)
      return err.set(FL_ERR_CUDA, "the CUDA driver has no %s (driver too old?)", e.name);
  }
  return FL_OK;
}

// Rewrites err (a sticky CUDA error, is_sticky) to say where it comes from: a call that has queued no
// kernel yet cannot have caused it (its host calls only report the context's state), so it comes from
// earlier work on the device; after this call queued kernels, those may have raised it as well.
int name_sticky(Error& err, int device) {
  char seen[512] = "";
  if (err.buf && err.len) std::snprintf(seen, sizeof(seen), "%s", err.buf);
  const cudaError_t code = static_cast<cudaError_t>(err.cuda_error);
  if (err.queued == 0)
    return err.set(FL_ERR_CUDA,
                   "a CUDA error from earlier work on cuda:%d is pending: %s (%s); not caused by this call, which had "
                   "queued nothing (CUDA returns it from every call until the process exits; it came back from: %s)",
                   device, cudaGetErrorString(code), cudaGetErrorName(code), seen);
  return err.set(FL_ERR_CUDA,
                 "a CUDA error on cuda:%d: %s (%s), raised by a kernel of earlier work or by one of the %d this call "
                 "had queued (CUDA returns it from every call until the process exits; it came back from: %s)",
                 device, cudaGetErrorString(code), cudaGetErrorName(code), err.queued, seen);
}

// Set-up failures that are tried again on the next call: set-up while the call's stream is being captured
// into a graph (the capture forbids some of its calls; they return the capture errors, 900-908, or may
// fail otherwise once the capture is invalidated) and out of memory (loading the kernels takes device
// memory, which may be freed). Every other failure stays for the life of the process (no driver or one
// too old, no kernel for the GPU, a context made unusable by a sticky error, a bad experiment setting):
// it is kept and repeated on every later call without calling CUDA again.
bool transient(int status, int cuda_error, cudaStream_t stream) {
  if (status != FL_ERR_CUDA || is_sticky(cuda_error)) return false;
  if (cuda_error == cudaErrorMemoryAllocation ||
      (cuda_error >= cudaErrorStreamCaptureUnsupported && cuda_error <= cudaErrorStreamCaptureWrongThread))
    return true;
  if (stream == nullptr) return false;  // the legacy default stream is never captured
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
    (void)cudaGetLastError();  // (this query's own error, not the caller's)
    return false;
  }
  return capture != cudaStreamCaptureStatusNone;
}

// The architecture's set-up, run in the device's primary context (retained here: the device is the one
// the caller's data is on), with the caller's context current again after.
int init_device(int device, DeviceState& dev, Error& err) {
  dev.device = device;
  if (int rc = load_driver(dev.drv, err)) return rc;
  FL_CUDA_TRY(err, cudaDeviceGetAttribute(&dev.cc_major, cudaDevAttrComputeCapabilityMajor, device));
  FL_CUDA_TRY(err, cudaDeviceGetAttribute(&dev.cc_minor, cudaDevAttrComputeCapabilityMinor, device));
  FL_CUDA_TRY(err, cudaDeviceGetAttribute(&dev.sm_count, cudaDevAttrMultiProcessorCount, device));
  int (*arch_init)(DeviceState&, Error&) = nullptr;
  if (dev.cc_major == 9 && dev.cc_minor == 0) {
    dev.launch = sm90_launch;
    dev.launch_masked = sm90_launch_masked;
    arch_init = sm90_init;
  } else if (dev.cc_major == 10 && dev.cc_minor == 0) {
    dev.launch = sm100_launch;
    arch_init = sm100_init;
  } else {
    return err.set(FL_ERR_UNSUPPORTED, "no fastlaunch kernel for cuda:%d (sm_%d%d); this build has kernels for %s",
                   device, dev.cc_major, dev.cc_minor, fl_supported_archs());
  }
  CUdevice cu_device = 0;
  FL_DRV_TRY(err, dev.drv, dev.drv.device_get(&cu_device, device));
  FL_DRV_TRY(err, dev.drv, dev.drv.primary_ctx_retain(&dev.ctx, cu_device));
  CUcontext prev = nullptr;
  FL_DRV_TRY(err, dev.drv, dev.drv.ctx_get_current(&prev));
  if (prev != dev.ctx) FL_DRV_TRY(err, dev.drv, dev.drv.ctx_set_current(dev.ctx));
  int rc = arch_init(dev, err);
  if (prev != dev.ctx) {
    const CUresult back = dev.drv.ctx_set_current(prev);
    if (back != CUDA_SUCCESS && rc == FL_OK)
      rc = err.driver(dev.drv, back, "cuCtxSetCurrent(the caller's context)", __FILE__, __LINE__);
  }
  return rc;
}

// The device's state, set up on first use. A failed set-up is kept (and reported on every later call)
// unless it is transient. `stream`: the call's.
int device_state(int device, void* stream, DeviceState** out, Error& err) {
  if (device < 0 || device >= kMaxDevices)
    return err.set(FL_ERR_VALUE, "device index %d is outside 0..%d", device, kMaxDevices - 1);
  DeviceState& dev = g_devices[device];
  int status = dev.status.load(std::memory_order_acquire);
  if (status < 0) {
    std::lock_guard<std::mutex> lock(g_init_mutex);
    status = dev.status.load(std::memory_order_relaxed);
    if (status < 0) {
      char why[1024] = "";
      Error init_err{why, sizeof(why)};
      status = init_device(device, dev, init_err);
      if (status == FL_OK) {
        dev.status.store(FL_OK, std::memory_order_release);
        *out = &dev;
        return FL_OK;
      }
      err.cuda_error = init_err.cuda_error;
      if (transient(status, init_err.cuda_error, static_cast<cudaStream_t>(stream)))
        return err.set(status, "could not set up cuda:%d: %s (tried again on the next call)", device, why);
      if (status == FL_ERR_CUDA) {
        if (is_sticky(init_err.cuda_error)) name_sticky(init_err, device);
        std::snprintf(dev.message, sizeof(dev.message), "could not set up cuda:%d: %s", device, why);
      } else {
        std::snprintf(dev.message, sizeof(dev.message), "%s", why);
      }
      dev.status.store(status, std::memory_order_release);
      return err.set(status, "%s", dev.message);
    }
  }
  if (status != FL_OK) {
    if (status == FL_ERR_CUDA)
      return err.set(status, "%s (the set-up failed on an earlier call and is not tried again)", dev.message);
    return err.set(status, "%s", dev.message);
  }
  *out = &dev;
  return FL_OK;
}

// A call's groups for the architectures: none empty. src (or null: the same numbers) maps each to the
// caller's group number.
struct Groups {
  const int64_t* buf = nullptr;
  const int* src = nullptr;
  int count = 0;
};

// The call's non-empty groups (M and N both > 0). Every group's sizes are checked first, so a bad group
// fails the call even where it is empty. Where none is empty (the usual call) this is the caller's
// buffer itself; else the non-empty groups are copied, in order, into a buffer kept per thread, with
// src naming the caller's group of each (for messages).
int nonempty_groups(const int64_t* buf, int G, Groups* out, Error& err) {
  int count = 0;
  for (int g = 0; g < G; ++g) {
    const int64_t m = buf[5 * G + g], n = buf[6 * G + g];
    if (int rc = check_group_sizes(m, n, buf[7 * G + g], g, err, 0)) return rc;
    count += m != 0 && n != 0;
  }
  out->count = count;
  if (count == G) {
    out->buf = buf;
    out->src = nullptr;
    return FL_OK;
  }
  if (count == 0) return FL_OK;
  struct Store {
    std::unique_ptr<int64_t[]> buf;
    std::unique_ptr<int[]> src;
    int groups = 0;
  };
  thread_local Store store;
  if (count > store.groups) {
    std::unique_ptr<int64_t[]> grown_buf(new (std::nothrow) int64_t[8 * (size_t)count]);
    std::unique_ptr<int[]> grown_src(new (std::nothrow) int[count]);
    if (!grown_buf || !grown_src)
      return err.set(FL_ERR_OUT_OF_MEMORY, "out of host memory for the call's %d non-empty groups", count);
    store.buf = std::move(grown_buf);
    store.src = std::move(grown_src);
    store.groups = count;
  }
  int64_t* dst = store.buf.get();
  int* src = store.src.get();
  int v = 0;
  for (int g = 0; g < G; ++g) {
    if (buf[5 * G + g] == 0 || buf[6 * G + g] == 0) continue;
    for (int f = 0; f < 8; ++f) dst[f * count + v] = buf[f * G + g];
    src[v++] = g;
  }
  out->buf = dst;
  out->src = src;
  return FL_OK;
}

// launch() in the device's primary context: where another context (or none) is current to the thread, the
// device's is made current for the launch and the caller's put back after (a driver call each; the usual call
// finds the device's context current and pays one cuCtxGetCurrent, a thread-local read).
template <class Launch>
int in_context(const DeviceState& dev, Error& err, Launch&& launch) {
  CUcontext prev = nullptr;
  FL_DRV_TRY(err, dev.drv, dev.drv.ctx_get_current(&prev));
  if (__builtin_expect(prev == dev.ctx, 1)) return launch();
  FL_DRV_TRY(err, dev.drv, dev.drv.ctx_set_current(dev.ctx));
  int rc = launch();
  const CUresult back = dev.drv.ctx_set_current(prev);
  if (back != CUDA_SUCCESS && rc == FL_OK)
    rc = err.driver(dev.drv, back, "cuCtxSetCurrent(the caller's context)", __FILE__, __LINE__);
  return rc;
}

// ... and a sticky error named as such. Detecting one costs the call nothing: the call's first CUDA call
// that touches the context (its first kernel launch, or a workspace allocation that asks CUDA for memory)
// returns it, queueing nothing, so it is named here, on the failure path, instead of being looked for
// before every launch (cudaPeekAtLastError would not see it anyway: it holds only the errors the runtime's
// calls in this thread have returned, and a kernel's fault is returned by the next call that touches the
// context; and an unrelated non-sticky error left there does not affect the launch).
template <class Launch>
int launch_on(const DeviceState& dev, int device, Error& err, Launch&& launch) {
  const int rc = in_context(dev, err, launch);
  if (rc == FL_ERR_CUDA && is_sticky(err.cuda_error)) return name_sticky(err, device);
  return rc;
}

int launch_on(const DeviceState& dev, const Groups& gs, void* stream, int device, const fl_allocator* alloc,
              Error& err) {
  return launch_on(dev, device, err, [&] {
    return dev.launch(dev, gs.buf, gs.count, gs.src, static_cast<cudaStream_t>(stream), alloc, err);
  });
}

}  // namespace
}  // namespace fl

extern "C" int fl_launch(const int64_t* buf, int num_groups, void* stream, int device, const fl_allocator* alloc,
                         char* err, size_t errlen) {
  fl::Error e{err, errlen};
  if (num_groups < 1) return e.set(FL_ERR_VALUE, "need at least one group, got %d", num_groups);
  fl::Groups gs;
  if (int rc = fl::nonempty_groups(buf, num_groups, &gs, e)) return rc;
  if (gs.count == 0) return FL_OK;  // every group empty: nothing to do, and no CUDA call
  fl::DeviceState* dev = nullptr;
  if (int rc = fl::device_state(device, stream, &dev, e)) return rc;
  return fl::launch_on(*dev, gs, stream, device, alloc, e);
}

extern "C" int fl_launch_masked(const fl_masked_args* args, void* stream, int device, const fl_allocator* alloc,
                                char* err, size_t errlen) {
  fl::Error e{err, errlen};
  const fl_masked_args& a = *args;
  if (a.groups < 1 || a.groups > fl::kMaxExtent || a.max_m < 0 || a.max_m > fl::kMaxExtent || a.n < 1 ||
      a.n > fl::kMaxExtent || a.k < fl::kKMultiple || a.k % fl::kKMultiple || a.k > fl::kMaxExtent)
    return e.set(FL_ERR_VALUE, "masked form: unsupported sizes G=%lld max_m=%lld N=%lld K=%lld", (long long)a.groups,
                 (long long)a.max_m, (long long)a.n, (long long)a.k);
  if (a.out_dtype != FL_OUT_FP16 && a.out_dtype != FL_OUT_BF16)
    return e.set(FL_ERR_VALUE, "masked form: out_dtype must be FL_OUT_FP16 (0) or FL_OUT_BF16 (1), got %d",
                 (int)a.out_dtype);
  if (a.a_dtype != FL_A_NVFP4 && a.a_dtype != FL_A_FP16 && a.a_dtype != FL_A_BF16)
    return e.set(FL_ERR_VALUE, "masked form: a_dtype must be FL_A_NVFP4 (0), FL_A_FP16 (1) or FL_A_BF16 (2), got %d",
                 (int)a.a_dtype);
  if (a.a_dtype != FL_A_NVFP4 && a.sfa)
    return e.set(FL_ERR_VALUE, "masked form: sfa must be null where a is fp16 or bf16 (weight-only: a is taken as it "
                 "is)");
  if (a.a_dtype == FL_A_NVFP4 && !a.sfa) return e.set(FL_ERR_VALUE, "masked form: NVFP4 a needs its scales sfa");
  if (a.offs && a.masked_m)
    return e.set(FL_ERR_VALUE, "contiguous layout: masked_m must be null where offs is given");
  if (!a.offs && !a.masked_m)
    return e.set(FL_ERR_VALUE, "masked form: masked_m (or, for the contiguous layout, offs) must be given");
  if (a.max_m == 0) return FL_OK;  // no row to compute, and no CUDA call
  fl::DeviceState* dev = nullptr;
  if (int rc = fl::device_state(device, stream, &dev, e)) return rc;
  if (!dev->launch_masked)
    return e.set(FL_ERR_UNSUPPORTED, "the masked form has a kernel for sm_90a (H100, H200) only; cuda:%d is sm_%d%d",
                 device, dev->cc_major, dev->cc_minor);
  return fl::launch_on(*dev, device, e,
                       [&] { return dev->launch_masked(*dev, a, static_cast<cudaStream_t>(stream), alloc, e); });
}

extern "C" int fl_launch_repeat(const int64_t* buf, int num_groups, void* stream, int device,
                                const fl_allocator* alloc, int iters, double* ns_per_launch, char* err, size_t errlen) {
  fl::Error e{err, errlen};
  if (num_groups < 1 || iters < 1) return e.set(FL_ERR_VALUE, "need groups >= 1 and iters >= 1");
  fl::Groups gs;
  if (int rc = fl::nonempty_groups(buf, num_groups, &gs, e)) return rc;
  *ns_per_launch = 0;
  if (gs.count == 0) return FL_OK;  // nothing to launch
  fl::DeviceState* dev = nullptr;
  if (int rc = fl::device_state(device, stream, &dev, e)) return rc;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    if (int rc = fl::launch_on(*dev, gs, stream, device, alloc, e)) return rc;
  const auto t1 = std::chrono::steady_clock::now();
  *ns_per_launch = std::chrono::duration<double, std::nano>(t1 - t0).count() / iters;
  return FL_OK;
}

extern "C" int fl_setup_device(int device, char* note, size_t notelen, char* err, size_t errlen) {
  fl::Error e{err, errlen};
  fl::DeviceState* dev = nullptr;
  if (int rc = fl::device_state(device, nullptr, &dev, e)) return rc;
  if (note && notelen) std::snprintf(note, notelen, "%s", dev->note);
  return FL_OK;
}

extern "C" const char* fl_supported_archs(void) {
  return "sm_90a (H100, H200), sm_100a (B200, GB200; compiled and inspected, not yet run on hardware; checks itself "
         "on each device before its first use)";
}
