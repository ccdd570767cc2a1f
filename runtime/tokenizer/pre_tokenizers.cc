#include "runtime/tokenizer/pre_tokenizers.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "runtime/common/status_macros.h"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/regex.h"
#include "runtime/tokenizer/unicode_util.h"

namespace inferd {
namespace tokenizer_internal {

const char kGpt2Pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
    "\\s+(?!\\S)|\\s+";

absl::StatusOr<std::unique_ptr<Pattern>> MakePattern(const Json& j);

namespace {

// Splits every piece on `pattern` with `behavior`.
void SplitAll(std::vector<NormalizedString>* pieces, const Pattern& pattern,
              SplitBehavior behavior, bool invert) {
  std::vector<NormalizedString> out;
  out.reserve(pieces->size() * 2);
  std::vector<Range> matches;
  for (NormalizedString& p : *pieces) {
    matches.clear();
    pattern.FindMatches(p.get(), &matches);
    if (matches.empty() && !invert) {
      if (!p.empty()) out.push_back(std::move(p));
      continue;
    }
    for (const Range& r : SplitRanges(p.size(), matches, behavior, invert)) {
      if (r.first == 0 && r.second == p.size()) {
        out.push_back(std::move(p));
        break;
      }
      out.push_back(p.Slice(r.first, r.second));
    }
  }
  *pieces = std::move(out);
}

absl::StatusOr<SplitBehavior> ParseBehavior(const Json& j, SplitBehavior def) {
  const std::string b = GetString(j, "behavior");
  if (b.empty()) return def;
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return absl::InvalidArgumentError(
      "tokenizer.json: unknown split behavior \"" + b + "\"");
}

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<Pattern> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  void PreTokenize(std::vector<NormalizedString>* pieces) const override {
    PreTokenizeUnmapped(pieces);
    const ByteLevelTables& tables = GetByteLevelTables();
    for (NormalizedString& p : *pieces)
      p.MapEachByte(tables.byte_to_utf8.data());
  }
  bool EndsWithByteMap() const override { return true; }
  void PreTokenizeUnmapped(
      std::vector<NormalizedString>* pieces) const override {
    if (add_prefix_space_) {
      for (NormalizedString& p : *pieces) {
        if (p.get().empty() || p.get()[0] != ' ') p.Prepend(" ");
      }
    }
    if (regex_ != nullptr) {
      SplitAll(pieces, *regex_, SplitBehavior::kIsolated, false);
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Pattern> regex_;  // Null when use_regex is false.
};

enum class PrependScheme { kFirst, kAlways, kNever };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme,
                        bool split)
      : replacement_(std::move(replacement)),
        scheme_(scheme),
        split_(split),
        pattern_(replacement_) {}
  void PreTokenize(std::vector<NormalizedString>* pieces) const override {
    for (NormalizedString& p : *pieces) {
      p.ReplaceChar(' ', replacement_);
      const bool starts =
          p.get().compare(0, replacement_.size(), replacement_) == 0;
      // As in `tokenizers`, prepending to an empty piece does nothing.
      if (!starts && !p.get().empty() &&
          (scheme_ == PrependScheme::kAlways ||
           (scheme_ == PrependScheme::kFirst && p.original_start() == 0))) {
        p.Prepend(replacement_);
      }
    }
    if (split_)
      SplitAll(pieces, pattern_, SplitBehavior::kMergedWithNext, false);
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  LiteralPattern pattern_;
};

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Pattern> pattern, SplitBehavior behavior,
                    bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void PreTokenize(std::vector<NormalizedString>* pieces) const override {
    SplitAll(pieces, *pattern_, behavior_, invert_);
  }

