// libFuzzer target: the regex compiler of structured output
// (runtime/gen/regex_dfa.h). The first byte picks the mode:
//   even: the rest is a pattern. Compile must answer with a DFA or
//         INVALID_ARGUMENT and a message, never crash; every state of a
//         DFA must still reach a match, and a string picked by a walk
//         seeded from the input must fully match.
//   odd:  the rest is a text. RegexEscape(text) must compile into a DFA
//         that matches exactly that text (when it is valid UTF-8; else
//         Compile must refuse it).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/gen/regex_dfa.h"
#include "tests/fuzz/dfa_walk.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// Strict UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF.
bool ValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    int len;
    uint32_t c;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b >> 5) == 6) {
      len = 2, c = b & 0x1F;
    } else if ((b >> 4) == 14) {
      len = 3, c = b & 0x0F;
    } else if ((b >> 3) == 30) {
      len = 4, c = b & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto cb = static_cast<uint8_t>(s[i + k]);
      if ((cb & 0xC0) != 0x80) return false;
      c = (c << 6) | (cb & 0x3F);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < kMin[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1,
                               size - 1);
  // Smaller than the server's limits, so each input stays fast.
  inferd::RegexLimits limits;
  limits.max_nfa_states = 50000;
  limits.max_dfa_states = 4000;
  limits.max_subset_entries = 2000000;
  limits.max_steps = 20000000;
  if (data[0] % 2 == 1) {
    const std::string pattern = inferd::RegexEscape(rest);
    absl::StatusOr<inferd::ByteDfa> dfa =
        inferd::ByteDfa::Compile(pattern, limits);
    if (!ValidUtf8(rest)) {
      Check(!dfa.ok());
      return 0;
    }
    if (!dfa.ok()) {
      // Only a literal too long for the limits may fail.
      Check(dfa.status().message().find("too complex") !=
            absl::string_view::npos);
      return 0;
    }
    Check(dfa->FullMatch(rest));
    Check(!dfa->FullMatch(std::string(rest) + "a"));
    if (!rest.empty()) Check(!dfa->FullMatch(rest.substr(1)));
    return 0;
  }
  absl::StatusOr<inferd::ByteDfa> dfa = inferd::ByteDfa::Compile(rest, limits);
  if (!dfa.ok()) {
    Check(dfa.status().code() == absl::StatusCode::kInvalidArgument);
    Check(!dfa.status().message().empty());
    return 0;
  }
  Check(dfa->num_states() > 0);
  const std::vector<int32_t> dist = inferd::fuzz::DistanceToAccept(*dfa);
  for (int32_t d : dist) Check(d != inferd::fuzz::kUnreachable);
  inferd::fuzz::Rng rng(inferd::fuzz::Fnv1a(rest));
  const std::string out = inferd::fuzz::AcceptedString(*dfa, dist, &rng, 200);
  Check(dfa->FullMatch(out));
  Check(ValidUtf8(out));
  return 0;
}
