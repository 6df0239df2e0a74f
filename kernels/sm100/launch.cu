// Host side of the sm_100a kernel: one-time set-up per device (with the kernel's self-check) and the per-call
// launch. Compiled for sm_100a only (setup.py builds this file apart from the sm_90a sources).
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "launcher_impl.h"
#include "sm100/gemm.cuh"
#include "sm100/self_check.h"

namespace fl {
namespace {

using sm100::Params;
static_assert(sizeof(Params<sm100::kGroupsPerLaunch>) <= 32764, "kernel parameters exceed the 32764-byte limit");

template <int MAXG, bool kPersistent>
int prepare(CUfunction* fn, Error& err) {
  return kernel_handle(reinterpret_cast<const void*>(&sm100::nvfp4_group_gemm<MAXG, kPersistent>), sm100::kSmemBytes,
                       fn, err);
}

// The self-check's choice of kernel and grid, where a call's follows from the tile count, and its barrier waits' limit.
struct Pick {
  int persistent;        // 0: the one-tile-per-CTA kernel (a CTA per tile), 1: the persistent kernel on `grid` CTAs
  int grid;
  uint64_t wait_cycles;  // Params::wait_cycles
};

template <int MAXG>
int launch_chunk(const DeviceState& dev, int which, const int64_t* buf, int G, int g0, int gc, cudaStream_t stream,
                 Error& err, const Pick* pick = nullptr) {
  Params<MAXG> p;
  p.wait_cycles = pick ? pick->wait_cycles : sm100::kWaitCycles;
  std::memcpy(&p.tmpl, &dev.sm100.tmpl, sizeof(CUtensorMap));
  int64_t tiles = 0;
  for (int i = 0; i < gc; ++i) {
    const int g = g0 + i;
    const int64_t m = buf[5 * G + g], n = buf[6 * G + g], k = buf[7 * G + g];
    tiles += sm100::group_tiles(m, n);
    sm100::Group& gr = p.groups[i];
    load_operands(gr, buf, G, g);
    // Every A tile is read once per B tile and vice versa: keep the smaller operand in L2.
    gr.policy_a = m <= n ? ptx::kEvictLast : ptx::kEvictFirst;
    gr.policy_b = m <= n ? ptx::kEvictFirst : ptx::kEvictLast;
    gr.m = (int32_t)m;
    gr.n = (int32_t)n;
    gr.k = (int32_t)k;
    gr.tile_end = (int32_t)tiles;
  }
  p.num_groups = gc;
  p.num_tiles = (int32_t)tiles;
  const bool one_tile = sm100::one_tile_per_cta(tiles, dev.sm_count);

  CUlaunchConfig cfg = dev.sm100.config;  // attrs point into dev, which outlives the call
  cfg.gridDimX = (unsigned)sm100::grid_size(tiles, dev.sm_count);
  cfg.hStream = reinterpret_cast<CUstream>(stream);
  CUfunction fn = dev.sm100.fn[which][one_tile ? 0 : 1];
  if (pick) {
    fn = dev.sm100.fn[which][pick->persistent];
    cfg.gridDimX = pick->persistent ? (unsigned)pick->grid : (unsigned)tiles;
  }
  void* args[1] = {&p};
  FL_LAUNCH_TRY(err, dev.drv, dev.drv.launch_kernel_ex(&cfg, fn, args, nullptr));
  return FL_OK;
}

// ------------------------------------------------------------------------ self-check
namespace ck = sm100::check;

// The self-check's limit of a barrier wait for one pipeline step (Params::wait_cycles). Its launches are small (at
// most 8 K stages per tile, microseconds in all), so 2^27 cycles (about 70 ms at 1.9 GHz) is still far above any
// legitimate wait, and a stuck launch traps within about a second (the epilogue's wait is allowed stages + 1 limits),
// before the host stops waiting.
constexpr uint64_t kCheckWaitCycles = uint64_t{1} << 27;
// How long the host waits for the launches: above the time their bounded waits take to trap, with room for other
// work on the device that holds the SMs first.
constexpr double kCheckSeconds = 10.0;

// Waits up to `seconds` for `ev`: cudaSuccess, cudaErrorNotReady where the time ran out, or the query's error.
cudaError_t wait_bounded(cudaEvent_t ev, double seconds) {
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
int check_not_started(Error& err, cudaError_t rc, const char* call) {
  err.cuda_error = (int)rc;
  if (!is_sticky((int)rc)) (void)cudaGetLastError();
  return err.set(FL_ERR_CUDA, "the sm_100a kernel's self-check could not start: %s failed: %s (%s)", call,
                 cudaGetErrorString(rc), cudaGetErrorName(rc));
}

// The kernel failed the check: FL_ERR_UNSUPPORTED with ck::failure's message, kept for every later call.
int check_failed(Error& err, int device, const char* what) {
  char msg[1024];
  ck::failure(msg, sizeof(msg), device, what);
  return err.set(FL_ERR_UNSUPPORTED, "%s", msg);
}

// After the check's launches were queued: a CUDA error of theirs, or of a call waiting for them.
int check_cuda_failed(Error& err, int device, cudaError_t rc) {
  err.cuda_error = (int)rc;
  const bool sticky = is_sticky((int)rc);
  if (!sticky) (void)cudaGetLastError();
  char what[512];
  ck::describe_cuda_error(what, sizeof(what), cudaGetErrorName(rc), cudaGetErrorString(rc), sticky);
  return check_failed(err, device, what);
}

// Runs the kernels on the self-check's groups (kernels/sm100/self_check.h) and compares every C with the values
// computed on the host. FL_OK (dev.note says what passed), else the error every later call on the device repeats.
// Runs in the device's primary context, on a stream of its own, with the thread's stream-capture mode relaxed for
// the duration (a call made while the caller's stream is captured sets the device up too; nothing here is captured).
int self_check_run(DeviceState& dev, Error& err) {
  const int device = dev.device;
  const auto t0 = std::chrono::steady_clock::now();
  const ck::Layout lay = ck::layout();
  std::vector<uint8_t> image(lay.inputs_bytes);
  ck::make_inputs(lay, image.data());

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
  if (cudaError_t rc = cudaMemsetAsync(res.mem + lay.c_begin, ck::kFill, lay.total_bytes - lay.c_begin, res.stream))
    return check_not_started(err, rc, "cudaMemsetAsync (the outputs)");

  // The launcher's buffer ([a b c sfa sfb m n k] x G) of each launch: the same inputs, its own Cs.
  constexpr int G = ck::kNumGroups;
  static_assert(G <= sm100::kGroupsSmall, "the self-check's groups fit the small parameter block");
  for (int i = 0; i < ck::kNumLaunches; ++i) {
    int64_t buf[8 * G];
    for (int g = 0; g < G; ++g) {
      const auto at = [&](size_t off) { return (int64_t)reinterpret_cast<uintptr_t>(res.mem + off); };
      buf[0 * G + g] = at(lay.a[g]);
      buf[1 * G + g] = at(lay.b[g]);
      buf[2 * G + g] = at(lay.c[i][g]);
      buf[3 * G + g] = at(lay.sfa[g]);
      buf[4 * G + g] = at(lay.sfb[g]);
      buf[5 * G + g] = ck::kGroups[g].m;
      buf[6 * G + g] = ck::kGroups[g].n;
      buf[7 * G + g] = ck::kGroups[g].k;
    }
    const ck::LaunchSpec& ls = ck::kLaunches[i];
    const Pick pick{ls.persistent, ls.grid, kCheckWaitCycles};
    char why[512] = "";
    Error launch_err{why, sizeof(why)};
    const int rc = ls.large ? launch_chunk<sm100::kGroupsPerLaunch>(dev, 1, buf, G, 0, G, res.stream, launch_err, &pick)
                            : launch_chunk<sm100::kGroupsSmall>(dev, 0, buf, G, 0, G, res.stream, launch_err, &pick);
    if (rc) {
      err.cuda_error = launch_err.cuda_error;
      if (launch_err.cuda_error == CUDA_ERROR_OUT_OF_MEMORY)  // transient: device_state tries the set-up again
        return err.set(FL_ERR_CUDA, "the sm_100a kernel's self-check could not queue its launches: %s", why);
      char launch[160], what[768];
      ck::describe_launch(launch, sizeof(launch), i);
      std::snprintf(what, sizeof(what), "%s could not be queued: %s", launch, why);
      return check_failed(err, device, what);
    }
  }
  if (cudaError_t rc = cudaEventRecord(res.done, res.stream)) return check_cuda_failed(err, device, rc);

  // The expected C, while the device runs.
  ck::Expected want;
  char why[512] = "";
  if (!ck::reference(lay, image.data(), want, why, sizeof(why))) {
    char what[640];
    std::snprintf(what, sizeof(what), "its inputs do not make every sum exact (%s), a defect of the check itself", why);
    return check_failed(err, device, what);
  }

  const cudaError_t waited = wait_bounded(res.done, kCheckSeconds);
  if (waited == cudaErrorNotReady) {
    char what[512];
    ck::describe_timeout(what, sizeof(what), kCheckSeconds);
    return check_failed(err, device, what);
  }
  if (waited != cudaSuccess) return check_cuda_failed(err, device, waited);

  std::vector<uint8_t> cpart(lay.total_bytes - lay.c_begin);
  if (cudaError_t rc = cudaMemcpyAsync(cpart.data(), res.mem + lay.c_begin, cpart.size(), cudaMemcpyDeviceToHost,
                                       res.stream))
    return check_cuda_failed(err, device, rc);
  if (cudaError_t rc = cudaEventRecord(res.done, res.stream)) return check_cuda_failed(err, device, rc);
  const cudaError_t copied = wait_bounded(res.done, kCheckSeconds);
  if (copied != cudaSuccess) return check_cuda_failed(err, device, copied);

  ck::Mismatch m;
  if (ck::compare(lay, cpart.data(), want, &m)) {
    char what[768];
    ck::describe_mismatch(what, sizeof(what), m);
    return check_failed(err, device, what);
  }
  int64_t elements = 0;
  int32_t kmax = 0;
  for (const ck::GroupSpec& g : ck::kGroups) elements += (int64_t)g.m * g.n, kmax = g.k > kmax ? g.k : kmax;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::snprintf(dev.note, sizeof(dev.note),
                "the sm_100a kernel passed its self-check on cuda:%d: %d launches (one tile per CTA and persistent, "
                "16- and 256-group parameter blocks) of %d groups, %lld tiles, K up to %d; all %lld C elements of "
                "each equal to the exact values, the guards around them untouched (%.0f ms)",
                device, ck::kNumLaunches, G, (long long)ck::total_tiles(), kmax, (long long)elements, ms);
  return FL_OK;
}

// FASTLAUNCH_SM100_SELF_CHECK: 0 skips the check (for testing the kernel itself), 1 (the default) runs it.
int self_check(DeviceState& dev, Error& err) {
  if (const char* env = std::getenv("FASTLAUNCH_SM100_SELF_CHECK")) {
    if (std::strcmp(env, "0") == 0) {
      std::snprintf(dev.note, sizeof(dev.note),
                    "the sm_100a kernel's self-check was skipped on cuda:%d (FASTLAUNCH_SM100_SELF_CHECK=0): the "
                    "kernel runs unchecked",
                    dev.device);
      return FL_OK;
    }
    if (std::strcmp(env, "1") != 0)
      return err.set(FL_ERR_VALUE,
                     "FASTLAUNCH_SM100_SELF_CHECK=%s: expected 0 (skip the sm_100a kernel's self-check) or 1 (run it, "
                     "the default)",
                     env);
  }
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (cudaError_t rc = cudaThreadExchangeStreamCaptureMode(&mode))
    return check_not_started(err, rc, "cudaThreadExchangeStreamCaptureMode");
  const int rc = self_check_run(dev, err);
  const cudaError_t back = cudaThreadExchangeStreamCaptureMode(&mode);
  if (back != cudaSuccess && rc == FL_OK) return check_not_started(err, back, "cudaThreadExchangeStreamCaptureMode");
  return rc;
}

}  // namespace

int sm100_init(DeviceState& dev, Error& err) {
  Sm100State& st = dev.sm100;
  init_launch_config(&st.config, st.attr, sm100::kThreads);
  st.config.sharedMemBytes = sm100::kSmemBytes;
  if (int rc = prepare<sm100::kGroupsSmall, false>(&st.fn[0][0], err)) return rc;
  if (int rc = prepare<sm100::kGroupsSmall, true>(&st.fn[0][1], err)) return rc;
  if (int rc = prepare<sm100::kGroupsPerLaunch, false>(&st.fn[1][0], err)) return rc;
  if (int rc = prepare<sm100::kGroupsPerLaunch, true>(&st.fn[1][1], err)) return rc;
  // The 128-byte x 128-row box with 128-byte swizzle that the MMA's shared-memory descriptors describe.
  if (int rc = encode_byte_map_template(dev.drv, &st.tmpl, sm100::kBlockK / 2, sm100::kTileB,
                                        CU_TENSOR_MAP_SWIZZLE_128B, err))
    return rc;
  // The kernel has never run on hardware: it checks itself before the device's first call runs it.
  return self_check(dev, err);
}

int sm100_launch(const DeviceState& dev, const int64_t* buf, int G, const int* src, cudaStream_t stream,
                 const fl_allocator*, Error& err) {
  // Check every limit before the first launch, so a bad group launches nothing. Messages name the
  // caller's group (src's number, where given).
  int64_t tiles = 0;
  for (int g = 0; g < G; ++g) {
    const int64_t m = buf[5 * G + g], n = buf[6 * G + g], k = buf[7 * G + g];
    const int caller_g = src ? src[g] : g;
    if (int rc = check_group_sizes(m, n, k, caller_g, err)) return rc;
    if (g % sm100::kGroupsPerLaunch == 0) tiles = 0;
    tiles += sm100::group_tiles(m, n);
    if (tiles > kMaxTilesPerLaunch)
      return err.set(FL_ERR_VALUE, "group %d: more than %lld tiles of %dx%d in one launch of up to %d groups",
                     caller_g, (long long)kMaxTilesPerLaunch, sm100::kTileA, sm100::kTileB, sm100::kGroupsPerLaunch);
  }
  for (int g0 = 0; g0 < G; g0 += sm100::kGroupsPerLaunch) {
    const int gc = G - g0 < sm100::kGroupsPerLaunch ? G - g0 : sm100::kGroupsPerLaunch;
    const int rc = gc <= sm100::kGroupsSmall
                       ? launch_chunk<sm100::kGroupsSmall>(dev, 0, buf, G, g0, gc, stream, err)
                       : launch_chunk<sm100::kGroupsPerLaunch>(dev, 1, buf, G, g0, gc, stream, err);
    if (rc) return rc;
  }
  return FL_OK;
}

}  // namespace fl
