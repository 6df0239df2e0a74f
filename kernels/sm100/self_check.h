// The sm_100a kernel's self-check, host side, in plain C++ (no CUDA types: tests/cpp/sm100_self_check_probe.cpp
// builds it with the host compiler): the launches and groups it runs, their input bytes, the exact C expected from
// those bytes, the comparison with what the kernel wrote, and the messages. kernels/sm100/self_check_run.h allocates,
// launches, waits and calls these; kernels/sm100/launch.cu runs that once per device, at set-up.
//
// Exact by construction: every 16-element block of an operand row takes one (E2M1 magnitude, E4M3 scale) pair
// whose product is its family's value, 1 or 1.5, and each element is that value with a random sign, or +0 or -0.
// Every product of an A and a B element is then 0, +-1, +-1.5 or +-2.25: a multiple of u = 1, 1/2 or 1/4 by the
// families of the group's two operands, and each group's K keeps the sum of one C element's |products| at most
// 2048 u. Every partial sum, in any order, is then a multiple of u of magnitude at most 2048 u: exact in fp16, so in
// fp32, whatever the order and width of the MMA's additions. reference() checks this on the bytes rather than
// assuming it, and computes the expected C from the bytes alone (E2M1 and E4M3 decoded from their definitions, the
// scale layout of the task's contract, sums in double), with none of the kernel's encoders.
//
// What it covers: both kernels (one tile per CTA, and persistent on fewer CTAs than tiles, so CTAs take several
// tiles, both accumulator buffers, a stage ring that wraps across tiles and a tensor-map ring that wraps across
// groups) with both parameter blocks; 9 groups; K from one 64-wide chunk to 8 stages of 256 (more than the 6-stage
// ring), full and partial last stages; M and N from 1 to 300, tiles with 1 to 128 valid rows and columns (MMA N 16 to
// 128); all 16 E2M1 codes and 8 E4M3 scales (powers of two and 1.5 times them) in both operands; scale bytes past M
// and N set to E4M3 NaN; C filled with 0xffff first and guarded on both sides. What it cannot catch: anything that
// shows only at other shapes (large M, N or K, many tiles per SM, more than 9 groups, launches split past 256
// groups), other data (operand bytes past M or N, sums that round), timing-dependent faults that these small launches
// do not hit, and speed.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace fl::sm100::check {

// ---------------------------------------------------------------- what runs
// Value families of an operand's blocks (bits): every element is 0 or +-1, or 0 or +-1.5, or either by block.
constexpr uint8_t kOne = 1, kThreeHalves = 2, kBoth = 3;

struct GroupSpec {
  int32_t m, n, k;
  uint8_t fam_a, fam_b;
};

// u = 1 where both operands are kOne (K <= 2048), 1/2 where one is (sum of |products| <= 1.5 K = 3 K u: K <= 682),
// 1/4 where neither is (2.25 K = 9 K u: K <= 227).
constexpr GroupSpec kGroups[] = {
    {136, 129, 1856, kOne, kOne},   // 8 K stages, the last of 1 chunk; 2 x 2 tiles, MMA N 128 and 16
    {40, 257, 192, kBoth, kBoth},   // all codes and scales in both operands; 1 stage of 3 chunks; 3 B tiles, 1 row last
    {1, 100, 64, kBoth, kBoth},     // one A row, one 64-wide chunk
    {130, 128, 384, kOne, kBoth},   // N a whole tile; 2 stages, the last of 2 chunks; MMA N 128 and 16
    {72, 200, 512, kBoth, kOne},    // 2 full stages; MMA N 80
    {17, 33, 256, kBoth, kOne},     // 1 full stage; MMA N 32
    {100, 16, 128, kBoth, kBoth},   // 16 B rows; MMA N 112
    {128, 64, 64, kOne, kOne},      // M a whole tile
    {5, 300, 320, kOne, kBoth},     // 3 B tiles; 2 stages, the last of 1 chunk
};
constexpr int kNumGroups = sizeof(kGroups) / sizeof(kGroups[0]);

// The launches, each of every group, into its own C: a kernel (one tile per CTA, or persistent on `grid` CTAs) with
// the small (16-group) or the large (256-group) parameter block.
struct LaunchSpec {
  int large;        // 0: the 16-group parameter block, 1: the 256-group one
  int persistent;   // 0: one tile per CTA (a CTA per tile), 1: persistent
  int grid;         // CTAs of the persistent kernel
};
constexpr LaunchSpec kLaunches[] = {{0, 0, 0}, {0, 1, 1}, {1, 0, 0}, {1, 1, 3}};
constexpr int kNumLaunches = sizeof(kLaunches) / sizeof(kLaunches[0]);

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// Tiles of 128 A rows x 128 B rows.
constexpr int64_t tiles(const GroupSpec& g) { return ceil_div(g.m, 128) * ceil_div(g.n, 128); }
inline int64_t total_tiles() {
  int64_t t = 0;
  for (const GroupSpec& g : kGroups) t += tiles(g);
  return t;
}

