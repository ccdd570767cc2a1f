// Fuzzing helpers over a compiled ByteDfa: a check that every state can
// still reach a match (what Compile promises after pruning), and a string
// the DFA accepts, picked by a seeded walk. Header-only; not thread-safe
// (plain functions over the caller's values).
#ifndef INFERD_TESTS_FUZZ_DFA_WALK_H_
#define INFERD_TESTS_FUZZ_DFA_WALK_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/gen/regex_dfa.h"

namespace inferd {
namespace fuzz {

constexpr int32_t kUnreachable = INT32_MAX;

// Per state, the fewest bytes to an accepting state (kUnreachable when
// none): a breadth-first search backwards from the accepting states.
inline std::vector<int32_t> DistanceToAccept(const ByteDfa& dfa) {
  const int32_t n = dfa.num_states();
  std::vector<std::vector<int32_t>> rev(n);
  for (int32_t s = 0; s < n; ++s) {
    int32_t last = -2;
    for (int b = 0; b < 256; ++b) {
      const int32_t t = dfa.Next(s, static_cast<uint8_t>(b));
      if (t >= 0 && t != last) rev[t].push_back(s);
      last = t;
    }
  }
  std::vector<int32_t> dist(n, kUnreachable);
  std::vector<int32_t> queue;
  for (int32_t s = 0; s < n; ++s) {
    if (dfa.accepting(s)) {
      dist[s] = 0;
      queue.push_back(s);
    }
  }
  for (size_t i = 0; i < queue.size(); ++i) {
    const int32_t t = queue[i];
    for (int32_t s : rev[t]) {
      if (dist[s] == kUnreachable) {
        dist[s] = dist[t] + 1;
        queue.push_back(s);
      }
    }
  }
  return dist;
}

// splitmix64: the walk's choices, from a seed.
class Rng {
 public:
  explicit Rng(uint64_t seed) : x_(seed) {}
  uint64_t Next() {
    uint64_t z = (x_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t x_;
};

inline uint64_t Fnv1a(absl::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// A string `dfa` fully matches: random live bytes for up to `wander`
// steps (stopping early at an accepting state now and then), then the
// shortest way to an accepting state. `dist` is DistanceToAccept(dfa), all
// finite.
inline std::string AcceptedString(const ByteDfa& dfa,
                                  const std::vector<int32_t>& dist, Rng* rng,
                                  size_t wander) {
  std::string out;
  int32_t s = dfa.start();
  std::vector<uint8_t> live;
  for (size_t step = 0; step < wander; ++step) {
    if (dfa.accepting(s) && rng->Next() % 4 == 0) return out;
    live.clear();
    for (int b = 0; b < 256; ++b) {
      if (dfa.Next(s, static_cast<uint8_t>(b)) >= 0) {
        live.push_back(static_cast<uint8_t>(b));
      }
    }
    if (live.empty()) return out;  // accepting, nothing follows
    const uint8_t b = live[rng->Next() % live.size()];
    out.push_back(static_cast<char>(b));
    s = dfa.Next(s, b);
  }
  while (!dfa.accepting(s)) {
    for (int b = 0; b < 256; ++b) {
      const int32_t t = dfa.Next(s, static_cast<uint8_t>(b));
      if (t >= 0 && dist[t] == dist[s] - 1) {
        out.push_back(static_cast<char>(b));
        s = t;
        break;
      }
    }
  }
  return out;
}

}  // namespace fuzz
}  // namespace inferd

#endif  // INFERD_TESTS_FUZZ_DFA_WALK_H_
