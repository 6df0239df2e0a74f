// Drives the launcher's group cuts (kernels/sm90/plan/group_cuts.h) for tests/test_group_cuts.py: each line on
// stdin is "G max_out" and then G groups' "a b c sfa sfb m n k"; the answer line is the rewritten
// buffer's groups, "src a b c sfa sfb m n k" each, separated by ";", or "bad query".
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "sm90/plan/group_cuts.h"

int main() {
  constexpr int kMax = fl::sm90::kGroupsSmall;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    int G = 0, max_out = 0;
    in >> G >> max_out;
    if (in.fail() || G < 1 || G > kMax || max_out < 1 || max_out > kMax) {
      std::printf("bad query\n");
      continue;
    }
    int64_t buf[8 * kMax], out[8 * kMax];
    int src[kMax];
    for (int g = 0; g < G; ++g)
      for (int f = 0; f < 8; ++f) in >> buf[f * G + g];
    if (in.fail()) {
      std::printf("bad query\n");
      continue;
    }
    const int count = fl::sm90::cut_groups(buf, G, out, src, max_out);
    for (int v = 0; v < count; ++v) {
      std::printf("%s%d", v ? ";" : "", src[v]);
      for (int f = 0; f < 8; ++f) std::printf(" %lld", (long long)out[f * count + v]);
    }
    std::printf("\n");
  }
  return 0;
}
