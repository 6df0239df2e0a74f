// Drives the launcher's set-associative memo of tensor maps (kernels/common/keyed_memo.h) with the queries on
// stdin, one answer per line, for tests/cpu/test_keyed_memo.py (a memo of 4 sets of 2 ways):
//   put A B C D V -> "hit V'" if key (A, B, C, D) is held (value V' kept), else "miss" and the key -> V
//   get A B C D   -> its value, or "none"
//   forget A B C D -> "ok"
#include <iostream>
#include <sstream>
#include <string>

#include "common/keyed_memo.h"

int main() {
  fl::KeyedMemo<long, 4, 2> memo;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string op;
    fl::MemoKey key{};
    long value = 0;
    in >> op >> key.w[0] >> key.w[1] >> key.w[2] >> key.w[3];
    if (op == "put") in >> value;
    if ((op != "put" && op != "get" && op != "forget") || in.fail()) {
      std::cout << "bad query" << std::endl;
      continue;
    }
    if (op == "forget") {
      memo.forget(key);
      std::cout << "ok" << std::endl;
      continue;
    }
    const long* held = memo.find(key);
    if (op == "get") {
      if (held) std::cout << *held << std::endl;
      else std::cout << "none" << std::endl;
    } else if (held) {
      std::cout << "hit " << *held << std::endl;
    } else {
      memo.insert(key) = value;
      std::cout << "miss" << std::endl;
    }
  }
  return 0;
}
