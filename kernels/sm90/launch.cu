// Host side of the sm_90a kernels: one-time set-up per device and the per-call launches (the A
// conversion into the workspace, which also writes the groups' B tensor maps when they are not kernel
// parameters, then the GEMM).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <utility>
#include <vector>

#include "sm90/plan/group_cuts.h"
#include "sm90/plan/plan_memo.h"
#include "sm90/plan/row_plan.h"
#include "launcher_impl.h"
#include "common/keyed_memo.h"
#include "common/recent.h"
#include "sm90/convert_a.cuh"
#include "sm90/gemm.cuh"
#include "sm90/reduce.cuh"
#include "sm90/skinny.cuh"

namespace fl {
namespace {

using sm90::Params;

constexpr int64_t kMaxWorkspaceBytes = int64_t{1} << 48;  // far beyond any GPU; keeps the sums in int64
constexpr int64_t kMaxUnitsPerLaunch = (int64_t{1} << 31) - 1;

template <int MAXG, bool HALF = false, bool ANY = false, bool RED = false, int BUILD = sm90::kBuildMain>
int prepare(CUfunction* fn, Error& err) {
  return kernel_handle(reinterpret_cast<const void*>(&sm90::nvfp4_group_gemm<MAXG, HALF, ANY, RED, BUILD>),
                       sm90::kSmemBytes, fn, err);
}

// One build of the GEMM for each parameter-block size (kGroupsSmall, kGroupsMid, kGroupsLarge,
// kGroupsPerLaunch), indexed as Sm90State::fn[BUILD][any].
template <bool ANY, int BUILD>
int prepare_sizes(CUfunction (&fn)[4], Error& err) {
  if (int rc = prepare<sm90::kGroupsSmall, false, ANY, false, BUILD>(&fn[0], err)) return rc;
  if (int rc = prepare<sm90::kGroupsMid, false, ANY, false, BUILD>(&fn[1], err)) return rc;
  if (int rc = prepare<sm90::kGroupsLarge, false, ANY, false, BUILD>(&fn[2], err)) return rc;
  return prepare<sm90::kGroupsPerLaunch, false, ANY, false, BUILD>(&fn[3], err);
}

// Every build's kernels, aligned C and C at any alignment: Sm90State::fn[BUILD].
template <int BUILD>
int prepare_build(CUfunction (&fn)[2][4], Error& err) {
  if (int rc = prepare_sizes<false, BUILD>(fn[0], err)) return rc;
  return prepare_sizes<true, BUILD>(fn[1], err);
}

// The skinny kernel's builds (kernels/sm90/plan/skinny.h: kSkinnyBuilds' row counts by kSkinnyLanes' lanes per row), each
// allowed the most shared memory a launch may ask of it; MASKED: the masked form's (skinny_gemm_masked).
template <bool MASKED, int I = 0>
int prepare_skinny(CUfunction (&fn)[sm90::kNumSkinnyBuilds][sm90::kNumSkinnyLanes], Error& err) {
  if constexpr (I == sm90::kNumSkinnyBuilds * sm90::kNumSkinnyLanes) {
    return FL_OK;
  } else {
    constexpr int b = I / sm90::kNumSkinnyLanes, l = I % sm90::kNumSkinnyLanes;
    constexpr int rows = sm90::kSkinnyBuilds[b], lanes = sm90::kSkinnyLanes[l];
    const void* sym = MASKED ? reinterpret_cast<const void*>(&sm90::skinny_gemm_masked<rows, lanes>)
                             : reinterpret_cast<const void*>(&sm90::skinny_gemm<rows, lanes>);
    if (int rc = kernel_handle(sym, (uint32_t)sm90::kSkinnySmemMax, &fn[b][l], err)) return rc;
    return prepare_skinny<MASKED, I + 1>(fn, err);
  }
}

// The masked form's GEMM for each parameter-block size (Sm90State::masked_fn[build]).
template <int BUILD>
int prepare_masked(CUfunction (&fn)[4], Error& err) {
  const void* syms[4] = {reinterpret_cast<const void*>(&sm90::nvfp4_group_gemm_masked<sm90::kGroupsSmall, BUILD>),
                         reinterpret_cast<const void*>(&sm90::nvfp4_group_gemm_masked<sm90::kGroupsMid, BUILD>),
                         reinterpret_cast<const void*>(&sm90::nvfp4_group_gemm_masked<sm90::kGroupsLarge, BUILD>),
                         reinterpret_cast<const void*>(&sm90::nvfp4_group_gemm_masked<sm90::kGroupsPerLaunch, BUILD>)};
  for (int i = 0; i < 4; ++i)
    if (int rc = kernel_handle(syms[i], sm90::kSmemBytes, &fn[i], err)) return rc;
  return FL_OK;
}

template <int MAXG>
int prepare_convert(CUfunction* fn, Error& err) {
  return kernel_handle(reinterpret_cast<const void*>(&sm90::convert_a<MAXG>), 0, fn, err);
}

// The per-thread memo of plans (kernels/sm90/plan/plan_memo.h), and a launch's plan from it.
sm90::PlanMemo<sm90::kPlanMemoEntries>& plan_memo() {
  thread_local sm90::PlanMemo<sm90::kPlanMemoEntries> memo;
  return memo;
}
const sm90::LaunchPlan& launch_plan(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count,
                                    const sm90::PlanForce& force) {
  return plan_memo().get(m, n, k, groups, sm_count, force);
}

// Whether the per-thread memo holds the launch's plan (launch_plan would not plan).
bool plan_held(const int64_t* m, const int64_t* n, const int64_t* k, int groups, int sm_count,
               const sm90::PlanForce& force) {
  return plan_memo().holds(m, n, k, groups, sm_count, force);
}

// The tensor maps of one launch's fp16 A workspace (`rows` rows of `pitch_bytes`, 128-byte swizzle),
// one per tile width (box: that many rows x 128 bytes), then the narrow build's (kernels/sm90/plan/planner.h kNarrowN rows).
// Encoded on the host, kept per thread for the last workspaces: the caching allocator hands the same block back
// for the same sizes, so most calls encode nothing. As many as the memo of plans keeps: calls whose rows change
// every call (sizes drawn anew, on the device schedule: kernels/sm90/plan/row_plan.h) spread over a dozen extents
// (8 groups of 1-512 rows: 99% of draws in eleven, 1280-3072 rows), of which 4 entries would hold the maps of 45% of
// the calls and 32 nearly all (the extents alone, one workspace block, simulated).
int a16_maps(const Driver& drv, CUtensorMap* out, void* base, int64_t pitch_bytes, int64_t rows, Error& err) {
  struct Entry {
    void* base = nullptr;
    int64_t pitch = 0, rows = 0;
    alignas(64) CUtensorMap maps[sm90::kNumA16Maps];
  };
  thread_local Recent<Entry, sm90::kPlanMemoEntries> cache;
  const Entry* hit =
      cache.find([&](const Entry& e) { return e.base == base && e.pitch == pitch_bytes && e.rows == rows; });
  if (!hit) {
    Entry& e = cache.oldest();
    e.base = nullptr;  // invalid until encoded
    for (int i = 0; i < sm90::kNumA16Maps; ++i)
      if (int rc = encode_byte_map(drv, &e.maps[i], base, (uint64_t)pitch_bytes, (uint64_t)rows, sm90::kA16RowBytes,
                                   i < sm90::kNumWidths ? sm90::kWidths[i] : sm90::kNarrowN,
                                   CU_TENSOR_MAP_SWIZZLE_128B, err))
        return rc;
    e.base = base, e.pitch = pitch_bytes, e.rows = rows;
    hit = &e;
  }
  std::memcpy(out, hit->maps, sizeof(hit->maps));
  return FL_OK;
}

// B's maps (and their template) have L2 fetch 128 bytes around a miss, four K steps of a B row (a box
// reads 32 bytes of each of its rows per step). At 256 bytes, the setting of every other map, benchmarks
// 1 / 2 ran 1.8% / 1.1% slower, and at 64 bytes or none as slow; benchmarks 3 and 4, the task's test
// shapes and random shapes alike.
constexpr CUtensorMapL2promotion kBPromotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;

// Tensor maps of one launch's groups (in the plan's order), group i's over key[3 i] (its address), key[3 i + 1]
// rows of key[3 i + 2] bytes, each with a box of `box_rows` rows x `box_bytes`, encoded on the host. Kept per
// thread and per KIND (one memo per operand), each group's map by those three numbers and the box
// (kernels/common/keyed_memo.h, 512 maps): a serving loop calls with the same weights and outputs again and
// again, or with weight sets in turn (a model's layers), and a hit costs a lookup per group.
template <int KIND>
int group_maps(const Driver& drv, CUtensorMap* out, const int64_t* key, int groups, uint32_t box_bytes,
               uint32_t box_rows, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promo, Error& err) {
  struct Map {
    alignas(64) CUtensorMap map;
  };
  thread_local KeyedMemo<Map, 128> memo;
  for (int i = 0; i < groups; ++i) {
    const MemoKey k{{(uint64_t)key[3 * i], (uint64_t)key[3 * i + 1], (uint64_t)key[3 * i + 2], box_rows}};
    if (const Map* hit = memo.find(k)) {
      out[i] = hit->map;
      continue;
    }
    Map& e = memo.insert(k);
    if (int rc = encode_byte_map(drv, &e.map, reinterpret_cast<void*>(key[3 * i]), (uint64_t)key[3 * i + 2],
                                 (uint64_t)key[3 * i + 1], box_bytes, box_rows, swizzle, err, promo)) {
      memo.forget(k);
      return rc;
    }
    out[i] = e.map;
  }
  return FL_OK;
}

// The B tensor maps (box `box_rows` rows x 32 bytes: 128, or 64 for half tiles) of groups g0 + order[i].
int b_maps(const Driver& drv, CUtensorMap* out, const int64_t* buf, int G, int g0, const int* order, int groups,
           int box_rows, Error& err) {
  int64_t key[3 * sm90::kGroupsSmall];
  for (int i = 0; i < groups; ++i) {
    const int g = g0 + order[i];
    key[3 * i] = buf[1 * G + g], key[3 * i + 1] = buf[6 * G + g], key[3 * i + 2] = buf[7 * G + g] / 2;
  }
  return group_maps<0>(drv, out, key, groups, sm90::kBlockK / 2, (uint32_t)box_rows, CU_TENSOR_MAP_SWIZZLE_NONE,
                       kBPromotion, err);
}

// The C tensor maps of groups g0 + order[i] (fp16 C as bytes: m rows of 2 n; box one epilogue pass, 64 rows x 128
// bytes, in the epilogue buffer's 128-byte swizzle), for launches whose C rows are all aligned.
int c_maps(const Driver& drv, CUtensorMap* out, const int64_t* buf, int G, int g0, const int* order, int groups,
           Error& err) {
  int64_t key[3 * sm90::kGroupsSmall];
  for (int i = 0; i < groups; ++i) {
    const int g = g0 + order[i];
    key[3 * i] = buf[2 * G + g], key[3 * i + 1] = buf[5 * G + g], key[3 * i + 2] = buf[6 * G + g] * 2;
  }
  return group_maps<1>(drv, out, key, groups, 128, sm90::kEpiRows, CU_TENSOR_MAP_SWIZZLE_128B,
                       CU_TENSOR_MAP_L2_PROMOTION_NONE, err);
}

// Rows and largest K of the launch of groups g0 .. g0+gc-1.
void launch_extent(const int64_t* buf, int G, int g0, int gc, int64_t* rows, int64_t* kmax) {
  *rows = 0, *kmax = 0;
  for (int g = g0; g < g0 + gc; ++g) {
    *rows += buf[5 * G + g];
    if (buf[7 * G + g] > *kmax) *kmax = buf[7 * G + g];
  }
}

// Workspace bytes of one launch: its fp16 A, then one B tensor map per group, the flags, and, if the plan splits
// tiles, each CTA's partial sums (reduced tiles: every CTA's, counted as splits).
int max_ctas(int sm_count) { return sm_count < sm90::kMaxCtas ? sm_count : sm90::kMaxCtas; }
int64_t maps_bytes(int groups) { return round_up((int64_t)groups * sm90::kMapBytes, sm90::kWorkspaceAlign); }
// (the partial-sum flags of kMaxCtas CTAs, whatever the grid)
constexpr int64_t kFlagsBytes = sm90::kFlagWords * 8;
static_assert(kFlagsBytes % sm90::kWorkspaceAlign == 0, "the partial sums stay aligned");
// The GEMM's grid: the plan's, or for the masked form (masked) room for its split schedule over every SM
// (kernels/sm90/plan/row_schedule.h).
int gemm_grid(const sm90::LaunchPlan& plan, bool masked, int sm_count) {
  return masked ? sm90::row_grid(plan.ctas, plan.steps, max_ctas(sm_count)) : plan.ctas;
}

// (rows: of A in the workspace; the contiguous layout's launch holds its T rows once. The masked form's schedule may
// split tiles on any of its CTAs: their partial sums always have room. A task-form launch on the direct-A kernels
// (direct) that splits no tile reads nothing there: none.)
int64_t chunk_bytes(int64_t rows, int64_t kmax, int groups, int sm_count, const sm90::LaunchPlan& plan, bool masked,
                    bool direct = false) {
  if (direct && !masked && !plan.splits) return 0;
  const int64_t parts = masked ? gemm_grid(plan, true, sm_count) : plan.splits ? plan.ctas : 0;
  return (direct ? 0 : sm90::a16_launch_bytes(rows, kmax)) + maps_bytes(groups) + kFlagsBytes +
         parts * sm90::kPartialBytes;
}

// The masked form's device-side inputs of a call: each group's rows (masked_m), its scale (alpha, or null) and C's
// dtype; null for the task form. a_fp16: A is the caller's fp16 or bf16 (weight-only; a_bf16: bf16), each group's
// max_m rows after the last's, which the conversion permutes into the GEMM's K order (bf16 rounded to fp16; not
// scaled: the epilogue unscales by 2^14). offs (the contiguous layout, else null): every group planned at all the
// rows of one A and one C, its own from offs on the device (MaskedParams::offs), in one chunk of at most
// kGroupsPerLaunch groups whose conversion takes A's rows (fp16, bf16 or NVFP4) once.
struct MaskedCall {
  const int32_t* m;
  const float* alpha;
  bool bf16;
  bool a_fp16;  // A is the caller's fp16 or bf16 (a_bf16)
  bool a_bf16;
  const int32_t* offs;
};

// Whether a launch of gc groups with `plan` runs on the direct-A kernels (kernels/sm90/gemm.cuh direct_a_producer): one
// launch, no fp16 A in the workspace. Where every tile is a narrow tile of the narrow build (at most kNarrowN A
// rows) of up to kGroupsSmall groups, not in the contiguous layout, under FASTLAUNCH_SM90_DIRECT=1 (not with the
// experiments' FASTLAUNCH_SM90_ONLY).
bool direct_a(const Sm90State& st, const sm90::LaunchPlan& plan, int gc, const MaskedCall* masked) {
  if (!st.direct || st.only != 0 || gc > sm90::kGroupsSmall || plan.build != sm90::kBuildNarrow || plan.half ||
      plan.reduce || (masked && masked->offs))
    return false;
  for (int i = 0; i < gc; ++i)
    if (plan.group[i].mma_n > sm90::kNarrowN) return false;
  return true;
}

// The device-side inputs both masked kernels' parameters share (MaskedParams, MaskedSkinnyParams), for the groups
// from g0 on; the task form's (masked null): none.
template <class P>
void set_masked(P& mp, const MaskedCall* masked, int g0) {
  mp.masked_m = masked && masked->m ? masked->m + g0 : nullptr;
  mp.alpha = masked && masked->alpha ? masked->alpha + g0 : nullptr;
  mp.out_bf16 = masked && masked->bf16;
}

// One launch of up to MAXG groups g0 .. g0+gc-1: the A conversion (and the B maps, for MAXG >
// kGroupsSmall), then the GEMM. `a16` points at this launch's part of the workspace and is advanced
// past it. `known`: the launch's plan if the caller holds it (else it is looked up again under `force`).
// `masked` (the masked form, or null): the G groups' rows on the device; the GEMM is its masked kernel.
template <int MAXG>
int launch_chunk(const DeviceState& dev, const int64_t* buf, int G, int g0, int gc, uint8_t*& a16,
                 const sm90::LaunchPlan* known, const sm90::PlanForce& force, const MaskedCall* masked,
                 cudaStream_t stream, Error& err) {
  const Sm90State& st = dev.sm90;
  constexpr int which = MAXG == sm90::kGroupsSmall ? 0
                        : MAXG == sm90::kGroupsMid  ? 1
                        : MAXG == sm90::kGroupsLarge ? 2
                                                     : 3;  // Sm90State::fn
  sm90::MaskedParams<MAXG> mp;  // the masked form's parameters; the task form's GEMM reads the Params in it
  Params<MAXG>& p = mp;  // (its first base: at the same address, so &p serves both kernels)
  const sm90::LaunchPlan& plan =
      known ? *known
            : launch_plan(buf + 5 * G + g0, buf + 6 * G + g0, buf + 7 * G + g0, gc, dev.sm_count, force);
  int64_t rows = 0, kmax = 0;
  launch_extent(buf, G, g0, gc, &rows, &kmax);
  const bool a_fp16 = masked && masked->a_fp16;
  const bool contiguous = masked && masked->offs;  // every group's A is the same T rows, converted once
  if (contiguous) rows = buf[5 * G + g0];
  // the direct-A kernels: no conversion, no fp16 A (nor its maps: the GEMM reads none)
  const bool direct = MAXG == sm90::kGroupsSmall && direct_a(st, plan, gc, masked);
  if (!direct)
    if (int rc = a16_maps(dev.drv, p.map_a16, a16, kmax * 2, sm90::a16_map_rows(rows), err)) return rc;
  std::memcpy(&p.tmpl_b, &st.tmpl_b, sizeof(CUtensorMap));
  int64_t tiles = 0, units = 0, row = 0, red_ctas = 0;
  bool any = false;  // a group whose C rows are not all 16-byte aligned
  for (int i = 0; i < gc; ++i) {  // in the plan's order
    const int local = plan.order[i], g = g0 + local;
    const sm90::GroupTiles& gt = plan.group[local];
    const int64_t m = buf[5 * G + g], n = buf[6 * G + g], k = buf[7 * G + g];
    tiles += gt.chunks * gt.tiles_n;
    units += contiguous && i > 0 ? 0 : m * (k / sm90::kBlockK);  // (contiguous: the first group's units are A's)
    sm90::Group& gr = p.groups[i];
    load_operands(gr, buf, G, g);
    gr.a16 = reinterpret_cast<__half*>(a16) + row * kmax;
    gr.a16_row = (int32_t)row;
    if (!contiguous) row += m;
    gr.m = (int32_t)m;
    gr.n = (int32_t)n;
    gr.k = (int32_t)k;
    gr.width = (int16_t)gt.width;  // a compiled width (the plan picks from kWidths): fits 16 bits
    gr.width_idx = (int8_t)sm90::width_index(gt.width);
    gr.mma_n16 = (uint8_t)(gt.mma_n / 16);  // kNarrowN, kMidN, or the width
    gr.chunks = (int32_t)gt.chunks;
    p.tile_end[i] = (int32_t)tiles;
    gr.unit_end = (int32_t)units;
    gr.cta0 = (int32_t)red_ctas;  // (share_reduce's count: min(parts, K steps) CTAs per tile)
    if (plan.reduce)
      red_ctas += gt.chunks * gt.tiles_n * sm90::tile_parts(plan.reduce, k / sm90::kBlockK);
    any = any || n % 8 != 0 || reinterpret_cast<uintptr_t>(gr.c) % 16 != 0;
  }
  if constexpr (MAXG <= sm90::kGroupsSmall) {
    const int box_rows = plan.half ? sm90::kHalfBlockN : sm90::kBlockN;
    if (int rc = b_maps(dev.drv, p.map_b, buf, G, g0, plan.order, gc, box_rows, err)) return rc;
    if (!any && !plan.reduce && !masked)  // the kernels of aligned C (sm90::kTmaC) store it through these
      if (int rc = c_maps(dev.drv, p.map_c, buf, G, g0, plan.order, gc, err)) return rc;
  }
  uint8_t* const tail = direct ? a16 : a16 + sm90::a16_launch_bytes(rows, kmax);
  p.b_maps = tail;
  p.flags = reinterpret_cast<uint64_t*>(tail + maps_bytes(gc));
  p.partials = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(p.flags) + kFlagsBytes);
  a16 += chunk_bytes(rows, kmax, gc, dev.sm_count, plan, masked != nullptr, direct);
  p.num_groups = gc;
  p.num_ctas = gemm_grid(plan, masked != nullptr, dev.sm_count);
  p.num_units = (int32_t)units;
  std::memcpy(p.start_tile, plan.start_tile, sizeof(int32_t) * (plan.ctas + 1));
  std::memcpy(p.start_k, plan.start_k, sizeof(int32_t) * (plan.ctas + 1));
  p.a16_pitch = (int32_t)kmax;
  p.wave_tiles = plan.wave ? (int32_t)plan.tiles : 0;
  p.a_bf16 = masked && masked->a_bf16;
  p.trace = st.trace;
  set_masked(mp, masked, g0);
  mp.offs = contiguous ? masked->offs : nullptr;  // (one launch: g0 is 0)
  mp.unscale = a_fp16 ? kFp16AUnscale : kNvfp4Unscale;
  // FASTLAUNCH_SM90_SHARE=whole, split or wave forces the masked form's device schedule alike (PlanForce::share's
  // codes are row_schedule.h's)
  static_assert(sm90::kRowWhole == 1 && sm90::kRowSplit == 2 && sm90::kRowWave == 4, "PlanForce::share's codes");
  mp.row_force = force.share == 1 || force.share == 2 || force.share == 4 ? force.share : 0;
  mp.b_prefetch = st.b_prefetch;
  void* args[1] = {&p};

