// Prints kernels/common/row_pieces.h's row_piece(mis, end, q) for each line "mis end q" on stdin as "full head tail",
// or "bad query", for tests/test_row_pieces.py.
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "common/row_pieces.h"

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    int mis = -1, end = -1, q = -1;
    in >> mis >> end >> q;
    if (in.fail() || mis < 0 || mis > 7 || end < 1 || end > 64 || q < 0 || q > 7) {
      std::printf("bad query\n");
      continue;
    }
    const fl::sm90::RowPiece p = fl::sm90::row_piece(mis, end, q);
    std::printf("%d %d %d\n", p.full, p.head, p.tail);
  }
  return 0;
}
