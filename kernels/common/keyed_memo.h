// A per-thread memo of values by a key of four 64-bit words, set-associative: a key's hash picks one of kSets
// sets of kWays entries, and a miss overwrites the set's entry written longest ago. The launcher keeps each
// group's encoded tensor maps in one, so a model whose weight sets take turns (the layers of a network, or
// inputs in rotation) finds every map it has encoded before, up to kSets x kWays of them, whatever the launch
// they came with. Plain C++ (the CPU tests reach it through tests/cpp/keyed_memo_probe.cpp).
#pragma once
#include <cstdint>

namespace fl {

struct MemoKey {
  uint64_t w[4];
  bool operator==(const MemoKey& o) const { return w[0] == o.w[0] && w[1] == o.w[1] && w[2] == o.w[2] && w[3] == o.w[3]; }
};

template <class Value, int kSets, int kWays = 4>
class KeyedMemo {
  static_assert(kSets > 0 && (kSets & (kSets - 1)) == 0, "a power of two of sets");

 public:
  // The value held for `key`, or null.
  Value* find(const MemoKey& key) {
    Set& s = sets_[set_of(key)];
    for (int i = 0; i < s.used; ++i)
      if (s.key[i] == key) return &s.value[i];
    return nullptr;
  }
  // The entry for `key`, to fill: a free one of its set, else the one written longest ago. The caller fills
  // the value before the next find; where filling can fail, it calls forget(key) instead.
  Value& insert(const MemoKey& key) {
    Set& s = sets_[set_of(key)];
    int i = s.used < kWays ? s.used++ : s.next;
    if (s.used == kWays && i == s.next) s.next = (s.next + 1) % kWays;
    s.key[i] = key;
    return s.value[i];
  }
  // Drops `key` (a value that could not be filled).
  void forget(const MemoKey& key) {
    Set& s = sets_[set_of(key)];
    for (int i = 0; i < s.used; ++i)
      if (s.key[i] == key) s.key[i] = MemoKey{{~0ull, ~0ull, ~0ull, ~0ull}};
  }

 private:
  struct Set {
    MemoKey key[kWays];
    Value value[kWays];
    int used = 0, next = 0;
  };
  static int set_of(const MemoKey& key) {
    uint64_t h = key.w[0] * 0x9E3779B97F4A7C15ull;
    h ^= (key.w[1] + (h << 6) + (h >> 2)) * 0xC2B2AE3D27D4EB4Full;
    h ^= (key.w[2] + (h << 6) + (h >> 2)) * 0x165667B19E3779F9ull;
    h ^= key.w[3] + (h << 6) + (h >> 2);
    return (int)((h ^ (h >> 29)) & (kSets - 1));
  }
  Set sets_[kSets];
};

}  // namespace fl