  // The conversion: one thread per unit (kernels/sm90/plan/planner.h convert_ctas), and enough CTAs for one warp per group's B map.
  // GEMM alone (experiments): the same kernel with no units (only the conversion reads num_units), so
  // the maps and flags are still written.
  if (st.only == 2) p.num_units = 0;
  CUlaunchConfig cfg = st.convert_config;  // attrs point into dev, which outlives the call
  if (!direct) {  // (the direct-A kernels convert A themselves)
    const int64_t blocks = sm90::convert_ctas(p.num_units, dev.sm_count);
    const int64_t map_blocks = ceil_div(gc, sm90::kConvertThreads / 32);
    cfg.gridDimX = (unsigned)(blocks > map_blocks ? blocks : map_blocks);
    cfg.hStream = reinterpret_cast<CUstream>(stream);
    if constexpr (MAXG == sm90::kGroupsSmall) {
      // B maps in the GEMM's parameters: the conversion runs on its own small block (ConvertParams)
      sm90::ConvertParams cp{};  // (groups past gc: zeros, never read)
      cp.num_units = p.num_units;
      cp.a16_pitch = p.a16_pitch;
      cp.a_bf16 = p.a_bf16;
      cp.masked_m = mp.masked_m;
      for (int i = 0; i < gc; ++i) {
        const sm90::Group& gr = p.groups[i];
        cp.groups[i] = {gr.a, gr.sfa, gr.a16, gr.k, gr.unit_end, gr.width};
      }
      void* cargs[1] = {&cp};
      FL_LAUNCH_TRY(err, dev.drv, dev.drv.launch_kernel_ex(&cfg, st.convert_fn[which], cargs, nullptr));
    } else {
      FL_LAUNCH_TRY(err, dev.drv, dev.drv.launch_kernel_ex(&cfg, st.convert_fn[which], args, nullptr));
    }
  }

