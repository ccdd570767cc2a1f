#include "runtime/tokenizer/regex.h"

#include <oniguruma.h>

#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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
  const int r = onig_new(&regex, begin, begin + pattern.size(),
                         ONIG_OPTION_CAPTURE_GROUP | ONIG_OPTION_SINGLELINE,
                         ONIG_ENCODING_UTF8,
                         ONIG_SYNTAX_ONIGURUMA, &einfo);
  if (r != ONIG_NORMAL) {
    OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, r, &einfo);
    return absl::InvalidArgumentError(
        absl::StrCat("invalid regex '", pattern,
                     "': ", reinterpret_cast<const char*>(msg)));
  }
  return std::unique_ptr<Regex>(new Regex(regex));
}

Regex::~Regex() { onig_free(static_cast<OnigRegex>(regex_)); }

void Regex::FindAll(absl::string_view text, std::vector<Range>* out) const {
  auto* regex = static_cast<OnigRegex>(regex_);
  OnigRegion* region = onig_region_new();
  const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
  const OnigUChar* end = str + text.size();
  size_t pos = 0;
  while (pos <= text.size()) {
    const int r = onig_search(regex, str, end, str + pos, end, region,
                              ONIG_OPTION_NONE);
    if (r < 0) break;  // ONIG_MISMATCH or an error: no more matches.
    const size_t ms = static_cast<size_t>(region->beg[0]);
    const size_t me = static_cast<size_t>(region->end[0]);
    if (me > ms) {
      out->emplace_back(ms, me);
      pos = me;
    } else {
      // Empty match: step over one character.
      if (ms >= text.size()) break;
      pos = ms + Utf8CharLen(static_cast<unsigned char>(text[ms]));
    }
  }
  onig_region_free(region, 1);
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
