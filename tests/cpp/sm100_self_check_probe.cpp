// Answers queries about the sm_100a kernel's self-check (kernels/sm100/self_check.h, built here by the host compiler)
// for tests/cpu/test_sm100_self_check.py, one answer line per query line:
//   ring                      -> K_STAGES MAP_RING GROUPS_SMALL GROUPS_LARGE        (kernels/sm100/desc.h)
//   cases                     -> G L TILES; then per group "m n k fam_a fam_b", per launch "large persistent grid"
//                                (all on the one line, separated by ';')
//   exact                     -> "ok" or "fail WHY": the inputs and the exactness check of reference()
//   stats G                   -> UNIT_LOW MAX_ABS_C NONZERO CODES_A CODES_B SCALES_A SCALES_B of group G: the lowest
//                                set bit over its products, max |C|, the fraction of nonzero products, and the E2M1 codes
//                                and E4M3 scale bytes its valid rows use (hex bit masks / sorted hex bytes joined by ',')
//   dump G                    -> A_HEX B_HEX SFA_HEX SFB_HEX C...: group G's input bytes and expected C (%.17g)
//   perturb G WHAT OFF BYTE   -> reference()'s outcome with byte OFF of group G's WHAT (a, b, sfa, sfb) set to BYTE
//   compare [L G W R C BITS]* -> the comparison of a C part holding the expected values (and fills in the guards), with
//                                each listed element set to BITS (W: 0 C[R, C], -1 / 1 element C of the guard before /
//                                after): "none", or the failure message
//   timeout S | cudaerr NAME STICKY TEXT...   -> the failure message for a timeout / a CUDA error
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sm100/desc.h"
#include "sm100/self_check.h"

namespace ck = fl::sm100::check;

namespace {

// An exact fp16 value's bits (v must be exact: ck::fp16_exact).
uint16_t fp16_bits(double v) {
  if (v == 0) return std::signbit(v) ? 0x8000 : 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  v = std::fabs(v);
  int e;
  std::frexp(v, &e);
  if (e - 1 >= -14) return sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)(std::ldexp(v, -(e - 11)) - 1024);
  return sign | (uint16_t)std::ldexp(v, 24);
}

std::string hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) s[2 * i] = d[p[i] >> 4], s[2 * i + 1] = d[p[i] & 15];
  return s;
}

struct Setup {
  ck::Layout l = ck::layout();
  std::vector<uint8_t> image;
  ck::Expected want;
  bool ok = false;
  char why[512] = "";
  Setup() : image(l.inputs_bytes) {
    ck::make_inputs(l, image.data());
    ok = ck::reference(l, image.data(), want, why, sizeof(why));
  }
};

}  // namespace