// ---------------------------------------------------------------- where the bytes go
// One device buffer: the inputs (each group's A, B, scales of A, scales of B), then per launch and group a C between
// two guards of kGuard fp16 elements. Everything starts on a 256-byte boundary. The C part is filled with kFill bytes
// before the launches: the guards must keep them, every C element must be overwritten.
constexpr int64_t kGuard = 64;
constexpr uint8_t kFill = 0xff;
constexpr uint16_t kFillHalf = 0xffff;
constexpr uint8_t kScalePad = 0x7f;  // E4M3 NaN: the scales of rows past M or N (the contract allows any value)

struct Layout {
  size_t a[kNumGroups], b[kNumGroups], sfa[kNumGroups], sfb[kNumGroups];  // offsets of the inputs
  size_t c[kNumLaunches][kNumGroups];  // offset of each C's first element (its guard is the kGuard elements before)
  size_t inputs_bytes;                 // [0, inputs_bytes): the inputs
  size_t c_begin, total_bytes;         // [c_begin, total_bytes): the Cs and their guards
};

constexpr size_t align256(size_t x) { return (x + 255) / 256 * 256; }
// Bytes of an operand's scales in the contract's layout: (ceil(rows / 128), K / 64, 32, 4, 4).
constexpr size_t scale_bytes(int64_t rows, int64_t k) { return (size_t)(ceil_div(rows, 128) * (k / 64) * 512); }

inline Layout layout() {
  Layout l{};
  size_t at = 0;
  for (int g = 0; g < kNumGroups; ++g) {
    const GroupSpec& s = kGroups[g];
    l.a[g] = at, at = align256(at + (size_t)s.m * s.k / 2);
    l.b[g] = at, at = align256(at + (size_t)s.n * s.k / 2);
    l.sfa[g] = at, at = align256(at + scale_bytes(s.m, s.k));
    l.sfb[g] = at, at = align256(at + scale_bytes(s.n, s.k));
  }
  l.inputs_bytes = at;
  l.c_begin = at;
  for (int i = 0; i < kNumLaunches; ++i)
    for (int g = 0; g < kNumGroups; ++g) {
      l.c[i][g] = at + 2 * kGuard;
      at = align256(at + 2 * (size_t)(kGuard + (int64_t)kGroups[g].m * kGroups[g].n + kGuard));
    }
  l.total_bytes = at;
  return l;
}

// ---------------------------------------------------------------- the contract's encodings, from their definitions
// E2M1 nibble: bit 3 the sign, bits 0-2 the magnitude 0, 0.5, 1, 1.5, 2, 3, 4, 6.
inline double e2m1(unsigned nibble) {
  static const double mag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (nibble & 8) ? -mag[nibble & 7] : mag[nibble & 7];
}

// E4M3 (float8_e4m3fn): sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 subnormal; S.1111.111 NaN.
inline double e4m3(uint8_t byte) {
  const int e = (byte >> 3) & 15, m = byte & 7;
  double v;
  if (e == 15 && m == 7) v = NAN;
  else if (e == 0) v = std::ldexp(m / 8.0, -6);
  else v = std::ldexp(1.0 + m / 8.0, e - 7);
  return (byte & 0x80) ? -v : v;
}

// The scale of row `row`, K block j (16 elements) in the contract's layout: storage index
// (row / 128, j / 4, row % 32, (row % 128) / 32, j % 4) of the contiguous (ceil(rows/128), K/64, 32, 4, 4) array.
inline size_t scale_index(int64_t row, int64_t j, int64_t k) {
  return (size_t)((((row / 128) * (k / 64) + j / 4) * 32 + row % 32) * 16 + ((row % 128) / 32) * 4 + j % 4);
}

// The E2M1 nibble of element (row, kk) of a [rows, K/2] byte matrix: the lower K index in the low nibble.
inline unsigned nibble_at(const uint8_t* data, int64_t row, int64_t kk, int64_t k) {
  const uint8_t byte = data[row * (k / 2) + kk / 2];
  return (kk & 1) ? byte >> 4 : byte & 15u;
}

