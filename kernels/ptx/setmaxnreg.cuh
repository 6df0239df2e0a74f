// Per-warpgroup register reallocation (sm_90a). Needs a register cap at kernel entry
// (__launch_bounds__(threads, 1)); every warp of the warpgroup executes the same instruction.
#pragma once

namespace fl::ptx {

template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}

template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}

}  // namespace fl::ptx
