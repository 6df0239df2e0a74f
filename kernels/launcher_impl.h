// Internal to the launcher: driver entry points, per-device state, error reporting.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "launcher.h"
#include "sm90/plan/planner.h"
#include "sm90/plan/skinny.h"

namespace fl {

// Driver functions, looked up through the runtime at first use: the extension does not link
// libcuda, so it builds and imports on machines without a GPU driver.
struct Driver {
  CUresult (*launch_kernel_ex)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;
  CUresult (*tensor_map_encode_tiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                      const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                      CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                      CUtensorMapFloatOOBfill) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
  // Contexts: the launcher runs in the device's primary context and puts the caller's back after, so
  // that a thread's current context (possibly none) is what it was (cudaSetDevice would create a
  // context on the device it restores, in a thread that never used it).
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_get_current)(CUcontext*) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
};

// CUDA errors that only a kernel's execution (or the hardware, or the MPS server) raises and that
// leave the context unusable: every later CUDA call returns them, and the CUDA headers say the
// process must be terminated and relaunched. A host call that returns one did not cause it: it
// reports the state of the context. Runtime and driver share these numbers.
inline bool is_sticky(int code) {
  switch (code) {
    case cudaErrorECCUncorrectable:
    case cudaErrorContained:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

// Message sink for the C ABI: set() formats into the caller's buffer and returns the code. A failed
// CUDA call also leaves its error number in cuda_error (fl_launch names errors left by earlier work
// by it); `queued` counts the kernels the call has queued so far.
struct Error {
  char* buf;
  size_t len;
  int cuda_error = 0;
  int queued = 0;
  __attribute__((format(printf, 3, 4))) int set(int code, const char* fmt, ...) {
    if (buf && len) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(buf, len, fmt, ap);
      va_end(ap);
    }
    return code;
  }
  // A failed runtime call. The runtime also keeps the error as the thread's last error, where a later
  // unrelated check (cudaGetLastError after someone else's launch) would find and report it: it is
  // taken back here, except a sticky one, which no call clears.
  int cuda(cudaError_t rc, const char* what, const char* file, int line) {
    cuda_error = (int)rc;
    if (!is_sticky((int)rc)) (void)cudaGetLastError();
    return set(FL_ERR_CUDA, "%s failed: %s (%s) at %s:%d", what, cudaGetErrorString(rc), cudaGetErrorName(rc), file,
               line);
  }
  int driver(const Driver& drv, CUresult rc, const char* what, const char* file, int line) {
    cuda_error = (int)rc;
    const char* msg = nullptr;
    if (!drv.get_error_string || drv.get_error_string(rc, &msg) != CUDA_SUCCESS || !msg) msg = "unknown error";
    return set(FL_ERR_CUDA, "%s failed: %s (CUresult %d) at %s:%d", what, msg, (int)rc, file, line);
  }
};

#define FL_CUDA_TRY(err, call)                                           \
  do {                                                                   \
    cudaError_t fl_rc_ = (call);                                         \
    if (fl_rc_ != cudaSuccess) return (err).cuda(fl_rc_, #call, __FILE__, __LINE__); \
  } while (0)

#define FL_DRV_TRY(err, drv, call)                                                  \
  do {                                                                              \
    CUresult fl_rc_ = (call);                                                       \
    if (fl_rc_ != CUDA_SUCCESS) return (err).driver((drv), fl_rc_, #call, __FILE__, __LINE__); \
  } while (0)

// A kernel launch (a driver call that queues a kernel), counted in err.queued when it succeeds.
#define FL_LAUNCH_TRY(err, drv, call)    \
  do {                                   \
    FL_DRV_TRY(err, drv, call);          \
    ++(err).queued;                      \
  } while (0)

// A tensor map for a [rows, row_bytes] byte matrix at `base` (rows `row_bytes` apart) with a
// (box_bytes x box_rows) box; `promo`: how much L2 fetches from memory around each line a box misses.
inline int encode_byte_map(const Driver& drv, CUtensorMap* map, void* base, uint64_t row_bytes, uint64_t rows,
                           uint32_t box_bytes, uint32_t box_rows, CUtensorMapSwizzle swizzle, Error& err,
                           CUtensorMapL2promotion promo = CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
  const cuuint64_t dims[2] = {row_bytes, rows};
  const cuuint64_t strides[1] = {row_bytes};
  const cuuint32_t box[2] = {box_bytes, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  FL_DRV_TRY(err, drv,
             drv.tensor_map_encode_tiled(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, base, dims, strides, box, elem_strides,
                                         CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promo,
                                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return FL_OK;
}

// A template for such a map: the kernels rewrite address, extents and stride on the device, so a
// template depends on the box and swizzle alone.
inline int encode_byte_map_template(const Driver& drv, CUtensorMap* map, uint32_t box_bytes, uint32_t box_rows,
                                    CUtensorMapSwizzle swizzle, Error& err,
                                    CUtensorMapL2promotion promo = CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
  void* placeholder = reinterpret_cast<void*>(uintptr_t{1} << 20);  // any 1024-byte aligned address
  return encode_byte_map(drv, map, placeholder, box_bytes, box_rows, box_bytes, box_rows, swizzle, err, promo);
}

// The driver handle of kernel `sym`, allowed `smem_bytes` of dynamic shared memory (0: the default).
inline int kernel_handle(const void* sym, uint32_t smem_bytes, CUfunction* fn, Error& err) {
  if (smem_bytes)
    FL_CUDA_TRY(err, cudaFuncSetAttribute(sym, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes));
  cudaFunction_t f = nullptr;
  FL_CUDA_TRY(err, cudaGetFuncBySymbol(&f, sym));
  *fn = reinterpret_cast<CUfunction>(f);
  return FL_OK;
}

// A launch configuration with programmatic stream serialisation (PDL) through `attr`, one
// dimension of `threads`; a launch sets grid size, shared memory and stream.
inline void init_launch_config(CUlaunchConfig* cfg, CUlaunchAttribute* attr, unsigned threads) {
  attr->id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr->value.programmaticStreamSerializationAllowed = 1;
  std::memset(cfg, 0, sizeof(*cfg));
  cfg->gridDimY = cfg->gridDimZ = 1;
  cfg->blockDimX = threads;
  cfg->blockDimY = cfg->blockDimZ = 1;
  cfg->attrs = attr;
  cfg->numAttrs = 1;
}

// The size checks every architecture shares (M, N, K extents, K a multiple of 64), group g. M and N
// may be 0 (an empty group) where min_mn is 0: fl_launch's check of the caller's groups; the
// architectures' launch functions see non-empty groups only (fl_launch leaves the empty ones out).
inline int check_group_sizes(int64_t m, int64_t n, int64_t k, int g, Error& err, int64_t min_mn = 1) {
  if (m < min_mn || n < min_mn || k < kKMultiple || k % kKMultiple || m > kMaxExtent || n > kMaxExtent ||
      k > kMaxExtent)
    return err.set(FL_ERR_VALUE,
                   "group %d: sizes must be m, n in %lld..%lld and k a positive multiple of %lld up to %lld, "
                   "got m=%lld n=%lld k=%lld",
                   g, (long long)min_mn, (long long)kMaxExtent, (long long)kKMultiple,
                   (long long)(kMaxExtent - kKMultiple + 1), (long long)m, (long long)n, (long long)k);
  return FL_OK;
}

// Device memory for one call, from the caller's allocator or else the stream-ordered CUDA allocator.
struct Workspace {
  void* ptr = nullptr;
  const fl_allocator* alloc = nullptr;
  int acquire(const fl_allocator* a, size_t bytes, cudaStream_t stream, Error& err) {
    alloc = a;
    if (bytes == 0) return FL_OK;
    if (alloc) {
      char why[768] = "";
      fl_alloc_failure failure{FL_ERR_CUDA, 0, why, sizeof(why)};
      ptr = alloc->alloc(bytes, stream, alloc->ctx, &failure);
      if (ptr) return FL_OK;
      why[sizeof(why) - 1] = 0;
      err.cuda_error = failure.cuda_error;
      const int status = failure.status == FL_ERR_OUT_OF_MEMORY ? FL_ERR_OUT_OF_MEMORY : FL_ERR_CUDA;
      return err.set(status, "could not allocate a workspace of %zu bytes: %s", bytes,
                     why[0] ? why : "the allocator gave no reason");
    }
    const cudaError_t rc = cudaMallocAsync(&ptr, bytes, stream);
    if (rc == cudaSuccess) return FL_OK;
    ptr = nullptr;
    err.cuda(rc, "cudaMallocAsync", __FILE__, __LINE__);  // (takes the error back from the runtime)
    return err.set(rc == cudaErrorMemoryAllocation ? FL_ERR_OUT_OF_MEMORY : FL_ERR_CUDA,
                   "could not allocate a workspace of %zu bytes: cudaMallocAsync failed: %s (%s)", bytes,
                   cudaGetErrorString(rc), cudaGetErrorName(rc));
  }
  // After the work that uses it was queued on `stream`.
  void release(cudaStream_t stream) {
    if (!ptr) return;
    if (alloc)
      alloc->release(ptr, stream, alloc->ctx);
    else
      cudaFreeAsync(ptr, stream);
    ptr = nullptr;
  }
};

struct Sm90State {
  // The GEMM, by build (kernels/sm90/plan/planner.h kBuildMain, kBuildNarrow, kBuildMid: LaunchPlan::build), then [0][.] for C
  // rows 16-byte aligned, [1][.] the same kernels compiled for C rows at any alignment (N % 8 != 0 or C off
  // 16 bytes), taken by launches that hold such a group (their epilogue stays out of the others' code), then
  // by the groups a launch holds: [.][0] up to kGroupsSmall, [.][1] kGroupsMid, [.][2] kGroupsLarge, [.][3]
  // kGroupsPerLaunch (the parameter block grows with them, and a launch's cost with it:
  // tools/launch_latency.cu).
  CUfunction fn[sm90::kNumBuilds][2][4] = {};
  CUfunction convert_fn[4] = {};  // the A conversion, by groups as fn's last index ([0]: convert_a_small)
  // the masked form's GEMM (nvfp4_group_gemm_masked): [0 main build, 1 narrow build][parameter-block size, as fn's]
  CUfunction masked_fn[2][4] = {};
  CUfunction half_fn[2] = {};     // the GEMM on half tiles (kernels/sm90/plan/planner.h kHalfBlockN), up to kGroupsSmall groups
  // launches of narrow tiles only with no conversion kernel (kernels/sm90/gemm.cuh direct_a_producer): the task form's
  // by aligned C or not (as fn's [.][any]) and the masked form's
  CUfunction direct_fn[2] = {};
  CUfunction masked_direct_fn = {};
  CUfunction red_fn = {};         // reduced tiles (kernels/sm90/plan/planner.h share_reduce), up to kGroupsSmall groups: the GEMM
  CUfunction reduce_fn = {};      // ... and the kernel that sums their parts into C
  // launches of few A rows per group (kernels/sm90/plan/skinny.h), by build and lanes per row
  CUfunction skinny_fn[sm90::kNumSkinnyBuilds][sm90::kNumSkinnyLanes] = {};
  CUfunction skinny_masked_fn[sm90::kNumSkinnyBuilds][sm90::kNumSkinnyLanes] = {};  // ... of the masked form
  // FASTLAUNCH_SM90_WCAP / _SHARE / _HALF / _NARROW / _MID (experiments, tests), read at set-up
  sm90::PlanForce force;
  // FASTLAUNCH_SM90_SKINNY / _SKINNY_SPLIT / _SKINNY_LANES (experiments, tests): the skinny kernel
  // (kernels/sm90/plan/skinny.h) 1 wherever a launch may take it, 2 never, 0 the launcher's choice; its K split and lanes
  // per B row, 0 the planner's
  int skinny = 0;
  int skinny_split = 0;
  int skinny_lanes = 0;
  int only = 0;        // FASTLAUNCH_SM90_ONLY (experiments, wrong results): 1 conversion, 2 GEMM
  int b_prefetch = 1;  // FASTLAUNCH_SM90_PREFETCH (0 turns it off): MaskedParams::b_prefetch
  int direct = 0;      // FASTLAUNCH_SM90_DIRECT=1: the direct-A kernels where a launch may take them (0: never)
  // FASTLAUNCH_SM90_ROWS (experiments, tests): the task form's launches on the device schedule
  // (kernels/sm90/plan/row_plan.h) 1 wherever they fit, 2 never, 0 (=first) where the memo holds no plan, but at
  // the second call of a launch's sizes
  int rows = 0;
  uint64_t* trace = nullptr;  // FASTLAUNCH_SM90_TRACE (experiments): device buffer for the GEMM's trace points
  CUlaunchAttribute attr[1];  // programmatic stream serialisation
  CUlaunchConfig config;      // prebuilt; a launch sets grid size, shared memory and stream
  CUlaunchConfig convert_config;
  CUlaunchConfig reduce_config;
  CUlaunchConfig skinny_config;
  alignas(64) CUtensorMap tmpl_b;  // packed B box (128 rows x 32 bytes)
};

struct Sm100State {
  CUfunction fn[2][2] = {};   // [0: up to kGroupsSmall groups, 1: up to kGroupsPerLaunch][0: one tile per CTA, 1: persistent]
  CUlaunchAttribute attr[1];  // programmatic stream serialisation
  CUlaunchConfig config;      // prebuilt; a launch sets grid size and stream
  alignas(64) CUtensorMap tmpl;
};

struct DeviceState;
// An architecture's launch of buf's G groups (none empty); src (or null): the caller's number of each
// group, for messages.
using LaunchFn = int (*)(const DeviceState&, const int64_t* buf, int G, const int* src, cudaStream_t,
                         const fl_allocator*, Error&);
// ... of the masked form's groups (kernels/launcher.h fl_masked_args)
using LaunchMaskedFn = int (*)(const DeviceState&, const fl_masked_args&, cudaStream_t, const fl_allocator*, Error&);

struct DeviceState {
  std::atomic<int> status{-1};  // -1 not initialised, else the fl_status of initialisation
  char message[1024] = {0};     // initialisation error, repeated on every later call
  char note[512] = {0};         // what a successful set-up found (the sm_100a self-check's outcome), for fl_setup_device
  int device = -1;              // the CUDA device index
  CUcontext ctx = nullptr;      // the device's primary context (retained for the life of the process)
  int cc_major = 0, cc_minor = 0, sm_count = 0;
  Driver drv;
  LaunchFn launch = nullptr;  // the architecture's launch function, set by init_device
  LaunchMaskedFn launch_masked = nullptr;  // ... of the masked form (null: the architecture has none)
  Sm90State sm90;
  Sm100State sm100;
};

int sm90_init(DeviceState& dev, Error& err);
int sm90_launch(const DeviceState& dev, const int64_t* buf, int num_groups, const int* src, cudaStream_t stream,
                const fl_allocator* alloc, Error& err);
int sm90_launch_masked(const DeviceState& dev, const fl_masked_args& args, cudaStream_t stream,
                       const fl_allocator* alloc, Error& err);
int sm100_init(DeviceState& dev, Error& err);  // kernels/sm100/launch.cu (built for sm_100a)
int sm100_launch(const DeviceState& dev, const int64_t* buf, int num_groups, const int* src, cudaStream_t stream,
                 const fl_allocator* alloc, Error& err);

}  // namespace fl