// fp16 (IEEE binary16) bits -> value.
inline double fp16_value(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31) v = m ? NAN : INFINITY;
  else if (e == 0) v = std::ldexp((double)m, -24);
  else v = std::ldexp(1024.0 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

// Whether v is exactly an fp16 value (finite; normal values carry 11 significant bits, subnormals are multiples of
// 2^-24).
inline bool fp16_exact(double v) {
  if (!std::isfinite(v) || std::fabs(v) > 65504.0) return false;
  if (v == 0) return true;
  int e;
  std::frexp(v, &e);  // |v| in [2^(e-1), 2^e)
  const int unit = e - 1 >= -14 ? e - 1 - 10 : -24;
  const double q = std::ldexp(v, -unit);
  return q == std::floor(q);
}

// The exponent of the lowest set bit of a nonzero finite double.
inline int low_exponent(double x) {
  int e;
  const double f = std::frexp(std::fabs(x), &e);
  uint64_t m = (uint64_t)std::ldexp(f, 53);
  int z = 0;
  while (!(m & 1)) m >>= 1, ++z;
  return e - 53 + z;
}

// ---------------------------------------------------------------- inputs
struct Rng {  // splitmix64: the same bytes from every compiler and library
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

struct Pair {
  uint8_t code;   // E2M1 magnitude code (1..7)
  uint8_t scale;  // E4M3 byte
};
// code x scale = 1: 0.5 x 2, 1 x 1, 2 x 0.5, 4 x 0.25.
constexpr Pair kPairsOne[] = {{1, 0x40}, {2, 0x38}, {4, 0x30}, {6, 0x28}};
// code x scale = 1.5: 1.5 x 1, 3 x 0.5, 6 x 0.25, 0.5 x 3, 1 x 1.5, 2 x 0.75, 4 x 0.375.
constexpr Pair kPairsThreeHalves[] = {{3, 0x38}, {5, 0x30}, {7, 0x28}, {1, 0x44}, {2, 0x3C}, {4, 0x34}, {6, 0x2C}};

// One operand: [rows, K/2] E2M1 bytes and its scales in the contract's layout (rows past `rows` padded).
inline void make_operand(int32_t rows, int32_t k, uint8_t families, Rng& rng, uint8_t* data, uint8_t* sf) {
  std::memset(sf, kScalePad, scale_bytes(rows, k));
  std::memset(data, 0, (size_t)rows * k / 2);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k / 16; ++j) {
      const bool one = families == kBoth ? (rng.next() & 1) != 0 : families == kOne;
      const Pair p = one ? kPairsOne[rng.next() % 4] : kPairsThreeHalves[rng.next() % 7];
      sf[scale_index(r, j, k)] = p.scale;
      for (int64_t e = 0; e < 16; ++e) {
        const uint64_t x = rng.next();
        // a quarter +-0 (half of them -0), else the pair's code with a random sign
        const unsigned code = (x & 7) == 0 ? 0u : (x & 7) == 1 ? 8u : p.code | ((x >> 3) & 1u) << 3;
        const int64_t kk = j * 16 + e;
        data[r * (k / 2) + kk / 2] |= (uint8_t)(code << (4 * (kk & 1)));
      }
    }
}

// The inputs part of the buffer (layout().inputs_bytes bytes; the gaps between parts are zero).
inline void make_inputs(const Layout& l, uint8_t* image) {
  std::memset(image, 0, l.inputs_bytes);
  for (int g = 0; g < kNumGroups; ++g) {
    const GroupSpec& s = kGroups[g];
    Rng rng{0x5e1fc4ec00000000ull + (uint64_t)g};
    make_operand(s.m, s.k, s.fam_a, rng, image + l.a[g], image + l.sfa[g]);
    make_operand(s.n, s.k, s.fam_b, rng, image + l.b[g], image + l.sfb[g]);
  }
}

// ---------------------------------------------------------------- expected C
struct Expected {
  std::vector<double> c[kNumGroups];  // row-major [m, n], exact
};

// One operand dequantised: [rows, k] doubles, e2m1 x scale.
inline void dequantize(const uint8_t* data, const uint8_t* sf, int64_t rows, int64_t k, std::vector<double>& out) {
  out.resize((size_t)(rows * k));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t kk = 0; kk < k; ++kk)
      out[(size_t)(r * k + kk)] = e2m1(nibble_at(data, r, kk, k)) * e4m3(sf[scale_index(r, kk / 16, k)]);
}

