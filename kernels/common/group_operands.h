// The per-group operand pointers every kernel family reads, and their copy from the launcher's
// buffer ([a b c sfa sfb m n k] x G, launcher.h).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

namespace fl {

struct GroupOperands {
  const uint8_t* a;    // [m, k/2] packed E2M1, row-major
  const uint8_t* b;    // [n, k/2]
  const uint8_t* sfa;  // reordered E4M3 scales: (ceil(m/128), k/64, 32, 4, 4) contiguous
  const uint8_t* sfb;
  __half* c;           // [m, n]
};

// Group g's pointers out of the launcher's buffer of G groups.
inline void load_operands(GroupOperands& o, const int64_t* buf, int G, int g) {
  o.a = reinterpret_cast<const uint8_t*>(buf[0 * G + g]);
  o.b = reinterpret_cast<const uint8_t*>(buf[1 * G + g]);
  o.c = reinterpret_cast<__half*>(buf[2 * G + g]);
  o.sfa = reinterpret_cast<const uint8_t*>(buf[3 * G + g]);
  o.sfb = reinterpret_cast<const uint8_t*>(buf[4 * G + g]);
}

}  // namespace fl
