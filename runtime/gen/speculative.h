// Speculative decoding by prompt lookup: SpeculativeParams (the per-request
// settings of inferd.v1.SpeculativeDecoding) and the n-gram draft proposer.
// Drafts are the tokens that followed the most recent earlier occurrence of
// the sequence's last n tokens (n from max_ngram down to min_ngram) in the
// prompt and the output so far ("prompt lookup decoding"); the engine
// verifies them in one forward pass (Sampler::VerifyRow). Plain functions
// and value types; no threading concerns.
#ifndef INFERD_RUNTIME_GEN_SPECULATIVE_H_
#define INFERD_RUNTIME_GEN_SPECULATIVE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace inferd {

inline constexpr int32_t kMaxDraftTokens = 16;
inline constexpr int32_t kMaxNgram = 16;
// Tokens a structured output's format forces, fed as drafts in one step.
inline constexpr int32_t kMaxForcedTokens = 32;
inline constexpr int32_t kDefaultMinNgram = 1;
inline constexpr int32_t kDefaultMaxNgram = 3;

struct SpeculativeParams {
  // Draft tokens proposed (and verified) per decoding step; 0 = off; -1 =
  // the server's default (--speculative-draft-tokens).
  int32_t num_draft_tokens = -1;
  // Sizes of the suffix n-gram looked up, tried from max_ngram down to
  // min_ngram; 0 = the defaults above.
  int32_t min_ngram = 0;
  int32_t max_ngram = 0;

  // The ranges documented in inferd/v1/inference.proto; INVALID_ARGUMENT
  // naming the field.
  absl::Status Validate() const;
  // num_draft_tokens -1 -> `default_draft_tokens`, n-gram sizes 0 -> the
  // defaults (min_ngram clamped to max_ngram).
  SpeculativeParams Resolved(int32_t default_draft_tokens) const;
  bool enabled() const { return num_draft_tokens > 0; }
};

// Replaces *drafts with up to `max_drafts` tokens proposed to follow
// `tokens` (prompt + output so far): for n = max_ngram down to min_ngram,
// the last n tokens are searched for earlier in `tokens`; at the first n
// that matches, the tokens after the match are proposed, from the most
// recent match that has max_drafts of them, else from the earliest match
// (the longest continuation). Empty when nothing matches. O(len * n).
void ProposeNgramDrafts(absl::Span<const int32_t> tokens, int32_t min_ngram,
                        int32_t max_ngram, int32_t max_drafts,
                        std::vector<int32_t>* drafts);

}  // namespace inferd

#endif  // INFERD_RUNTIME_GEN_SPECULATIVE_H_
