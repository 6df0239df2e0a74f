// How many thread-block clusters of each size (1..8 CTAs) the GPU runs at once for CTAs of 512 threads
// that take a whole SM (shared memory past half an SM's), or half of one: the skinny kernel's K split
// (kernels/skinny_plan.h) runs one cluster per item, and clusters past this number wait for a second wave.
//   nvcc -O2 -std=c++17 -arch=sm_90a -o /tmp/cluster_occupancy tools/cluster_occupancy.cu && /tmp/cluster_occupancy
#include <cuda_runtime.h>

#include <cstdio>

__global__ void __launch_bounds__(512, 1) dummy(float* out) {
  extern __shared__ float smem[];
  smem[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  if (out) out[blockIdx.x] = smem[threadIdx.x ^ 1];
}

int main() {
  int dev = 0, sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaFuncSetAttribute(dummy, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  std::printf("SMs %d\n| CTAs per SM | cluster size | clusters at once | CTAs at once |\n|---|---|---|---|\n", sms);
  for (int per_sm : {1, 2}) {
    const size_t smem = per_sm == 1 ? 150 * 1024 : 100 * 1024;
    for (int size = 1; size <= 8; ++size) {
      cudaLaunchConfig_t cfg = {};
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = size;
      attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
      cfg.gridDim = dim3(size * 64);
      cfg.blockDim = dim3(512);
      cfg.dynamicSmemBytes = smem;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      int clusters = -1;
      const cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, dummy, &cfg);
      if (e != cudaSuccess) {
        std::printf("| %d | %d | error: %s | |\n", per_sm, size, cudaGetErrorString(e));
        continue;
      }
      std::printf("| %d | %d | %d | %d |\n", per_sm, size, clusters, clusters * size);
    }
  }
  return 0;
}