// The lowest set bit over an operand's nonzero values (1000 where all are zero), and whether all are finite.
inline bool low_bit(const std::vector<double>& v, int* low) {
  *low = 1000;
  for (double x : v) {
    if (!std::isfinite(x)) return false;
    if (x != 0) {
      const int e = low_exponent(x);
      if (e < *low) *low = e;
    }
  }
  return true;
}

// Every group's C from the inputs part of the buffer, in double. False (with `why`) where the inputs would not make
// every partial sum exact in fp16: a defect of the inputs, not of the kernel.
inline bool reference(const Layout& l, const uint8_t* image, Expected& out, char* why, size_t why_len) {
  std::vector<double> a, b;
  for (int g = 0; g < kNumGroups; ++g) {
    const GroupSpec& s = kGroups[g];
    dequantize(image + l.a[g], image + l.sfa[g], s.m, s.k, a);
    dequantize(image + l.b[g], image + l.sfb[g], s.n, s.k, b);
    int low_a, low_b;
    if (!low_bit(a, &low_a) || !low_bit(b, &low_b)) {
      std::snprintf(why, why_len, "group %d: an operand value is not finite", g);
      return false;
    }
    // every product is a multiple of 2^unit; a partial sum of at most 2048 units has at most 11 significant bits
    const int unit = low_a + low_b;
    const double bound = std::ldexp(2048.0, unit);
    std::vector<double>& c = out.c[g];
    c.assign((size_t)s.m * s.n, 0.0);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        const double* x = &a[(size_t)(i * s.k)];
        const double* y = &b[(size_t)(j * s.k)];
        // four running sums (K is a multiple of 64): every partial sum is exact when the bound below holds
        double sum[4] = {0, 0, 0, 0}, abs[4] = {0, 0, 0, 0};
        for (int64_t kk = 0; kk < s.k; kk += 4)
          for (int q = 0; q < 4; ++q) {
            const double t = x[kk + q] * y[kk + q];
            sum[q] += t;
            abs[q] += std::fabs(t);
          }
        const double mag = (abs[0] + abs[1]) + (abs[2] + abs[3]);
        if (mag > 0 && (mag > bound || unit < -24 || !fp16_exact(mag))) {
          std::snprintf(why, why_len,
                        "group %d: C[%lld, %lld]: the sum of |products| is %.17g, more than 2048 x 2^%d, or not "
                        "an fp16 value",
                        g, (long long)i, (long long)j, mag, unit);
          return false;
        }
        c[(size_t)(i * s.n + j)] = (sum[0] + sum[1]) + (sum[2] + sum[3]);
      }
  }
  return true;
}

// ---------------------------------------------------------------- comparison
struct Mismatch {
  int launch = -1, group = -1;
  int where = 0;             // 0: C[row, col]; -1: element `col` of the guard before C; 1: of the guard after
  int64_t row = 0, col = 0;
  uint16_t got = 0;
  double want = 0;           // (in C)
  int64_t in_group = 0;      // elements that differ in the group's C and its guards
  int64_t in_launch = 0;     // ... in all the launch's groups
};

inline uint16_t half_at(const uint8_t* p, size_t byte_offset) {
  uint16_t h;
  std::memcpy(&h, p + byte_offset, 2);
  return h;
}

