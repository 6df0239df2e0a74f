// The kernel parameters of the sm_90a GEMM and its A conversion: one block for both kernels, but for
// launches of up to kGroupsSmall groups, whose conversion takes its own small one (ConvertParams).
#pragma once
#include <cuda.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/group_operands.h"
#include "sm90/plan/planner.h"

namespace fl::sm90 {

struct Group : GroupOperands {  // a, b, sfa, sfb, c
  __half* a16;         // the group's first fp16 A row in the workspace (rows Params::a16_pitch apart)
  int32_t a16_row;     // ... and its row index there (the A tensor map's row coordinate)
  int32_t m, n, k;
  int16_t width;       // A rows per tile: kernels/sm90/plan/planner.h's kWidths[width_idx] (16 and 8 bits: Group stays 80 bytes)
  int8_t width_idx;
  uint8_t mma_n16;     // wgmma N / 16 (kernels/sm90/plan/planner.h GroupTiles::mma_n: the width, or the narrow or mid build's N)
  int32_t chunks;      // tiles along M: ceil(m / width)
  int32_t unit_end;    // exclusive end of this group's conversion units (rows x K/64) in the launch
  int32_t cta0;        // reduced tiles: the first CTA of the group's tiles' parts (tile by tile)
};
static_assert(kMaxWidth < 32768 && kNumWidths < 128 && kMaxWidth / 16 < 256 && sizeof(Group) == 80,
              "widths, their index and wgmma N / 16 fit their fields; Group holds no padding");

// Whether the narrow build runs a group's tiles at wgmma N = kNarrowN (their K loop and their A box).
__device__ __forceinline__ bool narrow_tiles(const Group& g) { return g.mma_n16 * 16 <= kNarrowN; }

// Params::groups is in the plan's order (LaunchPlan::order): tiles are numbered group by group.
// A CTA's producers read their share's bounds, the groups' tile ends (to find the first tile's group)
// and that group's fields before their first TMA, a chain of parameter loads (~0.2 us each on a call's
// first reads). The tile ends are one aligned array (one line for up to 16 groups), not one field per
// Group, so the walk stays on one line. Reading every group's tile end at once instead of walking, or by
// the warp's lanes, made that chain slower, not shorter.
template <int MAXG>
struct Params {
  // the workspace: [rows of all groups, a16_pitch fp16], box kWidths[i] rows x 128 bytes, 128B swizzle; the
  // last (kNumWidths) with a box of kNarrowN rows, for the narrow build's narrow tiles
  CUtensorMap map_a16[kNumA16Maps];
  CUtensorMap tmpl_b;   // any valid map with B's box (128 rows x 32 bytes), rewritten per group by the conversion
  // Launches of up to kGroupsSmall groups: each group's B map, encoded on the host (cached by B's
  // address and sizes), so the GEMM's B producer needs nothing from the conversion kernel.
  CUtensorMap map_b[MAXG <= kGroupsSmall ? MAXG : 1];
  // ... and each group's C map (fp16 C as bytes, box 64 rows x 128 bytes, 128-byte swizzle), encoded and cached
  // alike, where every C row of the launch is aligned: the epilogue stores C by TMA (kernels/sm90/epilogue.cuh).
  CUtensorMap map_c[MAXG <= kGroupsSmall ? MAXG : 1];
  int32_t num_groups;
  int32_t num_ctas;     // the grid
  int32_t num_units;
  int32_t a16_pitch;    // fp16 elements between workspace rows: the launch's largest K
  int32_t wave_tiles;   // a wave plan (kernels/sm90/plan/planner.h share_wave): its tiles, CTA b taking b, b +
                        // num_ctas, ...; 0: the stream-K shares of start_tile/start_k
  int32_t a_bf16;       // the groups' A is the caller's bf16 (weight-only forms: sfa null), converted to fp16
  uint8_t* b_maps;      // workspace: one B map (kMapBytes) per group, in `groups` order, written by the conversion
  // workspace: per CTA and consumer warp, whether its partial sums are written (kernels/sm90/stream_k.cuh
  // flag_epoch), kMaxCtas x 8 flags
  uint64_t* flags;
  float* partials;      // workspace: kPartialBytes per CTA, the sums of the tile it ends inside
  uint64_t* trace;     // experiments only (FASTLAUNCH_SM90_TRACE): per-CTA trace points, else null
  int32_t start_tile[kMaxCtas + 1];  // CTA b: the K steps from (start_tile[b], start_k[b]) up to b + 1's (kernels/sm90/plan/planner.h)
  int32_t start_k[kMaxCtas + 1];
  Group groups[MAXG];
  alignas(64) int32_t tile_end[MAXG];  // group g's tiles end here (exclusive) in the launch's tile order
};

// The masked form's parameters (nvfp4_group_gemm_masked): the task form's, then the counts. A launch of the task
// form passes the same bytes as before (its kernels read sizeof(Params) of them), a masked one these.
template <int MAXG>
struct MaskedParams : Params<MAXG> {
  // group g computes rows 0 .. masked_m[g] - 1 (at most its planned m) and stores no other row; read on the
  // device, after the grid before this one. Null (and offs null): every group's m rows, the task form's launches on
  // the device schedule (kernels/sm90/plan/row_plan.h)
  const int32_t* masked_m;
  // expert g's product is multiplied by alpha[g] before the rounding (null: by 1); read on the device like masked_m
  const float* alpha;
  int32_t out_bf16;  // C is bf16 (else fp16)
  // The contiguous layout (else null): group g's rows are rows offs[g-1] .. offs[g]-1 (offs[-1] read as 0, each
  // clamped to the group's planned m, the launch's rows) of one A and one C shared by every group, whose a16_row
  // and c point at row 0; masked_m is not read. Read on the device like masked_m.
  const int32_t* offs;
  // the accumulators' scale, undone before the rounding: kNvfp4Unscale (2^28) where A was NVFP4, kFp16AUnscale
  // (2^14: only B's decode carries 2^-14) where it was the caller's fp16
  float unscale;
  // the device schedule's shape forced (kernels/sm90/plan/row_schedule.h kRowWhole, kRowSplit, kRowWave), or 0
  int32_t row_force;
  // Launches of up to kGroupsSmall groups (B maps in the parameters), unless FASTLAUNCH_SM90_PREFETCH=0: while a CTA
  // waits for the grid before it, warp 0 brings into L2 the first kPrefetchSteps K steps of B (and scales) of tile b of
  // the planned tiles (numbered as the device schedule numbers them), where they are no more than the grid: the tile the
  // schedule gives CTA b when every group holds all its planned tiles and it runs a tile per CTA; a hint, whatever
  // the schedule then makes. 0: none.
  int32_t b_prefetch;
};

// The A conversion's own parameters for launches of up to kGroupsSmall groups (whose B maps are GEMM
// parameters, so the conversion writes none): only what it reads, 672 bytes against Params<kGroupsSmall>'s
// ~7 KB. The conversion is a call's first launch, and its parameter bytes lie on the call's path (benchmark 4
// 0.4-0.7 us faster than on Params). The fields mean what Params', MaskedParams' (masked_m) and Group's of the
// same names mean.
struct ConvertGroup {
  const uint8_t* a;
  const uint8_t* sfa;
  __half* a16;
  int32_t k;
  int32_t unit_end;
  int32_t width;
};
struct ConvertParams {
  int32_t num_units;
  int32_t a16_pitch;
  int32_t a_bf16;
  const int32_t* masked_m;
  ConvertGroup groups[kGroupsSmall];
};
static_assert(sizeof(ConvertParams) < 1024, "the conversion's block stays small (its bytes cost every call)");

}  // namespace fl::sm90
