// Host side of the sm_100a kernel: one-time set-up per device and the per-call launch.
// Compiled for sm_100a only (setup.py builds this file apart from the sm_90a sources).
#include <cstring>

#include "launcher_impl.h"
#include "sm100/gemm.cuh"

namespace fl {
namespace {

using sm100::Params;
static_assert(sizeof(Params<sm100::kGroupsPerLaunch>) <= 32764, "kernel parameters exceed the 32764-byte limit");

template <int MAXG, bool kPersistent>
int prepare(CUfunction* fn, Error& err) {
  return kernel_handle(reinterpret_cast<const void*>(&sm100::nvfp4_group_gemm<MAXG, kPersistent>), sm100::kSmemBytes,
                       fn, err);
}

template <int MAXG>
int launch_chunk(const DeviceState& dev, int which, const int64_t* buf, int G, int g0, int gc, cudaStream_t stream,
                 Error& err) {
  Params<MAXG> p;
  p.wait_cycles = sm100::kWaitCycles;
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
  void* args[1] = {&p};
  FL_LAUNCH_TRY(err, dev.drv, dev.drv.launch_kernel_ex(&cfg, dev.sm100.fn[which][one_tile ? 0 : 1], args, nullptr));
  return FL_OK;
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
  return encode_byte_map_template(dev.drv, &st.tmpl, sm100::kBlockK / 2, sm100::kTileB, CU_TENSOR_MAP_SWIZZLE_128B,
                                  err);
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
