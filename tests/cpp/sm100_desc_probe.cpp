// Prints the sm_100a encoders' results (kernels/sm100/desc.h) for the queries on stdin, one answer
// per line, for tests/test_sm100_desc.py. Built there with the host C++ compiler; no CUDA needed.
//   idesc M N | opdesc ADDR CHUNK | sfdesc ADDR | tmem LANE COL | acccol BUF | sfcol STAGE OPERAND CHUNK
//   kstages K | lastchunks K | mman M M0 | tiles M N | decode T M1 N1 [M2 N2 ...]  (-> g m0 n0)
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "sm100/desc.h"

using namespace fl::sm100;

struct G {
  int32_t m, tile_end;
};

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string op;
    in >> op;
    if (op == "idesc") {
      uint32_t m, n;
      in >> m >> n;
      std::printf("%" PRIu32 "\n", idesc_mxf4nvf4(m, n));
    } else if (op == "opdesc") {
      uint32_t addr;
      int chunk;
      in >> addr >> chunk;
      std::printf("%" PRIu64 "\n", smem_desc_operand(addr, chunk));
    } else if (op == "sfdesc") {
      uint32_t addr;
      in >> addr;
      std::printf("%" PRIu64 "\n", smem_desc_scales(addr));
    } else if (op == "tmem") {
      uint32_t lane, col;
      in >> lane >> col;
      std::printf("%" PRIu32 "\n", tmem_addr(lane, col));
    } else if (op == "acccol") {
      uint32_t b;
      in >> b;
      std::printf("%" PRIu32 "\n", acc_col(b));
    } else if (op == "sfcol") {
      uint32_t s, o, c;
      in >> s >> o >> c;
      std::printf("%" PRIu32 "\n", sf_col(s, o, c));
    } else if (op == "kstages" || op == "lastchunks") {
      int32_t k;
      in >> k;
      std::printf("%d\n", op == "kstages" ? kstages(k) : last_chunks(k));
    } else if (op == "mman") {
      int32_t m, m0;
      in >> m >> m0;
      std::printf("%d\n", mma_n(m, m0));
    } else if (op == "tiles") {
      int64_t m, n;
      in >> m >> n;
      std::printf("%" PRId64 "\n", group_tiles(m, n));
    } else if (op == "decode") {
      int32_t t;
      int64_t m, n, end = 0;
      in >> t;
      std::vector<G> groups;
      while (in >> m >> n) groups.push_back(G{(int32_t)m, (int32_t)(end += group_tiles(m, n))});
      const TileCoord c = decode_tile(groups.data(), t, 0);
      std::printf("%d %d %d\n", c.g, c.m0, c.n0);
    } else {
      std::printf("unknown query %s\n", op.c_str());
      return 1;
    }
  }
  return 0;
}