 private:
  std::unique_ptr<Pattern> pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class BertPreTokenizer : public PreTokenizer {
 public:
  // Splitting on whitespace (removed) and then on punctuation (isolated),
  // in one pass.
  void PreTokenize(std::vector<NormalizedString>* pieces) const override {
    std::vector<NormalizedString> out;
    out.reserve(pieces->size() * 8);
    for (NormalizedString& p : *pieces) {
      const std::string& text = p.get();
      const size_t n = text.size();
      auto emit = [&](size_t a, size_t b) {
        if (a == 0 && b == n) {
          out.push_back(std::move(p));
        } else {
          out.push_back(p.Slice(a, b));
        }
      };
      size_t word = n;  // Start of the current word, n when none.
      size_t i = 0;
      while (i < n) {
        size_t len = 1;
        const unsigned char b = static_cast<unsigned char>(text[i]);
        const char32_t c = b < 0x80 ? b : DecodeUtf8(text, i, &len);
        if (IsWhitespace(c) || IsBertPunctuation(c)) {
          if (word < i) emit(word, i);
          word = n;
          if (!IsWhitespace(c)) emit(i, i + len);
        } else if (word == n) {
          word = i;
        }
        i += len;
      }
      if (word < n) emit(word, n);
    }
    *pieces = std::move(out);
  }
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> p)
      : parts_(std::move(p)) {}
  void PreTokenize(std::vector<NormalizedString>* pieces) const override {
    for (const auto& p : parts_) p->PreTokenize(pieces);
  }
  bool EndsWithByteMap() const override {
    return !parts_.empty() && parts_.back()->EndsWithByteMap();
  }
  void PreTokenizeUnmapped(
      std::vector<NormalizedString>* pieces) const override {
    if (parts_.empty()) return;
    for (size_t i = 0; i + 1 < parts_.size(); ++i)
      parts_[i]->PreTokenize(pieces);
    parts_.back()->PreTokenizeUnmapped(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const Json& j) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        "tokenizer.json: pre_tokenizer must be an object");
  }
  const std::string type = TypeOf(j);
  if (type == "ByteLevel") {
    std::unique_ptr<Pattern> regex;
    if (GetBool(j, "use_regex", true)) {
      ASSIGN_OR_RETURN(regex, CompileRegexPattern(kGpt2Pattern));
    }
    return std::unique_ptr<PreTokenizer>(new ByteLevelPreTokenizer(
        GetBool(j, "add_prefix_space", true), std::move(regex)));
  }
  if (type == "Metaspace") {
    const std::string replacement = GetString(j, "replacement", "\xE2\x96\x81");
    PrependScheme scheme = GetBool(j, "add_prefix_space", true)
                               ? PrependScheme::kAlways
                               : PrependScheme::kNever;
    const std::string s = GetString(j, "prepend_scheme");
    if (s == "first") scheme = PrependScheme::kFirst;
    if (s == "always") scheme = PrependScheme::kAlways;
    if (s == "never") scheme = PrependScheme::kNever;
    return std::unique_ptr<PreTokenizer>(new MetaspacePreTokenizer(
        replacement, scheme, GetBool(j, "split", true)));
  }
  if (type == "Split") {
    if (!Has(j, "pattern")) {
      return absl::InvalidArgumentError(
          "tokenizer.json: Split needs a pattern");
    }
    ASSIGN_OR_RETURN(auto pattern, MakePattern(j.at("pattern")));
    ASSIGN_OR_RETURN(SplitBehavior b,
                     ParseBehavior(j, SplitBehavior::kRemoved));
    return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(
        std::move(pattern), b, GetBool(j, "invert", false)));
  }
  if (type == "BertPreTokenizer") {
    return std::unique_ptr<PreTokenizer>(new BertPreTokenizer());
  }
  if (type == "Whitespace") {
    ASSIGN_OR_RETURN(auto re, Regex::Compile("\\w+|[^\\w\\s]+"));
    return std::unique_ptr<PreTokenizer>(
        new SplitPreTokenizer(std::make_unique<RegexPattern>(std::move(re)),
                              SplitBehavior::kRemoved, true));
  }
  if (type == "WhitespaceSplit") {
    return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(
        std::make_unique<CharPredicatePattern>(&IsWhitespace),
        SplitBehavior::kRemoved, false));
  }
  if (type == "Punctuation") {
    ASSIGN_OR_RETURN(SplitBehavior b,
                     ParseBehavior(j, SplitBehavior::kIsolated));
    return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(
        std::make_unique<CharPredicatePattern>(&IsBertPunctuation), b, false));
  }
  if (type == "Digits") {
    const bool individual = GetBool(j, "individual_digits", false);
    return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(
        std::make_unique<CharPredicatePattern>(&IsNumeric),
        individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
        false));
  }
  if (type == "CharDelimiterSplit") {
    return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(
        std::make_unique<LiteralPattern>(GetString(j, "delimiter")),
        SplitBehavior::kRemoved, false));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    if (Has(j, "pretokenizers")) {
      for (const Json& sub : j.at("pretokenizers")) {
        ASSIGN_OR_RETURN(auto p, MakePreTokenizer(sub));
        parts.push_back(std::move(p));
      }
    }
    return std::unique_ptr<PreTokenizer>(
        new SequencePreTokenizer(std::move(parts)));
  }
  return UnknownType("pre_tokenizer", type);
}

}  // namespace tokenizer_internal
}  // namespace inferd
