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