// The first difference (launches, then groups, then guard before, C row-major, guard after) between the C part of
// the buffer (`cpart`: bytes [l.c_begin, l.total_bytes) as the launches left them) and the expected values, with
// counts for its launch and group; false where there is none.
inline bool compare(const Layout& l, const uint8_t* cpart, const Expected& want, Mismatch* first) {
  for (int i = 0; i < kNumLaunches; ++i) {
    Mismatch m;
    for (int g = 0; g < kNumGroups; ++g) {
      const GroupSpec& s = kGroups[g];
      const size_t c0 = l.c[i][g] - l.c_begin;
      int64_t bad = 0;
      auto note = [&](int where, int64_t row, int64_t col, uint16_t got, double v) {
        if (bad++ == 0 && m.group < 0) m.group = g, m.where = where, m.row = row, m.col = col, m.got = got, m.want = v;
      };
      for (int64_t e = 0; e < kGuard; ++e) {
        const uint16_t h = half_at(cpart, c0 - 2 * (size_t)(kGuard - e));
        if (h != kFillHalf) note(-1, 0, e, h, 0);
      }
      for (int64_t r = 0; r < s.m; ++r)
        for (int64_t c = 0; c < s.n; ++c) {
          const size_t e = (size_t)(r * s.n + c);
          const uint16_t h = half_at(cpart, c0 + 2 * e);
          if (!(fp16_value(h) == want.c[g][e])) note(0, r, c, h, want.c[g][e]);  // (NaN is never equal)
        }
      for (int64_t e = 0; e < kGuard; ++e) {
        const uint16_t h = half_at(cpart, c0 + 2 * (size_t)(s.m * s.n + e));
        if (h != kFillHalf) note(1, 0, e, h, 0);
      }
      if (bad && m.group == g) m.in_group = bad;
      m.in_launch += bad;
    }
    if (m.in_launch) {
      m.launch = i;
      *first = m;
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------- messages
constexpr const char* kNotRun =
    "fastlaunch does not run the sm_100a kernel on this device (FASTLAUNCH_SM100_SELF_CHECK=0 skips the check, for "
    "testing the kernel itself)";

// "launch 2 of 4 (the persistent kernel, 16-group parameter block, 1 CTA for 18 tiles)"
inline void describe_launch(char* buf, size_t len, int i) {
  const LaunchSpec& s = kLaunches[i];
  const long long t = (long long)total_tiles();
  if (s.persistent)
    std::snprintf(buf, len, "launch %d of %d (the persistent kernel, %s parameter block, %d CTA%s for %lld tiles)",
                  i + 1, kNumLaunches, s.large ? "256-group" : "16-group", s.grid, s.grid == 1 ? "" : "s", t);
  else
    std::snprintf(buf, len, "launch %d of %d (the one-tile-per-CTA kernel, %s parameter block, %lld CTAs)", i + 1,
                  kNumLaunches, s.large ? "256-group" : "16-group", t);
}

// The failure message: "the sm_100a kernel failed its self-check on cuda:D: WHAT; fastlaunch does not run ...".
inline void failure(char* buf, size_t len, int device, const char* what) {
  std::snprintf(buf, len, "the sm_100a kernel failed its self-check on cuda:%d: %s; %s", device, what, kNotRun);
}

// What a mismatch is, e.g. "launch 2 of 4 (...), group 1 (M=40, N=257, K=192): C[3, 17] = 2.5 (fp16 0x4100),
// expected 3; 57 elements of the group differ, 60 of the launch".
inline void describe_mismatch(char* buf, size_t len, const Mismatch& m) {
  char launch[160], what[160];
  describe_launch(launch, sizeof(launch), m.launch);
  const GroupSpec& s = kGroups[m.group];
  if (m.where == 0 && m.got == kFillHalf)
    std::snprintf(what, sizeof(what), "C[%lld, %lld] was not written (it holds the fill 0x%04x), expected %.9g",
                  (long long)m.row, (long long)m.col, kFillHalf, m.want);
  else if (m.where == 0)
    std::snprintf(what, sizeof(what), "C[%lld, %lld] = %.9g (fp16 0x%04x), expected %.9g", (long long)m.row,
                  (long long)m.col, fp16_value(m.got), m.got, m.want);
  else
    std::snprintf(what, sizeof(what),
                  "a write outside C: element %lld of the %lld-element guard %s C holds 0x%04x, expected the fill "
                  "0x%04x", (long long)m.col, (long long)kGuard, m.where < 0 ? "before" : "after", m.got, kFillHalf);
  std::snprintf(buf, len,
                "%s, group %d (M=%d, N=%d, K=%d): %s; %lld element%s of the group differ%s, %lld of the launch", launch,
                m.group, s.m, s.n, s.k, what, (long long)m.in_group, m.in_group == 1 ? "" : "s",
                m.in_group == 1 ? "s" : "", (long long)m.in_launch);
}

// The launches had not finished after `seconds`.
inline void describe_timeout(char* buf, size_t len, double seconds) {
  std::snprintf(buf, len,
                "its %d launches had not finished after %.0f s: a hang. The kernel's barrier waits trap when stuck, "
                "which makes the device's CUDA context unusable (every later CUDA call in this process fails); a "
                "kernel stuck elsewhere keeps running, and work queued after it on the device waits",
                kNumLaunches, seconds);
}

// The launches ended in CUDA error `name` (`text`); sticky: the context is unusable after it.
inline void describe_cuda_error(char* buf, size_t len, const char* name, const char* text, bool sticky) {
  std::snprintf(buf, len, "its launches ended in a CUDA error: %s (%s)%s", text, name,
                sticky ? ", from a trap of the kernel's bounded barrier waits (a hang) or a fault; the error is "
                         "sticky: the device's CUDA context is unusable, and every later CUDA call in this process "
                         "fails"
                       : "");
}

}  // namespace fl::sm100::check
