// tcgen05 (sm_100a): tensor memory allocation, copies into it, loads out of it, the block-scaled
// MMA that accumulates in it, and the fences and commits that order them. One thin wrapper each.
// Tensor-memory addresses are (lane << 16) | column (kernels/sm100/desc.h: tmem_addr).
#pragma once
#include <cstdint>

namespace fl::ptx {

// Whole warp: allocates `cols` columns (a power of two, 32..512) and writes the base address to
// shared memory at `dst_smem`.
__device__ __forceinline__ void tmem_alloc(uint32_t dst_smem, uint32_t cols) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(dst_smem), "r"(cols)
               : "memory");
}

// Whole warp: lets other CTAs on this SM allocate (this CTA allocates nothing more).
__device__ __forceinline__ void tmem_relinquish_alloc_permit() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
}

// Whole warp, the one that allocated.
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, uint32_t cols) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(cols) : "memory");
}

// Orders tcgen05 operations around a thread synchronisation (barrier, mbarrier wait).
__device__ __forceinline__ void tcgen05_fence_before() {
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
}
__device__ __forceinline__ void tcgen05_fence_after() {
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
}

// One thread: D[taddr_d] (+)= A(adesc) . B(bdesc)^T with E2M1 operands in shared memory and one
// E4M3 scale per 16 K elements in tensor memory (K = 64 per instruction). `accumulate` false
// overwrites D.
__device__ __forceinline__ void mma_mxf4nvf4(uint32_t taddr_d, uint64_t adesc, uint64_t bdesc, uint32_t idesc,
                                             uint32_t taddr_sfa, uint32_t taddr_sfb, bool accumulate) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %4, 0;\n"
      " tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%0], %1, %2, %3, [%5], [%6], p;\n}" ::"r"(
          taddr_d),
      "l"(adesc), "l"(bdesc), "r"(idesc), "r"((uint32_t)accumulate), "r"(taddr_sfa), "r"(taddr_sfb)
      : "memory");
}

// One thread: 32 rows x 16 bytes from shared memory (sdesc, no swizzle) into columns taddr..taddr+3
// of all four 32-lane quadrants of tensor memory.
__device__ __forceinline__ void tmem_cp_32x128b_warpx4(uint32_t taddr, uint64_t sdesc) {
  asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" ::"r"(taddr), "l"(sdesc) : "memory");
}

// One thread: arrive once on `bar` when every tcgen05 operation this thread issued so far is done.
__device__ __forceinline__ void tcgen05_commit(uint32_t bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(bar)
               : "memory");
}

// Whole warp: lane i of the warp's quadrant gets 16 consecutive 32-bit columns of its lane, from
// taddr's column on. The values are valid after tmem_wait_ld().
__device__ __forceinline__ void tmem_ld_32x32b_x16(uint32_t taddr, uint32_t (&v)[16]) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x16.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
      "%15}, [%16];"
      : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7]), "=r"(v[8]),
        "=r"(v[9]), "=r"(v[10]), "=r"(v[11]), "=r"(v[12]), "=r"(v[13]), "=r"(v[14]), "=r"(v[15])
      : "r"(taddr)
      : "memory");
}

__device__ __forceinline__ void tmem_wait_ld() { asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory"); }

}  // namespace fl::ptx
