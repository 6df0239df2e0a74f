// Drives the reduce kernel's grid choice (kernels/sm90/plan/planner.h reduce_chunks) for tests/test_reduce_grid.py:
// each line on stdin is "tiles jv sm_count"; the answer line is the chunks per tile and consumer warp,
// or "bad query".
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "sm90/plan/planner.h"

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    long long tiles = 0;
    int jv = 0, sms = 0;
    in >> tiles >> jv >> sms;
    if (in.fail() || tiles < 1 || jv < 1 || jv > fl::sm90::kMaxWidth / 8 || sms < 1) {
      std::printf("bad query\n");
      continue;
    }
    std::printf("%d\n", fl::sm90::reduce_chunks(tiles, jv, sms));
  }
  return 0;
}
