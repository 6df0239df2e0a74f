// Programmatic dependent launch: overlap this grid's start with the previous grid's tail.
#pragma once

namespace fl::ptx {

// Blocks until the grids this one depends on have completed and their memory is visible.
__device__ __forceinline__ void griddep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Lets the next grid in the stream start launching (it still waits for us in griddep_wait).
__device__ __forceinline__ void griddep_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

}  // namespace fl::ptx
