#include "runtime/gen/speculative.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/common/field_error.h"

namespace inferd {

absl::Status SpeculativeParams::Validate() const {
  if (num_draft_tokens < -1 || num_draft_tokens > kMaxDraftTokens) {
    return FieldError(
        "speculative.num_draft_tokens", absl::StrCat(" = ", num_draft_tokens,
                     " is outside [0, ", kMaxDraftTokens, "]"));
  }
  for (auto [name, v] : {std::pair<const char*, int32_t>{"min_ngram", min_ngram},
                         {"max_ngram", max_ngram}}) {
    if (v < 0 || v > kMaxNgram) {
      return FieldError(
          absl::StrCat("speculative.", name), absl::StrCat(" = ", v, " is outside [1, ",
                       kMaxNgram, "] (0 = default)"));
    }
  }
  if (min_ngram > 0 && max_ngram > 0 && min_ngram > max_ngram) {
    return FieldError(
        "speculative.min_ngram", absl::StrCat(" (", min_ngram,
                     ") must be <= max_ngram (", max_ngram, ")"));
  }
  return absl::OkStatus();
}

SpeculativeParams SpeculativeParams::Resolved(
    int32_t default_draft_tokens) const {
  SpeculativeParams r = *this;
  if (r.num_draft_tokens < 0) {
    r.num_draft_tokens = std::clamp(default_draft_tokens, 0, kMaxDraftTokens);
  }
  if (r.max_ngram <= 0) r.max_ngram = std::max(kDefaultMaxNgram, r.min_ngram);
  if (r.min_ngram <= 0) r.min_ngram = std::min(kDefaultMinNgram, r.max_ngram);
  return r;
}

void ProposeNgramDrafts(absl::Span<const int32_t> tokens, int32_t min_ngram,
                        int32_t max_ngram, int32_t max_drafts,
                        std::vector<int32_t>* drafts) {
  drafts->clear();
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (max_drafts <= 0 || min_ngram <= 0) return;
  for (int64_t n = std::min<int64_t>(max_ngram, len - 1); n >= min_ngram;
       --n) {
    const int32_t* suffix = tokens.data() + (len - n);
    // Matches start at i < len - n (never the suffix itself), latest first.
    int64_t found = -1;
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (!std::equal(suffix, suffix + n, tokens.data() + i)) continue;
      found = i;
      // Enough tokens follow this match: the most recent one wins.
      if (i + n + max_drafts <= len) break;
    }
    if (found < 0) continue;
    const int64_t begin = found + n;
    const int64_t end = std::min<int64_t>(begin + max_drafts, len);
    drafts->assign(tokens.begin() + begin, tokens.begin() + end);
    return;
  }
}

}  // namespace inferd
