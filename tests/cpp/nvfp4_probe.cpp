// Prints the sm_90a kernels' E2M1 decoders' results (kernels/common/nvfp4.cuh, built here by the host
// compiler) for the queries on stdin, one answer per line, for tests/test_nvfp4_decode.py.
//   pair J W   -> e2m1_pair_j<J>(W)                  (shifts and masks: the A conversion)
//   bytes J W  -> e2m1_pair_bytes<J>(e2m1_bytes(W))  (bytes and a permute: the GEMM's B fragments)
//   korder Q C W0 .. W31 -> k_order_word(W, Q, C)   (an fp16 A row's 64 values into the GEMM's K order)
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "common/nvfp4.cuh"

namespace {

template <int J>
uint32_t pair(uint32_t w, bool bytes) {
  return bytes ? fl::e2m1_pair_bytes<J>(fl::e2m1_bytes(w)) : fl::e2m1_pair_j<J>(w);
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string op;
    int j = -1;
    uint32_t w = 0;
    in >> op >> j;
    if (op == "korder") {  // j is Q here
      int c = -1;
      uint32_t row[32];
      in >> c;
      for (uint32_t& x : row) in >> x;
      if (j < 0 || j > 7 || c < 0 || c > 3 || in.fail()) {
        std::printf("bad query\n");
        continue;
      }
      std::printf("%" PRIu32 "\n", fl::k_order_word(row, j, c));
      continue;
    }
    in >> w;
    const bool bytes = op == "bytes";
    if ((!bytes && op != "pair") || j < 0 || j > 3 || in.fail()) {
      std::printf("bad query\n");
      continue;
    }
    const uint32_t r = j == 0 ? pair<0>(w, bytes) : j == 1 ? pair<1>(w, bytes) : j == 2 ? pair<2>(w, bytes) : pair<3>(w, bytes);
    std::printf("%" PRIu32 "\n", r);
  }
  return 0;
}
