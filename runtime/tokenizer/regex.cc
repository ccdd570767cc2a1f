#include "runtime/tokenizer/regex.h"

#include <oniguruma.h>

#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/pre_tokenizers.h"
#include "runtime/tokenizer/unicode_util.h"

namespace inferd {
namespace tokenizer_internal {
namespace {

void InitOnigurumaOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(
    absl::string_view pattern) {
  InitOnigurumaOnce();
  OnigRegex regex = nullptr;
  OnigErrorInfo einfo;
  const auto* begin = reinterpret_cast<const OnigUChar*>(pattern.data());
  // As the Hugging Face library compiles them: '^' and '$' anchor at line
  // boundaries too (no ONIG_OPTION_SINGLELINE); a normalizer such as
  // Replace("^ | $", "") strips the spaces around every newline.
  const int r = onig_new(&regex, begin, begin + pattern.size(),
                         ONIG_OPTION_CAPTURE_GROUP, ONIG_ENCODING_UTF8,
                         ONIG_SYNTAX_ONIGURUMA, &einfo);
  if (r != ONIG_NORMAL) {
    OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, r, &einfo);
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid regex '", pattern, "': ", reinterpret_cast<const char*>(msg)));
  }
  return std::unique_ptr<Regex>(new Regex(regex));
}

Regex::~Regex() { onig_free(static_cast<OnigRegex>(regex_)); }

namespace {

// One match region per thread, reused by every search.
class ThreadRegion {
 public:
  ThreadRegion() : region_(onig_region_new()) {}
  ~ThreadRegion() { onig_region_free(region_, 1); }
  OnigRegion* get() { return region_; }

 private:
  OnigRegion* region_;
};

OnigRegion* Region() {
  thread_local ThreadRegion region;
  return region.get();
}

}  // namespace

bool Regex::SearchFrom(absl::string_view text, size_t pos, Range* match) const {
  auto* regex = static_cast<OnigRegex>(regex_);
  OnigRegion* region = Region();
  const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
  const OnigUChar* end = str + text.size();
  const int r =
      onig_search(regex, str, end, str + pos, end, region, ONIG_OPTION_NONE);
  if (r < 0) return false;  // ONIG_MISMATCH or an error: no more matches.
  *match = Range(static_cast<size_t>(region->beg[0]),
                 static_cast<size_t>(region->end[0]));
  return true;
}

void Regex::FindAll(absl::string_view text, std::vector<Range>* out) const {
  size_t pos = 0;
  Range m;
  while (pos <= text.size() && SearchFrom(text, pos, &m)) {
    if (m.second > m.first) {
      out->push_back(m);
      pos = m.second;
    } else {
      // Empty match: step over one character.
      if (m.first >= text.size()) break;
      pos = m.first + Utf8CharLen(static_cast<unsigned char>(text[m.first]));
    }
  }
}

namespace {

const char kLlama3Pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char kQwen2Pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Character classes the patterns distinguish. ASCII bytes have a fixed
// class; a non-ASCII byte is kUnknown (its character's class is not looked
// up here); kEnd is past the text.
enum CharClass : uint8_t { kLetter, kDigit, kSpace, kOther, kUnknown, kEnd };

struct ClassTable {
  CharClass c[128];
  constexpr ClassTable() : c() {
    for (int b = 0; b < 128; ++b) {
      if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')) {
        c[b] = kLetter;
      } else if (b >= '0' && b <= '9') {
        c[b] = kDigit;
      } else if (b == ' ' || (b >= 0x09 && b <= 0x0D)) {
        c[b] = kSpace;
      } else {
        c[b] = kOther;
      }
    }
  }
};
constexpr ClassTable kClasses;

inline CharClass ClassAt(absl::string_view t, size_t i) {
  if (i >= t.size()) return kEnd;
  const unsigned char b = static_cast<unsigned char>(t[i]);
  return b < 0x80 ? kClasses.c[b] : kUnknown;
}

// End of the run of class `cls` starting at `i`; 0 when the run reaches a
// non-ASCII character (which might continue it).
inline size_t RunEnd(absl::string_view t, size_t i, CharClass cls) {
  CharClass c;
  while ((c = ClassAt(t, i)) == cls) ++i;
  return c == kUnknown ? 0 : i;
}

// The whitespace alternatives shared by both families, at a space:
// `\s+(?!\S)|\s+` (llama3 tries `\s*[\r\n]+` first, see below).
inline size_t TrailingSpaceRun(absl::string_view t, size_t pos, size_t e) {
  if (e >= t.size()) return e;      // (?!\S) holds at the end.
  return e - pos >= 2 ? e - 1 : e;  // Leave the last space to the next
                                    // token, unless it is the only one.
}

inline char Lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
}

}  // namespace

