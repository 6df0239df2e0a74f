// Global-memory accesses with an explicit memory order or cache level: a flag one CTA raises
// (release) and another waits for (acquire), the L2-only vector accesses of the data it guards, and loads
// through the read-only path.
#pragma once
#include <cstdint>

namespace fl::ptx {

// Stores `v` with release semantics at GPU scope: this thread's earlier writes (and those it observed,
// e.g. its warp's before a __syncwarp) are visible to a thread that acquires the value.
__device__ __forceinline__ void st_release_gpu(uint64_t* p, uint64_t v) {
  asm volatile("st.release.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t ld_acquire_gpu(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// A plain 8-byte store the compiler keeps (a flag put back for a later grid, which reads it only after this one).
__device__ __forceinline__ void st_u64(uint64_t* p, uint64_t v) {
  asm volatile("st.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// 16-byte store and load cached in L2 only (data exchanged between SMs).
__device__ __forceinline__ void st_cg_v4(float* p, float a, float b, float c, float d) {
  asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

__device__ __forceinline__ float4 ld_cg_v4(const float* p) {
  float4 v;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p) : "memory");
  return v;
}

// 4-byte load cached in L2 only (tools/tlb_probe.cu: a chain of reads that must reach L2 or memory each time).
__device__ __forceinline__ uint32_t ld_cg_u32(const void* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Up to four 16-byte L2-only loads issued back to back, so that all are in flight before the first is used (the
// compiler otherwise may consume one to free its registers before issuing the next): v[u] = *p[u] for
// u < n (n >= 1); the others keep their values and their addresses are not read.
__device__ __forceinline__ void ld_cg_v4_upto4(const float* p0, const float* p1, const float* p2, const float* p3,
                                               int n, float4 (&v)[4]) {
  asm volatile(
      "{\n\t.reg .pred q1, q2, q3;\n\t"
      "setp.gt.s32 q1, %20, 1;\n\t"
      "setp.gt.s32 q2, %20, 2;\n\t"
      "setp.gt.s32 q3, %20, 3;\n\t"
      "ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%16];\n\t"
      "@q1 ld.global.cg.v4.f32 {%4, %5, %6, %7}, [%17];\n\t"
      "@q2 ld.global.cg.v4.f32 {%8, %9, %10, %11}, [%18];\n\t"
      "@q3 ld.global.cg.v4.f32 {%12, %13, %14, %15}, [%19];\n\t}"
      : "+f"(v[0].x), "+f"(v[0].y), "+f"(v[0].z), "+f"(v[0].w), "+f"(v[1].x), "+f"(v[1].y), "+f"(v[1].z),
        "+f"(v[1].w), "+f"(v[2].x), "+f"(v[2].y), "+f"(v[2].z), "+f"(v[2].w), "+f"(v[3].x), "+f"(v[3].y),
        "+f"(v[3].z), "+f"(v[3].w)
      : "l"(p0), "l"(p1), "l"(p2), "l"(p3), "r"(n)
      : "memory");
}

// A plain 16-byte global store (`p` 16-byte aligned), where the compiler cannot see the alignment.
__device__ __forceinline__ void st_v4(void* p, uint4 v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// Loads through the read-only (non-coherent) path: data no thread writes while the grid runs.
__device__ __forceinline__ uint4 ld_nc_v4(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t ld_nc_u16(const uint8_t* p) {
  uint16_t v;
  asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}

}  // namespace fl::ptx
