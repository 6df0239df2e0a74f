// A per-thread memo of the last few results, replaced oldest first: the launcher keeps the plans and
// the encoded tensor maps of the shapes and addresses a serving loop repeats. Plain C++ (the CPU tests
// reach it through tests/cpp/recent_probe.cpp).
#pragma once

namespace fl {

template <class Entry, int N = 4>
class Recent {
 public:
  // The first entry `match` accepts, or null.
  template <class Match>
  Entry* find(Match&& match) {
    for (Entry& e : entries_)
      if (match(e)) return &e;
    return nullptr;
  }
  // The entry to overwrite: the one written longest ago. The caller marks it invalid before filling
  // it if filling can fail, so a later find does not accept it half-written.
  Entry& oldest() {
    Entry& e = entries_[next_];
    next_ = (next_ + 1) % N;
    return e;
  }

 private:
  Entry entries_[N];
  int next_ = 0;
};

}  // namespace fl
