// Host side of the sm_90a kernel: one-time set-up per device and the per-call launch.
#include <cstdlib>
#include <cstring>

#include "launcher_impl.h"
#include "sm90_group_gemm.cuh"

namespace fl {
namespace {

using sm90::Params;

// A template map for a [rows, row_bytes] byte matrix with a (row_bytes_box x rows_box) box. The
// kernel rewrites address, extents and stride, so the template depends on the box alone.
int encode_template(const Driver& drv, CUtensorMap* map, uint32_t box_bytes, uint32_t box_rows, Error& err) {
  const cuuint64_t dims[2] = {box_bytes, box_rows};
  const cuuint64_t strides[1] = {box_bytes};
  const cuuint32_t box[2] = {box_bytes, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  void* placeholder = reinterpret_cast<void*>(uintptr_t{1} << 20);  // any 16-byte aligned address
  FL_DRV_TRY(err, drv,
             drv.tensor_map_encode_tiled(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, placeholder, dims, strides, box,
                                         elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return FL_OK;
}

template <int MAXG, int W, int DIAG = 0>
int prepare(CUfunction* fn, Error& err) {
  const void* sym = reinterpret_cast<const void*>(&sm90::nvfp4_group_gemm<MAXG, W, DIAG>);
  FL_CUDA_TRY(err, cudaFuncSetAttribute(sym, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm90::kSmemBytes));
  cudaFunction_t f = nullptr;
  FL_CUDA_TRY(err, cudaGetFuncBySymbol(&f, sym));
  *fn = reinterpret_cast<CUfunction>(f);
  return FL_OK;
}

template <int MAXG>
int launch_chunk(const DeviceState& dev, int which, const int64_t* buf, int G, int g0, int gc, cudaStream_t stream,
                 Error& err) {
  Params<MAXG> p;
  std::memcpy(&p.tmpl_a, &dev.sm90.tmpl_a, sizeof(CUtensorMap));
  std::memcpy(&p.tmpl_b, &dev.sm90.tmpl_b, sizeof(CUtensorMap));
  const int wi = dev.sm90.forced_width >= 0
                     ? dev.sm90.forced_width
                     : sm90::plan_width(buf + 5 * G + g0, buf + 6 * G + g0, buf + 7 * G + g0, gc, dev.sm_count);
  const int width = sm90::kWidths[wi];
  CUfunction fn = dev.sm90.fn[wi][which];
  if (dev.sm90.diag) {
    if (MAXG != sm90::kGroupsSmall || (width != 128 && width != 256))
      return err.set(FL_ERR_VALUE, "FASTLAUNCH_SM90_DIAG needs <= %d groups and FASTLAUNCH_SM90_WIDTH=128 or 256",
                     sm90::kGroupsSmall);
    fn = dev.sm90.diag_fn[dev.sm90.diag][width == 256];
  }
  int64_t tiles = 0;
  for (int i = 0; i < gc; ++i) {
    const int g = g0 + i;
    const int64_t m = buf[5 * G + g], n = buf[6 * G + g], k = buf[7 * G + g];
    tiles += sm90::tiles(m, n, width);
    sm90::Group& gr = p.groups[i];
    gr.a = reinterpret_cast<const uint8_t*>(buf[0 * G + g]);
    gr.b = reinterpret_cast<const uint8_t*>(buf[1 * G + g]);
    gr.c = reinterpret_cast<__half*>(buf[2 * G + g]);
    gr.sfa = reinterpret_cast<const uint8_t*>(buf[3 * G + g]);
    gr.sfb = reinterpret_cast<const uint8_t*>(buf[4 * G + g]);
    gr.m = (int32_t)m;
    gr.n = (int32_t)n;
    gr.k = (int32_t)k;
    gr.tile_m = width;
    gr.pad_ = 0;
    gr.tile_end = (int32_t)tiles;
  }
  p.num_groups = gc;
  p.num_tiles = (int32_t)tiles;

  CUlaunchConfig cfg = dev.sm90.config;  // attrs point into dev, which outlives the call
  cfg.gridDimX = (unsigned)sm90::grid_size(tiles, dev.sm_count);
  cfg.hStream = reinterpret_cast<CUstream>(stream);
  void* args[1] = {&p};
  FL_DRV_TRY(err, dev.drv, dev.drv.launch_kernel_ex(&cfg, fn, args, nullptr));
  return FL_OK;
}

}  // namespace

template <int I>
int prepare_widths(DeviceState& dev, Error& err) {
  if constexpr (I < sm90::kNumWidths) {
    if (int rc = prepare<sm90::kGroupsSmall, sm90::kWidths[I]>(&dev.sm90.fn[I][0], err)) return rc;
    if (int rc = prepare<sm90::kGroupsPerLaunch, sm90::kWidths[I]>(&dev.sm90.fn[I][1], err)) return rc;
    return prepare_widths<I + 1>(dev, err);
  }
  return FL_OK;
}

template <int DIAG>
int prepare_diag(DeviceState& dev, Error& err) {
  if (int rc = prepare<sm90::kGroupsSmall, 128, DIAG>(&dev.sm90.diag_fn[DIAG][0], err)) return rc;
  return prepare<sm90::kGroupsSmall, 256, DIAG>(&dev.sm90.diag_fn[DIAG][1], err);
}

int sm90_init(DeviceState& dev, Error& err) {
  static_assert(sm90::kNumWidths <= 8, "Sm90State::fn holds 8 widths");
  Sm90State& st = dev.sm90;
  st.attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  st.attr[0].value.programmaticStreamSerializationAllowed = 1;
  std::memset(&st.config, 0, sizeof(st.config));
  st.config.gridDimY = st.config.gridDimZ = 1;
  st.config.blockDimX = sm90::kThreads;
  st.config.blockDimY = st.config.blockDimZ = 1;
  st.config.sharedMemBytes = sm90::kSmemBytes;
  st.config.attrs = st.attr;
  st.config.numAttrs = 1;
  if (int rc = prepare_widths<0>(dev, err)) return rc;
  if (const char* env = std::getenv("FASTLAUNCH_SM90_DIAG")) {
    const int d = std::atoi(env);
    int rc = FL_OK;
    switch (d) {
      case 1: rc = prepare_diag<1>(dev, err); break;
      case 2: rc = prepare_diag<2>(dev, err); break;
      case 3: rc = prepare_diag<3>(dev, err); break;
      case 4: rc = prepare_diag<4>(dev, err); break;
      case 8: rc = prepare_diag<8>(dev, err); break;
      default: return err.set(FL_ERR_VALUE, "FASTLAUNCH_SM90_DIAG=%s: expected 1, 2, 3, 4 or 8", env);
    }
    if (rc) return rc;
    dev.sm90.diag = d;
  }
  if (const char* env = std::getenv("FASTLAUNCH_SM90_WIDTH")) {
    for (int i = 0; i < sm90::kNumWidths; ++i)
      if (std::atoi(env) == sm90::kWidths[i]) dev.sm90.forced_width = i;
    if (dev.sm90.forced_width < 0) return err.set(FL_ERR_VALUE, "FASTLAUNCH_SM90_WIDTH=%s is not a compiled width", env);
  }
  if (int rc = encode_template(dev.drv, &dev.sm90.tmpl_a, sm90::kBlockK / 2, sm90::kBlockM, err)) return rc;
  return encode_template(dev.drv, &dev.sm90.tmpl_b, sm90::kBlockK / 2, sm90::kBlockN, err);
}

int sm90_launch(const DeviceState& dev, const int64_t* buf, int G, cudaStream_t stream, Error& err) {
  // Check every limit before the first launch, so a bad group launches nothing.
  int64_t tiles = 0;
  for (int g = 0; g < G; ++g) {
    const int64_t m = buf[5 * G + g], n = buf[6 * G + g], k = buf[7 * G + g];
    if (m < 1 || n < 1 || k < kKMultiple || k % kKMultiple || m > kMaxExtent || n > kMaxExtent || k > kMaxExtent)
      return err.set(FL_ERR_VALUE, "group %d: unsupported sizes m=%lld n=%lld k=%lld", g, (long long)m,
                     (long long)n, (long long)k);
    if (g % sm90::kGroupsPerLaunch == 0) tiles = 0;
    tiles += sm90::tiles(m, n, sm90::kWidths[0]);  // the narrowest tiles: the most a launch can have
    if (tiles > kMaxTilesPerLaunch)
      return err.set(FL_ERR_VALUE, "group %d: more than %lld tiles of %dx%d in one launch of up to %d groups", g,
                     (long long)kMaxTilesPerLaunch, sm90::kBlockM, sm90::kBlockN, sm90::kGroupsPerLaunch);
  }
  for (int g0 = 0; g0 < G; g0 += sm90::kGroupsPerLaunch) {
    const int gc = G - g0 < sm90::kGroupsPerLaunch ? G - g0 : sm90::kGroupsPerLaunch;
    const int rc = gc <= sm90::kGroupsSmall
                       ? launch_chunk<sm90::kGroupsSmall>(dev, 0, buf, G, g0, gc, stream, err)
                       : launch_chunk<sm90::kGroupsPerLaunch>(dev, 1, buf, G, g0, gc, stream, err);
    if (rc) return rc;
  }
  return FL_OK;
}

}  // namespace fl
