// Shape limits every architecture shares, and the integer helpers the planners use. Plain C++.
#pragma once
#include <cstdint>

namespace fl {

// Checked before any launch (the unpacker reports them as ValueError).
constexpr int64_t kMaxExtent = (int64_t{1} << 31) - 1;  // M, N, K each fit int32 (TMA coordinates)
constexpr int64_t kKMultiple = 64;                      // K: four 16-element scale blocks per stage
constexpr int64_t kMaxTilesPerLaunch = (int64_t{1} << 31) - 1;

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

}  // namespace fl
