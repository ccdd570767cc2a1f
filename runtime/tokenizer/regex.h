// Oniguruma-backed regular expressions (Unicode, UTF-8) for pre-tokenizer and
// normalizer patterns. A compiled Regex is immutable and safe to share
// between threads: every search uses its own match region.
#ifndef INFERD_RUNTIME_TOKENIZER_REGEX_H_
#define INFERD_RUNTIME_TOKENIZER_REGEX_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/tokenizer/normalized_string.h"

namespace inferd {
namespace tokenizer_internal {

class Regex {
 public:
  // INVALID_ARGUMENT when the pattern does not compile.
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(
      absl::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the non-overlapping matches in `text`, left to right, to `out`.
  // Empty matches are not reported.
  void FindAll(absl::string_view text, std::vector<Range>* out) const;
  // The leftmost match starting at or after byte `pos` (possibly empty);
  // false when there is none.
  bool SearchFrom(absl::string_view text, size_t pos, Range* match) const;

 private:
  explicit Regex(void* regex) : regex_(regex) {}
  void* regex_;  // OnigRegex
};

// Something a text can be split on: a literal string, a regex, or a set of
// single characters (each matching character is one match).
class Pattern {
 public:
  virtual ~Pattern() = default;
  // Sorted, non-overlapping matches in `text`.
  virtual void FindMatches(absl::string_view text,
                           std::vector<Range>* out) const = 0;
};

class LiteralPattern : public Pattern {
 public:
  explicit LiteralPattern(std::string literal) : literal_(std::move(literal)) {}
  void FindMatches(absl::string_view text,
                   std::vector<Range>* out) const override;

 private:
  std::string literal_;
};

class RegexPattern : public Pattern {
 public:
  explicit RegexPattern(std::unique_ptr<Regex> regex)
      : regex_(std::move(regex)) {}
  void FindMatches(absl::string_view text,
                   std::vector<Range>* out) const override {
    regex_->FindAll(text, out);
  }

 private:
  std::unique_ptr<Regex> regex_;
};

// The pre-tokenizer regexes of GPT-2 (also ByteLevel's built-in one) and of
// llama3 / Qwen2 (digit runs of at most 3 / 1), matched by hand-written code
// with exactly the regex's results. Where a decision needs a non-ASCII
// character's class, the match at that position is left to the regex.
class PreTokenizerRegexPattern : public Pattern {
 public:
  enum class Kind { kGpt2, kLlama3, kQwen2 };
  // The kind whose regex is exactly `regex`, if any.
  static bool Recognize(absl::string_view regex, Kind* kind);
  PreTokenizerRegexPattern(Kind kind, std::unique_ptr<Regex> regex)
      : kind_(kind), regex_(std::move(regex)) {}
  void FindMatches(absl::string_view text,
                   std::vector<Range>* out) const override;

 private:
  // End of the match starting at `pos` (always non-empty), or 0 when it
  // depends on a non-ASCII character.
  size_t MatchGpt2(absl::string_view text, size_t pos) const;
  size_t MatchLlama3(absl::string_view text, size_t pos) const;

  Kind kind_;
  std::unique_ptr<Regex> regex_;
};

// A Pattern for `regex`: the hand-written matcher when it is one of the known
// pre-tokenizer regexes, else Oniguruma. INVALID_ARGUMENT when it does not
// compile.
absl::StatusOr<std::unique_ptr<Pattern>> CompileRegexPattern(
    absl::string_view regex);

class CharPredicatePattern : public Pattern {
 public:
  explicit CharPredicatePattern(bool (*pred)(char32_t)) : pred_(pred) {}
  void FindMatches(absl::string_view text,
                   std::vector<Range>* out) const override;

 private:
  bool (*pred_)(char32_t);
};

}  // namespace tokenizer_internal
}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_REGEX_H_
