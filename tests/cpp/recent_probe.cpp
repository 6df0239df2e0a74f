// Drives the launcher's per-thread memo (kernels/common/recent.h) with the queries on stdin, one answer per
// line, for tests/test_recent.py:
//   put K V  -> "hit V'" if key K is held (value V' kept), else "miss" and K -> V written over the oldest
//   get K    -> its value, or "none"
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "common/recent.h"

namespace {

struct Entry {
  bool valid = false;
  long key = 0, value = 0;
};

}  // namespace

int main() {
  fl::Recent<Entry> memo;  // 4 entries
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string op;
    long key = 0, value = 0;
    in >> op >> key;
    if (op == "put") in >> value;
    if ((op != "put" && op != "get") || in.fail()) {
      std::printf("bad query\n");
      continue;
    }
    Entry* hit = memo.find([&](const Entry& e) { return e.valid && e.key == key; });
    if (op == "get") {
      if (hit)
        std::printf("%ld\n", hit->value);
      else
        std::printf("none\n");
    } else if (hit) {
      std::printf("hit %ld\n", hit->value);
    } else {
      Entry& e = memo.oldest();
      e.valid = false;
      e.key = key, e.value = value, e.valid = true;
      std::printf("miss\n");
    }
  }
  return 0;
}
