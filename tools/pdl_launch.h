// PdlLaunch: the launch configuration of a programmatic dependent launch (the second kernel of a Hopper
// call, as the launcher issues it) for the standalone tools (launch_latency.cu, coresident_probe.cu).
#pragma once
#include <cuda_runtime.h>

struct PdlLaunch {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg{};
  PdlLaunch(int grid, int threads, int smem, cudaStream_t stream) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = grid;
    cfg.blockDim = threads;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  PdlLaunch(const PdlLaunch&) = delete;  // cfg points into attr
};
