// Thread-block clusters (sm_90): a CTA's rank in its cluster and its cluster's index, the cluster-wide
// barrier, and loads from a peer CTA's shared memory (distributed shared memory).
#pragma once
#include <cstdint>

namespace fl::ptx {

__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// The cluster's index in the grid along x (launches with a cluster dimension).
__device__ __forceinline__ uint32_t cluster_id_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return r;
}

// Every thread of every CTA of the cluster arrives, then waits for all the others: the shared-memory writes
// before it (release) are visible to the cluster's loads after it (acquire). Every thread of the CTA must
// reach it (.aligned: the warps' threads together).
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n\t"
      "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The address in CTA `rank`'s shared memory of the variable at `p` in this CTA's (a shared::cluster address).
__device__ __forceinline__ uint32_t map_shared_rank(const void* p, uint32_t rank) {
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(out)
               : "r"((uint32_t)__cvta_generic_to_shared(p)), "r"(rank));
  return out;
}

__device__ __forceinline__ float ld_shared_cluster_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}

}  // namespace fl::ptx