bool PreTokenizerRegexPattern::Recognize(absl::string_view regex, Kind* kind) {
  if (regex == kGpt2Pattern) {
    *kind = Kind::kGpt2;
  } else if (regex == kLlama3Pattern) {
    *kind = Kind::kLlama3;
  } else if (regex == kQwen2Pattern) {
    *kind = Kind::kQwen2;
  } else {
    return false;
  }
  return true;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t PreTokenizerRegexPattern::MatchGpt2(absl::string_view t,
                                           size_t pos) const {
  if (t[pos] == '\'') {  // Case-sensitive: plain byte comparisons decide.
    const absl::string_view rest = t.substr(pos + 1);
    for (absl::string_view c : {"s", "t", "re", "ve", "m", "ll", "d"}) {
      if (rest.substr(0, c.size()) == c) return pos + 1 + c.size();
    }
  }
  CharClass c = ClassAt(t, pos);
  size_t start = pos;
  if (t[pos] == ' ') {
    const CharClass next = ClassAt(t, pos + 1);
    if (next == kUnknown) return 0;
    if (next == kLetter || next == kDigit || next == kOther) {
      c = next;
      start = pos + 1;
    }
  }
  if (c == kLetter || c == kDigit || c == kOther) return RunEnd(t, start, c);
  // c == kSpace.
  const size_t e = RunEnd(t, pos, kSpace);
  if (e == 0) return 0;
  return TrailingSpaceRun(t, pos, e);
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (Qwen2: \p{N})
size_t PreTokenizerRegexPattern::MatchLlama3(absl::string_view t,
                                             size_t pos) const {
  const char ch = t[pos];
  const CharClass c = ClassAt(t, pos);
  if (ch == '\'') {
    // Case-insensitive: a non-ASCII character might fold to a letter.
    const CharClass c1 = ClassAt(t, pos + 1);
    if (c1 == kUnknown) return 0;
    if (c1 == kLetter) {
      const char l1 = Lower(t[pos + 1]);
      if (l1 == 's' || l1 == 't' || l1 == 'm' || l1 == 'd') return pos + 2;
      if (l1 == 'r' || l1 == 'v' || l1 == 'l') {
        const CharClass c2 = ClassAt(t, pos + 2);
        if (c2 == kUnknown) return 0;
        const char want = l1 == 'l' ? 'l' : 'e';
        if (c2 == kLetter && Lower(t[pos + 2]) == want) return pos + 3;
      }
    }
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c == kLetter) return RunEnd(t, pos, kLetter);
  if (c == kOther || (c == kSpace && ch != '\r' && ch != '\n')) {
    const CharClass next = ClassAt(t, pos + 1);
    if (next == kUnknown) return 0;
    if (next == kLetter) return RunEnd(t, pos + 1, kLetter);
  }
  // \p{N}{1,3} or \p{N}
  if (c == kDigit) {
    const size_t max = kind_ == Kind::kLlama3 ? 3 : 1;
    size_t e = pos + 1;
    while (e - pos < max) {
      const CharClass n = ClassAt(t, e);
      if (n == kUnknown) return 0;
      if (n != kDigit) break;
      ++e;
    }
    return e;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  size_t other = t.size();  // Start of the [^\s\p{L}\p{N}]+ run, if any.
  if (c == kOther) {
    other = pos;
  } else if (ch == ' ') {
    const CharClass next = ClassAt(t, pos + 1);
    if (next == kUnknown) return 0;
    if (next == kOther) other = pos + 1;
  }
  if (other < t.size()) {
    size_t e = RunEnd(t, other, kOther);
    if (e == 0) return 0;
    while (e < t.size() && (t[e] == '\r' || t[e] == '\n')) ++e;
    return e;
  }
  // c == kSpace. \s*[\r\n]+ : through the last line break of the run.
  const size_t e = RunEnd(t, pos, kSpace);
  if (e == 0) return 0;
  for (size_t k = e; k > pos; --k) {
    if (t[k - 1] == '\r' || t[k - 1] == '\n') return k;
  }
  return TrailingSpaceRun(t, pos, e);
}

void PreTokenizerRegexPattern::FindMatches(absl::string_view text,
                                           std::vector<Range>* out) const {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = 0;
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      end =
          kind_ == Kind::kGpt2 ? MatchGpt2(text, pos) : MatchLlama3(text, pos);
    }
    if (end > pos) {
      out->emplace_back(pos, end);
      pos = end;
      continue;
    }
    // Undecided here: the regex finds the match (every position starts
    // one, so this is the match at `pos`).
    Range m;
    if (!regex_->SearchFrom(text, pos, &m)) break;
    if (m.second > m.first) {
      out->push_back(m);
      pos = m.second;
    } else {
      if (m.first >= text.size()) break;
      pos = m.first + Utf8CharLen(static_cast<unsigned char>(text[m.first]));
    }
  }
}

absl::StatusOr<std::unique_ptr<Pattern>> CompileRegexPattern(
    absl::string_view regex) {
  auto compiled = Regex::Compile(regex);
  if (!compiled.ok()) return compiled.status();
  PreTokenizerRegexPattern::Kind kind;
  if (PreTokenizerRegexPattern::Recognize(regex, &kind)) {
    return std::unique_ptr<Pattern>(
        new PreTokenizerRegexPattern(kind, *std::move(compiled)));
  }
  return std::unique_ptr<Pattern>(new RegexPattern(*std::move(compiled)));
}

void LiteralPattern::FindMatches(absl::string_view text,
                                 std::vector<Range>* out) const {
  if (literal_.empty()) return;
  size_t pos = 0;
  while ((pos = text.find(literal_, pos)) != absl::string_view::npos) {
    out->emplace_back(pos, pos + literal_.size());
    pos += literal_.size();
  }
}

void CharPredicatePattern::FindMatches(absl::string_view text,
                                       std::vector<Range>* out) const {
  size_t i = 0;
  while (i < text.size()) {
    size_t len;
    const char32_t c = DecodeUtf8(text, i, &len);
    if (pred_(c)) out->emplace_back(i, i + len);
    i += len;
  }
}

}  // namespace tokenizer_internal
}  // namespace inferd
