// Host side of the sm_100a kernel: one-time set-up per device (with the kernel's self-check) and the per-call
// launch. Compiled for sm_100a only (setup.py builds this file apart from the sm_90a sources).
#include <cstdlib>
#include <cstring>

#include "launcher_impl.h"
#include "sm100/gemm.cuh"
#include "sm100/self_check_run.h"

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
  static_assert(ck::kNumGroups <= sm100::kGroupsSmall, "the self-check's groups fit the small parameter block");
  const auto launch = [&dev](int i, const int64_t* buf, int G, cudaStream_t stream, Error& launch_err) {
    const ck::LaunchSpec& ls = ck::kLaunches[i];
    const Pick pick{ls.persistent, ls.grid, kCheckWaitCycles};
    return ls.large ? launch_chunk<sm100::kGroupsPerLaunch>(dev, 1, buf, G, 0, G, stream, launch_err, &pick)
                    : launch_chunk<sm100::kGroupsSmall>(dev, 0, buf, G, 0, G, stream, launch_err, &pick);
  };
  return ck::run(dev.device, kCheckSeconds, launch, dev.note, sizeof(dev.note), err);
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
