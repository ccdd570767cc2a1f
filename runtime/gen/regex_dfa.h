// ByteDfa: a deterministic finite automaton over bytes for a regular
// expression, matched with full-match semantics against UTF-8 text. The
// pattern (a subset of Python `re` syntax, see Compile) is parsed into a
// tree, turned into a byte-level NFA by Thompson's construction (character
// classes become UTF-8 byte-range sequences), then into a DFA by subset
// construction over byte equivalence classes; states from which no accepting
// state is reachable are removed, so every surviving transition can still
// lead to a match. Used by structured output to mask tokens.
// Immutable once built; thread-safe.
#ifndef INFERD_RUNTIME_GEN_REGEX_DFA_H_
#define INFERD_RUNTIME_GEN_REGEX_DFA_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace inferd {

struct RegexLimits {
  // Compilation fails (INVALID_ARGUMENT, "too complex") beyond these.
  int32_t max_nfa_states = 400000;
  int32_t max_dfa_states = 50000;
  // Sum over DFA states of the NFA states each stands for (memory and time
  // of the subset construction).
  int64_t max_subset_entries = 20000000;
  // Work of the subset construction: NFA states scanned for a byte class
  // and visited by epsilon closures (a pattern under the state limits can
  // still ask for billions of them; this many take about a second).
  int64_t max_steps = 200000000;
  int32_t max_repeat = 1000;  // the largest n in {n} / {n,m}
};

class ByteDfa {
 public:
  static constexpr int32_t kDead = -1;

  // Syntax: literals (UTF-8), `.` (any character but \n), classes `[...]`
  // and `[^...]` with ranges, `\d \w \s` (ASCII) and their negations,
  // escapes `\n \t \r \f \v \a \0 \xHH \uHHHH \UHHHHHHHH` and escaped
  // punctuation, groups `(...)`, `(?:...)`, `(?P<name>...)`, `(?<name>...)`,
  // alternation `|`, quantifiers `* + ? {n} {n,} {,m} {n,m}` (a trailing
  // `?` for laziness is accepted; it does not change what matches), `^` at
  // the very start and `$` at the very end. One extension: inside
  // `(?J:...)` no character class matches '"', '\' or a control character
  // (CompileJsonSchema embeds a string "pattern" this way, so the text is
  // valid inside a JSON string as it stands). INVALID_ARGUMENT naming what is
  // unsupported (backreferences, lookaround, `\b`, inline flags, ...), on a
  // syntax error, for a pattern that matches nothing, or beyond `limits`.
  // `steps`, when not null, receives the work done (RegexLimits::max_steps),
  // also when compilation fails.
  static absl::StatusOr<ByteDfa> Compile(absl::string_view pattern,
                                         const RegexLimits& limits = {},
                                         int64_t* steps = nullptr);

  int32_t start() const { return 0; }
  int32_t num_states() const { return static_cast<int32_t>(accepting_.size()); }
  // kDead when `byte` cannot continue toward a match.
  int32_t Next(int32_t state, uint8_t byte) const {
    return trans_[static_cast<size_t>(state) * num_classes_ + classes_[byte]];
  }
  bool accepting(int32_t state) const { return accepting_[state] != 0; }
  // Some byte leads on from `state`.
  bool has_next(int32_t state) const { return has_next_[state] != 0; }
  bool FullMatch(absl::string_view text) const;

 private:
  ByteDfa() = default;
  // Compile, counting its work into `*steps`.
  static absl::StatusOr<ByteDfa> Build(absl::string_view pattern,
                                       const RegexLimits& limits,
                                       int64_t* steps);

  int32_t num_classes_ = 0;
  std::array<uint8_t, 256> classes_{};  // byte -> equivalence class
  std::vector<int32_t> trans_;          // [state x class]
  std::vector<uint8_t> accepting_;
  std::vector<uint8_t> has_next_;
};

// `text` with every regex metacharacter escaped, so it matches literally.
std::string RegexEscape(absl::string_view text);

}  // namespace inferd

#endif  // INFERD_RUNTIME_GEN_REGEX_DFA_H_
