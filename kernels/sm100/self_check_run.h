// The sm_100a kernel's self-check on the device: allocation, inputs, the launches (by a callback), a bounded wait,
// the outputs back and their comparison (kernels/sm100/self_check.h), with the messages of every way it can fail.
// Host code on the CUDA runtime, apart from the kernel: kernels/sm100/launch.cu runs it with the sm_100a kernel, and
// tests/gpu/sm100_self_check_host.cu with stand-in kernels on any GPU.
#pragma once
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "launcher_impl.h"
#include "sm100/self_check.h"

namespace fl::sm100::check {

// Waits up to `seconds` for `ev`: cudaSuccess, cudaErrorNotReady where the time ran out, or the query's error.
inline cudaError_t wait_bounded(cudaEvent_t ev, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const cudaError_t rc = cudaEventQuery(ev);
    if (rc != cudaErrorNotReady) return rc;
    (void)cudaGetLastError();  // the runtime may keep cudaErrorNotReady as the thread's last error: it is this query's
    if (std::chrono::steady_clock::now() > end) return cudaErrorNotReady;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// The check's stream, event and device memory, given back stream-ordered: safe while its kernels still run (after a
// timeout), they are released when the work queued before completes.
struct CheckResources {
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  uint8_t* mem = nullptr;
  ~CheckResources() {
    cudaError_t rc[3] = {cudaSuccess, cudaSuccess, cudaSuccess};
    if (mem) rc[0] = cudaFreeAsync(mem, stream);
    if (done) rc[1] = cudaEventDestroy(done);
    if (stream) rc[2] = cudaStreamDestroy(stream);
    for (cudaError_t r : rc)
      if (r != cudaSuccess && !is_sticky(r)) (void)cudaGetLastError();  // (these calls' own errors)
  }
};

// A CUDA call before the check's first launch failed: a set-up failure like any other (device_state keeps it, or
// tries again where it is transient, e.g. out of memory).
inline int check_not_started(Error& err, cudaError_t rc, const char* call) {
  err.cuda_error = (int)rc;
  if (!is_sticky((int)rc)) (void)cudaGetLastError();
  return err.set(FL_ERR_CUDA, "the sm_100a kernel's self-check could not start: %s failed: %s (%s)", call,
                 cudaGetErrorString(rc), cudaGetErrorName(rc));
}

// The kernel failed the check: FL_ERR_UNSUPPORTED with failure()'s message, kept for every later call.
inline int check_failed(Error& err, int device, const char* what) {
  char msg[1024];
  failure(msg, sizeof(msg), device, what);
  return err.set(FL_ERR_UNSUPPORTED, "%s", msg);
}

// After the check's launches were queued: a CUDA error of theirs, or of a call waiting for them.
inline int check_cuda_failed(Error& err, int device, cudaError_t rc) {
  err.cuda_error = (int)rc;
  const bool sticky = is_sticky((int)rc);
  if (!sticky) (void)cudaGetLastError();
  char what[512];
  describe_cuda_error(what, sizeof(what), cudaGetErrorName(rc), cudaGetErrorString(rc), sticky);
  return check_failed(err, device, what);
}

// run() with the thread's stream-capture mode set (relaxed for the check).
template <class Launch>
int run_launches(int device, double seconds, Launch&& launch, char* note, size_t note_len, Error& err) {
  const auto t0 = std::chrono::steady_clock::now();
  const Layout lay = layout();
  std::vector<uint8_t> image(lay.inputs_bytes);
  make_inputs(lay, image.data());

  CheckResources res;
  if (cudaError_t rc = cudaStreamCreateWithFlags(&res.stream, cudaStreamNonBlocking))
    return check_not_started(err, rc, "cudaStreamCreateWithFlags");
  if (cudaError_t rc = cudaEventCreateWithFlags(&res.done, cudaEventDisableTiming))
    return check_not_started(err, rc, "cudaEventCreateWithFlags");
  if (cudaError_t rc = cudaMallocAsync(reinterpret_cast<void**>(&res.mem), lay.total_bytes, res.stream)) {
    res.mem = nullptr;
    return check_not_started(err, rc, "cudaMallocAsync");
  }
  if (cudaError_t rc = cudaMemcpyAsync(res.mem, image.data(), lay.inputs_bytes, cudaMemcpyHostToDevice, res.stream))
    return check_not_started(err, rc, "cudaMemcpyAsync (the inputs)");
  if (cudaError_t rc = cudaMemsetAsync(res.mem + lay.c_begin, kFill, lay.total_bytes - lay.c_begin, res.stream))
    return check_not_started(err, rc, "cudaMemsetAsync (the outputs)");

  // The launcher's buffer ([a b c sfa sfb m n k] x G) of each launch: the same inputs, its own Cs.
  constexpr int G = kNumGroups;
  for (int i = 0; i < kNumLaunches; ++i) {
    int64_t buf[8 * G];
    for (int g = 0; g < G; ++g) {
      const auto at = [&](size_t off) { return (int64_t)reinterpret_cast<uintptr_t>(res.mem + off); };
      buf[0 * G + g] = at(lay.a[g]);
      buf[1 * G + g] = at(lay.b[g]);
      buf[2 * G + g] = at(lay.c[i][g]);
      buf[3 * G + g] = at(lay.sfa[g]);
      buf[4 * G + g] = at(lay.sfb[g]);
      buf[5 * G + g] = kGroups[g].m;
      buf[6 * G + g] = kGroups[g].n;
      buf[7 * G + g] = kGroups[g].k;
    }
    char why[512] = "";
    Error launch_err{why, sizeof(why)};
    if (const int rc = launch(i, buf, G, res.stream, launch_err)) {
      err.cuda_error = launch_err.cuda_error;
      if (launch_err.cuda_error == CUDA_ERROR_OUT_OF_MEMORY)  // transient: device_state tries the set-up again
        return err.set(FL_ERR_CUDA, "the sm_100a kernel's self-check could not queue its launches: %s", why);
      char name[160], what[768];
      describe_launch(name, sizeof(name), i);
      std::snprintf(what, sizeof(what), "%s could not be queued: %s", name, why);
      return check_failed(err, device, what);
    }
  }
  if (cudaError_t rc = cudaEventRecord(res.done, res.stream)) return check_cuda_failed(err, device, rc);

  // The expected C, while the device runs.
  Expected want;
  char why[512] = "";
  if (!reference(lay, image.data(), want, why, sizeof(why))) {
    char what[640];
    std::snprintf(what, sizeof(what), "its inputs do not make every sum exact (%s), a defect of the check itself", why);
    return check_failed(err, device, what);
  }

  const cudaError_t waited = wait_bounded(res.done, seconds);
  if (waited == cudaErrorNotReady) {
    char what[512];
    describe_timeout(what, sizeof(what), seconds);
    return check_failed(err, device, what);
  }
  if (waited != cudaSuccess) return check_cuda_failed(err, device, waited);

  std::vector<uint8_t> cpart(lay.total_bytes - lay.c_begin);
  if (cudaError_t rc = cudaMemcpyAsync(cpart.data(), res.mem + lay.c_begin, cpart.size(), cudaMemcpyDeviceToHost,
                                       res.stream))
    return check_cuda_failed(err, device, rc);
  if (cudaError_t rc = cudaEventRecord(res.done, res.stream)) return check_cuda_failed(err, device, rc);
  const cudaError_t copied = wait_bounded(res.done, seconds);
  if (copied != cudaSuccess) return check_cuda_failed(err, device, copied);

  Mismatch m;
  if (compare(lay, cpart.data(), want, &m)) {
    char what[768];
    describe_mismatch(what, sizeof(what), m);
    return check_failed(err, device, what);
  }
  int64_t elements = 0;
  int32_t kmax = 0;
  for (const GroupSpec& g : kGroups) elements += (int64_t)g.m * g.n, kmax = g.k > kmax ? g.k : kmax;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::snprintf(note, note_len,
                "the sm_100a kernel passed its self-check on cuda:%d: %d launches (one tile per CTA and persistent, "
                "16- and 256-group parameter blocks) of %d groups, %lld tiles, K up to %d; all %lld C elements of "
                "each equal to the exact values, the guards around them untouched (%.0f ms)",
                device, kNumLaunches, G, (long long)total_tiles(), kmax, (long long)elements, ms);
  return FL_OK;
}

// Runs the self-check in the current context (the device's primary context, device index `device` for messages): the
// inputs to the device on a stream of its own, C filled, then launch(i, buf, G, stream, err) for each launch i of
// kLaunches, which queues it on `stream` over buf ([a b c sfa sfb m n k] x G: the inputs, launch i's own Cs) and
// returns FL_OK or an error in err (err.cuda_error set by a CUDA failure); the host waits at most `seconds` for them,
// computing the expected C meanwhile, and compares. FL_OK with `note` saying what passed, else the error: FL_ERR_CUDA
// where the check could not start (a set-up failure like any other: out of memory is tried again), FL_ERR_UNSUPPORTED
// where the kernel failed it. The thread's stream-capture mode is relaxed for the duration, so a call made while the
// caller's stream is being captured runs it too; nothing of it is captured.
template <class Launch>
int run(int device, double seconds, Launch&& launch, char* note, size_t note_len, Error& err) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (cudaError_t rc = cudaThreadExchangeStreamCaptureMode(&mode))
    return check_not_started(err, rc, "cudaThreadExchangeStreamCaptureMode");
  const int rc = run_launches(device, seconds, launch, note, note_len, err);
  const cudaError_t back = cudaThreadExchangeStreamCaptureMode(&mode);
  if (back != cudaSuccess && rc == FL_OK) return check_not_started(err, back, "cudaThreadExchangeStreamCaptureMode");
  return rc;
}

}  // namespace fl::sm100::check
