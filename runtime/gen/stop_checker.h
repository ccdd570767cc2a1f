// StopChecker: decides when a generation ends (EOS, stop tokens, stop
// strings, max_tokens) and which text may be streamed. Stop strings are
// matched across token boundaries on the incremental text deltas (e.g. from
// IncrementalDecoder::Push); text that could still become the start of a
// stop string is held back until it cannot, or until the generation ends.
// One per request. Append/Finish: not thread-safe (the output side);
// TokenFinish is const and safe beside them (the engine loop).
#ifndef INFERD_RUNTIME_GEN_STOP_CHECKER_H_
#define INFERD_RUNTIME_GEN_STOP_CHECKER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/gen/sampling_params.h"

namespace inferd {

struct StopCheckResult {
  // Text that may be streamed now (possibly empty while text is held back).
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  // What ended the generation, when a stop string or token did.
  std::string stop_string;
  std::optional<int32_t> stop_token_id;

  bool finished() const { return finish_reason != FinishReason::kNone; }
};

class StopChecker {
 public:
  // `max_new_tokens`: the resolved limit of generated tokens (the request's
  // max_tokens, or what the context leaves); 0 = no limit here.
  // `eos_token_ids`: the model's EOS ids.
  StopChecker(const SamplingParams& params,
              absl::Span<const int32_t> eos_token_ids, int32_t max_new_tokens);

  // Feeds the next generated token and the text it added. Rules, in order:
  //  - EOS (unless ignore_eos) or a stop_token_id ends it (kEos / kStop)
  //    once min_tokens tokens precede it; the token's own text is dropped
  //    unless include_stop_str_in_output.
  //  - A stop string ends it (kStop) once min_tokens tokens were generated,
  //    this one included. When several match, the one ending first in the
  //    text wins (then the one starting first), so the outcome does not
  //    depend on how the text splits into tokens. The text stops before the
  //    match (or after it with include_stop_str_in_output).
  //  - Reaching max_new_tokens ends it (kLength).
  // On any finish the held-back text is released. No-op after a finish.
  StopCheckResult Append(int32_t token_id, absl::string_view text_delta);

  // The rules that need the ids alone (EOS, stop ids, max_new_tokens) for
  // the `n`-th generated token (1-based), as Append applies them: what the
  // engine loop decides on its own thread while the output side streams
  // text through Append. Reads only the immutable rules, so it may run
  // concurrently with Append.
  FinishReason TokenFinish(int32_t token_id, int32_t n) const;

  // Ends the generation for a reason decided elsewhere (cancel, error, the
  // context limit): releases held-back text followed by `final_text` (e.g.
  // the decoder's Flush()). No-op after a finish.
  StopCheckResult Finish(FinishReason reason,
                         absl::string_view final_text = {});

  bool finished() const { return finished_; }
  int32_t num_tokens() const { return num_tokens_; }
  // Everything released so far.
  const std::string& released_text() const { return released_; }
  // Bytes currently held back.
  size_t num_held_bytes() const { return pending_.size(); }

 private:
  // EOS or a stop id as the n-th token (min_tokens applied), else kNone.
  FinishReason StopTokenFinish(int32_t token_id, int32_t n) const;
  // Moves pending_[0, n) to `out` and released_.
  void Release(size_t n, StopCheckResult* out);
  // Length of the longest suffix of pending_ that is a proper prefix of a
  // stop string.
  size_t HeldSuffixLength() const;

  std::vector<std::string> stops_;
  std::vector<int32_t> stop_token_ids_;
  std::vector<int32_t> eos_token_ids_;
  bool include_stop_str_;
  bool ignore_eos_;
  int32_t min_tokens_;
  int32_t max_new_tokens_;

  std::string pending_;  // held back, not yet released
  // Matches ending at or before this offset in pending_ completed before
  // min_tokens and are ignored.
  size_t min_match_end_ = 0;
  std::string released_;
  int32_t num_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_GEN_STOP_CHECKER_H_