int main() {
  Setup su;
  const ck::Layout& l = su.l;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string op;
    in >> op;
    if (op == "ring") {
      std::printf("%d %d %d %d\n", fl::sm100::kStages, fl::sm100::kMapRing, fl::sm100::kGroupsSmall,
                  fl::sm100::kGroupsPerLaunch);
    } else if (op == "cases") {
      std::printf("%d %d %lld", ck::kNumGroups, ck::kNumLaunches, (long long)ck::total_tiles());
      for (const ck::GroupSpec& g : ck::kGroups) std::printf(";%d %d %d %d %d", g.m, g.n, g.k, g.fam_a, g.fam_b);
      for (const ck::LaunchSpec& s : ck::kLaunches) std::printf(";%d %d %d", s.large, s.persistent, s.grid);
      std::printf("\n");
    } else if (op == "exact") {
      std::printf(su.ok ? "ok\n" : "fail %s\n", su.why);
    } else if (op == "stats") {
      int g;
      in >> g;
      const ck::GroupSpec& s = ck::kGroups[g];
      std::vector<double> a, b;
      ck::dequantize(su.image.data() + l.a[g], su.image.data() + l.sfa[g], s.m, s.k, a);
      ck::dequantize(su.image.data() + l.b[g], su.image.data() + l.sfb[g], s.n, s.k, b);
      int low = 1000;
      int64_t nonzero = 0;
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j)
          for (int64_t k = 0; k < s.k; ++k) {
            const double t = a[(size_t)(i * s.k + k)] * b[(size_t)(j * s.k + k)];
            if (t != 0) ++nonzero, low = std::min(low, ck::low_exponent(t));
          }
      double max_c = 0;
      for (double c : su.want.c[g]) max_c = std::max(max_c, std::fabs(c));
      auto codes = [&](size_t off, int64_t rows) {
        unsigned mask = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t k = 0; k < s.k; ++k) mask |= 1u << ck::nibble_at(su.image.data() + off, r, k, s.k);
        return mask;
      };
      auto scales = [&](size_t off, int64_t rows) {
        std::set<int> seen;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < s.k / 16; ++j) seen.insert(su.image[off + ck::scale_index(r, j, s.k)]);
        std::string out;
        for (int v : seen) {
          char t[8];
          std::snprintf(t, sizeof(t), "%s%02x", out.empty() ? "" : ",", v);
          out += t;
        }
        return out;
      };
      std::printf("%d %.17g %.6f %x %x %s %s\n", low, max_c, (double)nonzero / ((double)s.m * s.n * s.k),
                  codes(l.a[g], s.m), codes(l.b[g], s.n), scales(l.sfa[g], s.m).c_str(), scales(l.sfb[g], s.n).c_str());
    } else if (op == "dump") {
      int g;
      in >> g;
      const ck::GroupSpec& s = ck::kGroups[g];
      const uint8_t* p = su.image.data();
      std::printf("%s %s %s %s", hex(p + l.a[g], (size_t)s.m * s.k / 2).c_str(),
                  hex(p + l.b[g], (size_t)s.n * s.k / 2).c_str(), hex(p + l.sfa[g], ck::scale_bytes(s.m, s.k)).c_str(),
                  hex(p + l.sfb[g], ck::scale_bytes(s.n, s.k)).c_str());
      for (double c : su.want.c[g]) std::printf(" %.17g", c);
      std::printf("\n");
    } else if (op == "perturb") {
      int g, off, byte;
      std::string what;
      in >> g >> what >> off >> byte;
      std::vector<uint8_t> image = su.image;
      const size_t base = what == "a" ? l.a[g] : what == "b" ? l.b[g] : what == "sfa" ? l.sfa[g] : l.sfb[g];
      image[base + off] = (uint8_t)byte;
      ck::Expected want;
      char why[512] = "";
      const bool ok = ck::reference(l, image.data(), want, why, sizeof(why));
      std::printf(ok ? "ok\n" : "fail %s\n", why);
    } else if (op == "compare") {
      std::vector<uint8_t> cpart(l.total_bytes - l.c_begin, ck::kFill);
      for (int i = 0; i < ck::kNumLaunches; ++i)
        for (int g = 0; g < ck::kNumGroups; ++g)
          for (size_t e = 0; e < su.want.c[g].size(); ++e) {
            const uint16_t h = fp16_bits(su.want.c[g][e]);
            std::memcpy(&cpart[l.c[i][g] - l.c_begin + 2 * e], &h, 2);
          }
      int li, g, w;
      long long r, c;
      unsigned bits;
      while (in >> li >> g >> w >> r >> c >> std::hex >> bits >> std::dec) {
        const ck::GroupSpec& s = ck::kGroups[g];
        const int64_t e = w == 0 ? r * s.n + c : w < 0 ? c - ck::kGuard : (int64_t)s.m * s.n + c;
        const uint16_t h = (uint16_t)bits;
        std::memcpy(&cpart[(size_t)((int64_t)(l.c[li][g] - l.c_begin) + 2 * e)], &h, 2);
      }
      ck::Mismatch m;
      if (!ck::compare(l, cpart.data(), su.want, &m)) {
        std::printf("none\n");
      } else {
        char what[512], msg[1024];
        ck::describe_mismatch(what, sizeof(what), m);
        ck::failure(msg, sizeof(msg), 0, what);
        std::printf("%s\n", msg);
      }
    } else if (op == "timeout") {
      double s;
      in >> s;
      char what[512], msg[1024];
      ck::describe_timeout(what, sizeof(what), s);
      ck::failure(msg, sizeof(msg), 0, what);
      std::printf("%s\n", msg);
    } else if (op == "cudaerr") {
      std::string name, text, word;
      int sticky;
      in >> name >> sticky;
      while (in >> word) text += (text.empty() ? "" : " ") + word;
      char what[512], msg[1024];
      ck::describe_cuda_error(what, sizeof(what), name.c_str(), text.c_str(), sticky != 0);
      ck::failure(msg, sizeof(msg), 0, what);
      std::printf("%s\n", msg);
    } else {
      std::printf("bad query\n");
    }
    std::fflush(stdout);
  }
  return 0;
}
