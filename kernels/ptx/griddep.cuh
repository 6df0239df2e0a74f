// Programmatic dependent launch: overlap this grid's start with the previous grid's tail.
#pragma once

namespace fl::ptx {

// Blocks until the grids this one depends on have completed and their memory is visible.
__device__ __forceinline__ void griddep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// The same, once a, b and c are in registers: values read before the wait (kernel parameters, which no
// earlier grid writes) are then loaded while it waits, not after it.
__device__ __forceinline__ void griddep_wait_holding(uint32_t a, uint32_t b, const void* c) {
  asm volatile("griddepcontrol.wait;" ::"r"(a), "r"(b), "l"(c) : "memory");
}

// Lets the next grid in the stream start launching (it still waits for us in griddep_wait).
__device__ __forceinline__ void griddep_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

}  // namespace fl::ptx