  cfg = st.config;
  cfg.gridDimX = (unsigned)p.num_ctas;
  cfg.sharedMemBytes = sm90::kSmemBytes;
  cfg.hStream = reinterpret_cast<CUstream>(stream);
  CUfunction fn = st.fn[plan.build][any][which];
  if (masked) {
    // its kernels: whole and split tiles of the main and narrow builds, aligned C rows, the groups in launch
    // order (masked_m is indexed by the launch's group)
    bool ordered = true;
    for (int i = 0; i < gc; ++i) ordered = ordered && plan.order[i] == i;
    if (any || plan.half || plan.reduce || plan.build == sm90::kBuildMid || !ordered)
      return err.set(FL_ERR_VALUE, "masked form: no kernel for this plan (half %d, reduced %d, build %d, aligned C %d, "
                     "groups in order %d)", (int)plan.half, plan.reduce, plan.build, (int)!any, (int)ordered);
    fn = st.masked_fn[plan.build == sm90::kBuildNarrow][which];
  }
  if (direct) fn = masked ? st.masked_direct_fn : st.direct_fn[any];
  if constexpr (MAXG == sm90::kGroupsSmall) {
    // the planner takes half and reduced tiles for up to kGroupsSmall groups only
    if (plan.half) fn = st.half_fn[any];
    if (plan.reduce) fn = st.red_fn;
  }
  if (st.only != 1) FL_LAUNCH_TRY(err, dev.drv, dev.drv.launch_kernel_ex(&cfg, fn, args, nullptr));
  if constexpr (MAXG == sm90::kGroupsSmall) {
    if (plan.reduce && st.only != 1) {  // the parts' sums into C: grid (tiles, consumer warps, float4 chunks)
      cfg = st.reduce_config;
      cfg.gridDimX = (unsigned)plan.tiles;
      cfg.gridDimY = sm90::kConsumerWarps;
      cfg.gridDimZ = (unsigned)sm90::reduce_chunks(plan.tiles, sm90::most_valid_float4s(p), dev.sm_count);
      cfg.hStream = reinterpret_cast<CUstream>(stream);
      FL_LAUNCH_TRY(err, dev.drv, dev.drv.launch_kernel_ex(&cfg, st.reduce_fn, args, nullptr));
    }
  }
  return FL_OK;
}

// Groups g0 .. g0+gc-1 (gc <= kGroupsSmall) of buf's G on the skinny kernel with their plan `sp`
// (kernels/sm90/plan/skinny.h): one grid, no workspace; clusters of sp.split CTAs where it splits K. `masked` (the
// masked form, or null): the G groups' rows on the device, for its kernel.
int launch_skinny(const DeviceState& dev, const int64_t* buf, int G, int g0, int gc, const sm90::SkinnyPlan& sp,
                  const MaskedCall* masked, cudaStream_t stream, Error& err) {
  const Sm90State& st = dev.sm90;
  sm90::MaskedSkinnyParams mp{};  // the masked form's; the task form's kernel reads the SkinnyParams in it
  sm90::SkinnyParams& p = mp;     // (its first base: at the same address, so &p serves both kernels)
  set_masked(mp, masked, g0);
  int64_t items = 0;
  for (int i = 0; i < gc; ++i) {
    const int g = g0 + i;
    sm90::SkinnyGroup& gr = p.groups[i];
    load_operands(gr, buf, G, g);
    gr.m = (int32_t)buf[5 * G + g];
    gr.n = (int32_t)buf[6 * G + g];
    gr.k = (int32_t)buf[7 * G + g];
    items += ceil_div(gr.n, sm90::skinny_rows(sp.lanes));
    gr.item_end = (int32_t)items;  // < 2^31: skinny_plan
  }
  p.split = sp.split;
  p.runs = sm90::skinny_item_runs(items, sp.ctas / sp.split);
  p.scales = (int32_t)sp.scales, p.scale_buf = (int32_t)sp.scale_buf;  // < kSkinnySmemMax
  p.sums = (int32_t)sp.sums;  // < kSkinnySmemMax
  void* args[1] = {&p};
  CUlaunchConfig cfg = st.skinny_config;
  cfg.gridDimX = (unsigned)sp.ctas;  // a multiple of sp.split
  cfg.sharedMemBytes = (unsigned)sp.smem;
  cfg.hStream = reinterpret_cast<CUstream>(stream);
  CUlaunchAttribute attrs[2] = {st.attr[0], {}};
  if (sp.split > 1) {
    attrs[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[1].value.clusterDim.x = (unsigned)sp.split;
    attrs[1].value.clusterDim.y = attrs[1].value.clusterDim.z = 1;
    cfg.attrs = attrs;
    cfg.numAttrs = 2;
  }
  const CUfunction fn = (masked ? st.skinny_masked_fn : st.skinny_fn)[sp.build][sm90::skinny_lanes_index(sp.lanes)];
  FL_LAUNCH_TRY(err, dev.drv, dev.drv.launch_kernel_ex(&cfg, fn, args, nullptr));
  return FL_OK;
}

// Few A rows per group (up to kGroupsPerLaunch groups of valid sizes): the skinny kernel, one launch per run
// of up to kGroupsSmall groups, where it is estimated faster than the wgmma plan under `force` (or forced).
// `masked`: as launch_skinny's. Sets *taken.
int try_skinny(const DeviceState& dev, const int64_t* buf, int G, const sm90::PlanForce& force, const MaskedCall* masked,
               cudaStream_t stream, bool* taken, Error& err) {
  *taken = false;
  if (dev.sm90.skinny == 2 || dev.sm90.only != 0) return FL_OK;
  thread_local sm90::SkinnyMemo<sm90::kSkinnyMemoEntries> memo;  // (kernels/sm90/plan/plan_memo.h)
  const sm90::SkinnyRuns& sk = memo.get(buf + 5 * G, buf + 6 * G, buf + 7 * G, G, dev.sm_count, dev.sm90.skinny_split,
                                        dev.sm90.skinny_lanes);
  if (sk.count == 0) return FL_OK;
  if (dev.sm90.skinny != 1) {
    const sm90::LaunchPlan& wgmma = launch_plan(buf + 5 * G, buf + 6 * G, buf + 7 * G, G, dev.sm_count, force);
    if (!sm90::skinny_wins(sk.est_ns, wgmma.est_ns)) return FL_OK;
  }
  *taken = true;
  for (int r = 0; r < sk.count; ++r) {
    const int g0 = r * sm90::kGroupsSmall, gc = sm90::skinny_run_groups(G, r);
    if (int rc = launch_skinny(dev, buf, G, g0, gc, sk.runs[r], masked, stream, err)) return rc;
  }
  return FL_OK;
}

// A setting read from the environment as one of a few words: *out takes the value of the word `name` holds; left
// as it is where `name` is unset; anything else is an error naming the setting, what it holds and `expected`.
int env_word(const char* name, std::initializer_list<std::pair<const char*, int>> words, const char* expected,
             int* out, Error& err) {
  const char* env = std::getenv(name);
  if (!env) return FL_OK;
  for (const auto& [word, value] : words)
    if (std::strcmp(env, word) == 0) {
      *out = value;
      return FL_OK;
    }
  return err.set(FL_ERR_VALUE, "%s=%s: expected %s", name, env, expected);
}

}  // namespace

int sm90_init(DeviceState& dev, Error& err) {
  Sm90State& st = dev.sm90;
  init_launch_config(&st.config, st.attr, sm90::kThreads);
  init_launch_config(&st.convert_config, st.attr, sm90::kConvertThreads);
  init_launch_config(&st.reduce_config, st.attr, sm90::kReduceThreads);
  init_launch_config(&st.skinny_config, st.attr, sm90::kSkinnyThreads);
  if (int rc = prepare_skinny<false>(st.skinny_fn, err)) return rc;
  if (int rc = prepare_skinny<true>(st.skinny_masked_fn, err)) return rc;
  static_assert(sm90::kNumBuilds == 3, "a build prepared below for each");
  if (int rc = prepare_build<sm90::kBuildMain>(st.fn[sm90::kBuildMain], err)) return rc;
  if (int rc = prepare_build<sm90::kBuildNarrow>(st.fn[sm90::kBuildNarrow], err)) return rc;
  if (int rc = prepare_build<sm90::kBuildMid>(st.fn[sm90::kBuildMid], err)) return rc;
  if (int rc = prepare_masked<sm90::kBuildMain>(st.masked_fn[0], err)) return rc;
  if (int rc = prepare_masked<sm90::kBuildNarrow>(st.masked_fn[1], err)) return rc;
  const void* direct[3] = {reinterpret_cast<const void*>(&sm90::nvfp4_group_gemm_direct<sm90::kGroupsSmall, false>),
                           reinterpret_cast<const void*>(&sm90::nvfp4_group_gemm_direct<sm90::kGroupsSmall, true>),
                           reinterpret_cast<const void*>(&sm90::nvfp4_group_gemm_masked_direct<sm90::kGroupsSmall>)};
  CUfunction* direct_fn[3] = {&st.direct_fn[0], &st.direct_fn[1], &st.masked_direct_fn};
  for (int i = 0; i < 3; ++i)
    if (int rc = kernel_handle(direct[i], sm90::kSmemBytes, direct_fn[i], err)) return rc;
  if (int rc = prepare<sm90::kGroupsSmall, true>(&st.half_fn[0], err)) return rc;
  if (int rc = prepare<sm90::kGroupsSmall, true, true>(&st.half_fn[1], err)) return rc;
  if (int rc = prepare<sm90::kGroupsSmall, false, false, true>(&st.red_fn, err)) return rc;
  if (int rc = kernel_handle(reinterpret_cast<const void*>(&sm90::reduce_partials<sm90::kGroupsSmall>), 0,
                             &st.reduce_fn, err))
    return rc;
  if (int rc = kernel_handle(reinterpret_cast<const void*>(&sm90::convert_a_small), 0, &st.convert_fn[0], err))
    return rc;
  if (int rc = prepare_convert<sm90::kGroupsMid>(&st.convert_fn[1], err)) return rc;
  if (int rc = prepare_convert<sm90::kGroupsLarge>(&st.convert_fn[2], err)) return rc;
  if (int rc = prepare_convert<sm90::kGroupsPerLaunch>(&st.convert_fn[3], err)) return rc;
  if (int rc = encode_byte_map_template(dev.drv, &st.tmpl_b, sm90::kBlockK / 2, sm90::kBlockN,
                                        CU_TENSOR_MAP_SWIZZLE_NONE, err, kBPromotion))
    return rc;
  // Experiments (tools/tuning/sweep_sm90.py) and tests: the widest tile the planner may use; whole or split
  // tiles only; half tiles always (where allowed) or never; the narrow build and the mid build each always
  // (where allowed) or never;
  // the skinny kernel always (where allowed) or never, its K split and its lanes per B row; one of the two
  // kernels only.
  if (const char* env = std::getenv("FASTLAUNCH_SM90_WCAP")) {
    const int cap = std::atoi(env);
    if (sm90::width_index(cap) >= 0) st.force.cap = cap;
    if (!st.force.cap) return err.set(FL_ERR_VALUE, "FASTLAUNCH_SM90_WCAP=%s: not a compiled tile width", env);
  }
  if (const char* env = std::getenv("FASTLAUNCH_SM90_SHARE")) {
    // whole, split (one CTA per SM), split:S (S CTAs per tile, 1..64), reduce (reduced tiles where a launch
    // may take them), reduce:S (S parts per tile) or wave (wave plans); whole, split and wave force the masked
    // form's device schedule too (launch_chunk)
    int parts = 0;
    char tail = 0;
    if (std::strcmp(env, "whole") == 0) st.force.share = 1;
    else if (std::strcmp(env, "split") == 0) st.force.share = 2;
    else if (std::sscanf(env, "split:%d%c", &parts, &tail) == 1 && parts >= 1 && parts <= 64)
      st.force.share = 2, st.force.parts = parts;
    else if (std::strcmp(env, "reduce") == 0) st.force.share = 3;
    else if (std::strcmp(env, "wave") == 0) st.force.share = 4;
    else if (std::sscanf(env, "reduce:%d%c", &parts, &tail) == 1 && parts >= 1 && parts <= sm90::kMaxReduceParts)
      st.force.share = 3, st.force.parts = parts;
    else
      return err.set(FL_ERR_VALUE,
                     "FASTLAUNCH_SM90_SHARE=%s: expected whole, split, split:S (S in 1..64), reduce, reduce:S (S in "
                     "1..%d) or wave",
                     env, sm90::kMaxReduceParts);
  }
  // 0: never a wave plan (1: the planner's choice)
  if (int rc = env_word("FASTLAUNCH_SM90_WAVE", {{"1", 0}, {"0", 2}}, "0 or 1", &st.force.wave, err)) return rc;
  if (int rc = env_word("FASTLAUNCH_SM90_HALF", {{"1", 1}, {"0", 2}}, "0 or 1", &st.force.half, err)) return rc;
  if (int rc = env_word("FASTLAUNCH_SM90_NARROW", {{"1", 1}, {"0", 2}}, "0 or 1", &st.force.narrow, err)) return rc;
  if (int rc = env_word("FASTLAUNCH_SM90_MID", {{"1", 1}, {"0", 2}}, "0 or 1", &st.force.mid, err)) return rc;
  if (int rc = env_word("FASTLAUNCH_SM90_SKINNY", {{"1", 1}, {"0", 2}}, "0 or 1", &st.skinny, err)) return rc;
  if (const char* env = std::getenv("FASTLAUNCH_SM90_SKINNY_SPLIT")) {
    int split = 0;
    char tail = 0;
    if (std::sscanf(env, "%d%c", &split, &tail) != 1 || split < 1 || split > sm90::kSkinnyMaxSplit)
      return err.set(FL_ERR_VALUE, "FASTLAUNCH_SM90_SKINNY_SPLIT=%s: expected a K split of 1..%d", env,
                     sm90::kSkinnyMaxSplit);
    st.skinny_split = split;
  }
  if (const char* env = std::getenv("FASTLAUNCH_SM90_SKINNY_LANES")) {
    int lanes = 0;
    char tail = 0;
    if (std::sscanf(env, "%d%c", &lanes, &tail) != 1 || !sm90::skinny_lanes_valid(lanes))
      return err.set(FL_ERR_VALUE, "FASTLAUNCH_SM90_SKINNY_LANES=%s: expected lanes per B row, %d or %d", env,
                     sm90::kSkinnyLanes[0], sm90::kSkinnyLanes[1]);
    st.skinny_lanes = lanes;
  }
  if (int rc = env_word("FASTLAUNCH_SM90_PREFETCH", {{"1", 1}, {"0", 0}}, "0 or 1", &st.b_prefetch, err)) return rc;
  if (int rc = env_word("FASTLAUNCH_SM90_DIRECT", {{"1", 1}, {"0", 0}}, "0 or 1", &st.direct, err)) return rc;
  if (int rc = env_word("FASTLAUNCH_SM90_ROWS", {{"1", 1}, {"0", 2}, {"first", 0}}, "0, 1 or first", &st.rows, err))
    return rc;
  if (int rc = env_word("FASTLAUNCH_SM90_ONLY", {{"convert", 1}, {"gemm", 2}}, "convert or gemm", &st.only, err))
    return rc;
  // A device address (decimal) of at least sm_count x 16 x 2 uint64 for the GEMM's trace points
  // (tools/tuning/trace_sm90.py); read once, when the device is first used.
  if (const char* env = std::getenv("FASTLAUNCH_SM90_TRACE")) st.trace = reinterpret_cast<uint64_t*>(std::strtoull(env, nullptr, 10));
  return FL_OK;
}

namespace {

// The launches of buf's G groups; src (or null): the caller's group of each, for error messages. `force`: the
// planner's settings; `masked` (or null): the masked form's rows on the device (launch_chunk); `known` (or null): the
// plan of a call of one launch, made by the caller (the device schedule's, kernels/sm90/plan/row_plan.h).
int launch_groups(const DeviceState& dev, const int64_t* buf, int G, const int* src, const sm90::PlanForce& force,
                  const MaskedCall* masked, cudaStream_t stream, const fl_allocator* alloc, Error& err,
                  const sm90::LaunchPlan* known = nullptr) {
  // Check every limit before the first launch, so a bad group launches nothing.
  int64_t tiles = 0, units = 0, rows = 0, kmax = 0, workspace = 0;
  // The plan of a call of one launch, found once: with more launches a later lookup may replace an
  // earlier plan in the per-thread cache, so each launch looks its own up again.
  const sm90::LaunchPlan* single = G <= sm90::kGroupsPerLaunch ? known : nullptr;
  for (int g = 0; g < G; ++g) {
    const int64_t m = buf[5 * G + g], n = buf[6 * G + g], k = buf[7 * G + g];
    const int caller_g = src ? src[g] : g;  // for messages: the caller's group
    if (int rc = check_group_sizes(m, n, k, caller_g, err)) return rc;
    if (g % sm90::kGroupsPerLaunch == 0) tiles = units = rows = kmax = 0;
    tiles += sm90::max_tiles(m, n);  // the most tiles any plan makes
    if (tiles > kMaxTilesPerLaunch)
      return err.set(FL_ERR_VALUE, "group %d: more than %lld tiles of %dx%d in one launch of up to %d groups",
                     caller_g, (long long)kMaxTilesPerLaunch, sm90::kWidths[0], sm90::kBlockN, sm90::kGroupsPerLaunch);
    units += masked && masked->offs && g > 0 ? 0 : m * (k / sm90::kBlockK);  // (contiguous: A's T rows once)
    if (units > kMaxUnitsPerLaunch)
      return err.set(FL_ERR_VALUE, "group %d: more than %lld rows x K/64 of A in one launch of up to %d groups",
                     caller_g, (long long)kMaxUnitsPerLaunch, sm90::kGroupsPerLaunch);
    rows = masked && masked->offs ? m : rows + m;  // A's row coordinate (int32 in the kernels; contiguous: T rows)
    if (rows > kMaxExtent)
      return err.set(FL_ERR_VALUE, "group %d: more than %lld rows of A in one launch of up to %d groups",
                     caller_g, (long long)kMaxExtent, sm90::kGroupsPerLaunch);
    if (k > kmax) kmax = k;
    const bool last_of_launch = g + 1 == G || (g + 1) % sm90::kGroupsPerLaunch == 0;
    if (last_of_launch) {
      // rows, kmax < 2^31, so the launch's bytes < 2^63; the running sum is checked far below overflow.
      // The launch's plan (kept per thread: launch_chunk finds it again) says whether it splits tiles.
      const int g0 = g / sm90::kGroupsPerLaunch * sm90::kGroupsPerLaunch;
      const sm90::LaunchPlan& plan =
          single ? *single
                 : launch_plan(buf + 5 * G + g0, buf + 6 * G + g0, buf + 7 * G + g0, g + 1 - g0, dev.sm_count, force);
      workspace += chunk_bytes(rows, kmax, g + 1 - g0, dev.sm_count, plan, masked != nullptr,
                               direct_a(dev.sm90, plan, g + 1 - g0, masked));
      if (G <= sm90::kGroupsPerLaunch) single = &plan;
      if (workspace > kMaxWorkspaceBytes)
        return err.set(FL_ERR_VALUE, "group %d: the fp16 copy of A would exceed %lld bytes", caller_g,
                       (long long)kMaxWorkspaceBytes);
    }
  }
  Workspace ws;
  if (int rc = ws.acquire(alloc, (size_t)workspace, stream, err)) return rc;
  uint8_t* a16 = static_cast<uint8_t*>(ws.ptr);
  int rc = FL_OK;
  for (int g0 = 0; g0 < G && rc == FL_OK; g0 += sm90::kGroupsPerLaunch) {
    const int gc = G - g0 < sm90::kGroupsPerLaunch ? G - g0 : sm90::kGroupsPerLaunch;
    // The smallest parameter block that holds the launch's groups.
    if (gc <= sm90::kGroupsSmall)
      rc = launch_chunk<sm90::kGroupsSmall>(dev, buf, G, g0, gc, a16, single, force, masked, stream, err);
    else if (gc <= sm90::kGroupsMid)
      rc = launch_chunk<sm90::kGroupsMid>(dev, buf, G, g0, gc, a16, single, force, masked, stream, err);
    else if (gc <= sm90::kGroupsLarge)
      rc = launch_chunk<sm90::kGroupsLarge>(dev, buf, G, g0, gc, a16, single, force, masked, stream, err);
    else rc = launch_chunk<sm90::kGroupsPerLaunch>(dev, buf, G, g0, gc, a16, single, force, masked, stream, err);
  }
  ws.release(stream);  // stream-ordered: after the kernels just queued
  return rc;
}

// Where a launch of up to kGroupsSmall groups is cut (kernels/sm90/plan/group_cuts.h): each group's head rows (0: uncut)
// if the cut launch's plan is estimated at least 1% faster, else null. Kept per thread by the groups'
// sizes for as many launches as the memo of plans keeps (the task's 15 test inputs, taken in turn, fit; deciding
// two of its shapes costs 15 and 48 us on a build machine's CPU, fastlaunch._C.cuts): deciding estimates every cut
// of every group and plans both launches, a lookup costs one comparison per entry. Sizes must be valid.
const int64_t* launch_cuts(const DeviceState& dev, const int64_t* buf, int G) {
  struct Entry {
    int groups = 0, sm_count = 0;
    sm90::PlanForce force;
    int64_t key[3 * sm90::kGroupsSmall];
    int64_t head[sm90::kGroupsSmall];
    bool cut = false;
  };
  thread_local Recent<Entry, sm90::kPlanMemoEntries> cache;
  const sm90::PlanForce& force = dev.sm90.force;
  const size_t bytes = sizeof(int64_t) * 3 * G;  // m, n and k: buf's last three fields, contiguous
  const int64_t* sizes = buf + 5 * G;
  const Entry* hit = cache.find([&](const Entry& e) {
    return e.groups == G && e.sm_count == dev.sm_count && e.force == force && std::memcmp(e.key, sizes, bytes) == 0;
  });
  if (!hit) {
    Entry& e = cache.oldest();
    // (each estimate is read before the next lookup: a lookup may replace an entry of the per-thread memo)
    e.cut = sm90::choose_cuts(sizes, sizes + G, sizes + 2 * G, G,
                              [&](const int64_t* m, const int64_t* n, const int64_t* k, int groups) {
                                return launch_plan(m, n, k, groups, dev.sm_count, force).est_ns;
                              },
                              e.head);
    std::memcpy(e.key, sizes, bytes);
    e.groups = G, e.sm_count = dev.sm_count, e.force = force;
    hit = &e;
  }
  return hit->cut ? hit->head : nullptr;
}

// Whether a task-form launch of valid sizes runs on the device schedule (kernels/sm90/plan/row_plan.h): where it fits
// (every C row 16-byte aligned too) and nothing is forced on the planner: always (FASTLAUNCH_SM90_ROWS=1), never (=0),
// or (=first, the default) where the memo holds no plan for it, but at the second call of its sizes, which plans.
// With =1 a cap on the tile width alone (FASTLAUNCH_SM90_WCAP) is the device schedule's (experiments).
bool rows_first(const DeviceState& dev, const int64_t* buf, int G) {
  const Sm90State& st = dev.sm90;
  sm90::PlanForce beside_cap = st.force;  // (a cap alone may be forced, with =1)
  beside_cap.cap = 0;
  if (st.rows == 2 || st.only != 0 || !(beside_cap == sm90::PlanForce{}) || (st.force.cap != 0 && st.rows != 1))
    return false;
  if (!sm90::row_plan_fits(buf + 5 * G, buf + 6 * G, buf + 7 * G, G)) return false;
  for (int g = 0; g < G; ++g)
    if (buf[2 * G + g] % 16 != 0) return false;
  if (st.rows == 1) return true;
  thread_local sm90::SizesSeen<sm90::kSizesSeenEntries> seen;
  return seen.sight(buf + 5 * G, 3 * G) != sm90::kSightSecond &&
         !plan_held(buf + 5 * G, buf + 6 * G, buf + 7 * G, G, dev.sm_count, st.force);
}

// A task-form launch on the device schedule: the masked kernels with no counts (every group's m rows).
int launch_rows(const DeviceState& dev, const int64_t* buf, int G, const int* src, cudaStream_t stream,
                const fl_allocator* alloc, Error& err) {
  thread_local sm90::LaunchPlan plan;
  sm90::row_plan(buf + 5 * G, buf + 6 * G, buf + 7 * G, G, plan, dev.sm90.force.cap);
  const MaskedCall call{nullptr, nullptr, false, false, false, nullptr};
  return launch_groups(dev, buf, G, src, dev.sm90.force, &call, stream, alloc, err, &plan);
}

}  // namespace

int sm90_launch(const DeviceState& dev, const int64_t* buf, int G, const int* src, cudaStream_t stream,
                const fl_allocator* alloc, Error& err) {
  // Launches of few A rows per group (every M at most kSkinnyMaxM: a scan that stops at the first larger
  // group) may take the skinny kernel (try_skinny); else sizes not called before run on the device schedule
  // where they fit (rows_first), planned on the host from their second call; launches of up to kGroupsSmall
  // groups may be cut at a 128-row boundary into two (launch_cuts) where that is estimated faster. Each is tried
  // on valid sizes only (launch_groups checks and reports every limit, with the caller's group numbers: src's,
  // and through the cuts, src's of the group each part comes from).
  bool few_rows = G <= sm90::kGroupsPerLaunch;
  for (int g = 0; g < G && few_rows; ++g) few_rows = buf[5 * G + g] <= sm90::kSkinnyMaxM;
  if (G <= sm90::kGroupsPerLaunch) {  // (more groups: several launches, planned)
    Error quiet{nullptr, 0};
    bool valid = true;
    for (int g = 0; g < G && valid; ++g)
      valid = check_group_sizes(buf[5 * G + g], buf[6 * G + g], buf[7 * G + g], g, quiet) == FL_OK;
    if (valid && few_rows) {
      bool taken = false;
      if (int rc = try_skinny(dev, buf, G, dev.sm90.force, nullptr, stream, &taken, err)) return rc;
      if (taken) return FL_OK;
    }
    if (valid && rows_first(dev, buf, G)) return launch_rows(dev, buf, G, src, stream, alloc, err);
    if (valid && G <= sm90::kGroupsSmall) {
      if (const int64_t* head = launch_cuts(dev, buf, G)) {
        int64_t cut[8 * sm90::kGroupsSmall];
        int from[sm90::kGroupsSmall];
        const int Gc = sm90::apply_cuts(buf, G, head, cut, from);
        if (src)
          for (int v = 0; v < Gc; ++v) from[v] = src[from[v]];
        return launch_groups(dev, cut, Gc, from, dev.sm90.force, nullptr, stream, alloc, err);
      }
    }
  }
  return launch_groups(dev, buf, G, src, dev.sm90.force, nullptr, stream, alloc, err);
}

int sm90_launch_masked(const DeviceState& dev, const fl_masked_args& a, cudaStream_t stream, const fl_allocator* alloc,
                       Error& err) {
  // The masked kernels store C rows in 16-byte chunks by the threads.
  if (a.n % 8 != 0 || reinterpret_cast<uintptr_t>(a.out) % 16 != 0)
    return err.set(FL_ERR_VALUE, "masked form: out rows must be 16-byte aligned: N a multiple of 8 (got N=%lld) and "
                   "out 16-byte aligned", (long long)a.n);
  // The groups as the task layout's buffer, each planned at max_m rows: group g's operands lie a fixed
  // stride after group 0's (fp16 A: 2 bytes a value, no scales); in the contiguous layout every group's A, sfa and C
  // are the one A, sfa and C of max_m (T) rows, its own rows found on the device (offs), in one launch.
  const int G = (int)a.groups;
  const bool a_fp16 = a.a_dtype != FL_A_NVFP4, contiguous = a.offs != nullptr;  // (fp16 or bf16: 2 bytes a value)
  if (contiguous && G > sm90::kGroupsPerLaunch)
    return err.set(FL_ERR_VALUE, "contiguous layout: at most %d experts in one call, got %d", sm90::kGroupsPerLaunch, G);
  const int64_t kb = a.k / 2, kt = a.k / sm90::kBlockK;
  const int64_t a_stride = contiguous ? 0 : a.max_m * (a_fp16 ? a.k * 2 : kb), b_stride = a.n * kb,
                c_stride = contiguous ? 0 : a.max_m * a.n * 2;
  const int64_t sfa_stride = contiguous ? 0 : ceil_div(a.max_m, 128) * kt * sm90::kSfBlockBytes;
  const int64_t sfb_stride = ceil_div(a.n, 128) * kt * sm90::kSfBlockBytes;
  thread_local std::vector<int64_t> buf;
  try {
    buf.resize((size_t)8 * G);
  } catch (const std::bad_alloc&) {
    return err.set(FL_ERR_OUT_OF_MEMORY, "out of host memory for the masked form's %d groups", G);
  }
  for (int g = 0; g < G; ++g) {
    buf[0 * G + g] = reinterpret_cast<int64_t>(a.a) + g * a_stride;
    buf[1 * G + g] = reinterpret_cast<int64_t>(a.b) + g * b_stride;
    buf[2 * G + g] = reinterpret_cast<int64_t>(a.out) + g * c_stride;
    buf[3 * G + g] = a_fp16 ? 0 : reinterpret_cast<int64_t>(a.sfa) + g * sfa_stride;
    buf[4 * G + g] = reinterpret_cast<int64_t>(a.sfb) + g * sfb_stride;
    buf[5 * G + g] = a.max_m, buf[6 * G + g] = a.n, buf[7 * G + g] = a.k;
  }
  // Its kernels: whole and split tiles of the main and narrow builds, and the skinny kernel (NVFP4 A in the masked
  // layout only) where every group may take it (max_m rows at most kSkinnyMaxM, up to kGroupsPerLaunch groups) and it is
  // estimated faster. Only the tiles that hold rows this call are scheduled, on the device (in the contiguous
  // layout each group is planned at all T rows, its own found from offs).
  sm90::PlanForce force = dev.sm90.force;
  force.half = 2, force.mid = 2, force.reduce = 2;
  const MaskedCall call{a.masked_m, a.alpha, a.out_dtype == FL_OUT_BF16, a_fp16, a.a_dtype == FL_A_BF16, a.offs};
  if (!a_fp16 && !contiguous && a.max_m <= sm90::kSkinnyMaxM && G <= sm90::kGroupsPerLaunch) {
    bool taken = false;
    if (int rc = try_skinny(dev, buf.data(), G, force, &call, stream, &taken, err)) return rc;
    if (taken) return FL_OK;
  }
  return launch_groups(dev, buf.data(), G, nullptr, force, &call, stream, alloc, err);
}

}  // namespace fl
