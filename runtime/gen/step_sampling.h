// StepSampling: the sampling half of a generate step, in stages over the
// logits rows the model returned for one sequence:
//  - PromptLogprobs: a prompt chunk's rows -> the log-probabilities of the
//    prompt tokens they predict (the model's raw distribution, whatever the
//    workflow's sampler);
//  - Tokens: the sequence's next token(s): one sampled row; speculative
//    verification (row j verifies draft j, the row after the last accepted
//    draft samples one more token); or a structured output's forced tokens
//    taken as they are plus one sampled token. Every token passes the
//    sequence's id-based stop checks (EOS, stop ids, max_tokens, a complete
//    structured output) before the next row is read, as one step at a time
//    would;
//  - ForkFirstToken: a sample of an n > 1 request draws its first token
//    from the row its first sample drew from.
// The engine keeps the bookkeeping (which sequence, the scheduler, the
// output side); the stages see only logits, the sampling state and the stop
// rules. Not thread-safe; owned by the engine loop.
#ifndef INFERD_RUNTIME_GEN_STEP_SAMPLING_H_
#define INFERD_RUNTIME_GEN_STEP_SAMPLING_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/gen/sampler.h"
#include "runtime/gen/scheduler.h"
#include "runtime/gen/stop_checker.h"

namespace inferd {

// One sequence's rows of logits from a step: row r starts at r * stride and
// its first vocab_size values are read. Does not own `values`.
struct LogitRows {
  absl::Span<const float> values;
  int32_t rows = 0;
  size_t stride = 0;

  // `rows` rows packed in `values` (stride values.size() / rows).
  static LogitRows Of(absl::Span<const float> values, int32_t rows);
  // Row `r` alone.
  LogitRows Row(int32_t r) const;
  const float* row(int32_t r) const {
    return values.data() + static_cast<size_t>(r) * stride;
  }
};

// A sequence's decoding as the stages see it (not owned).
struct SequenceDecoding {
  SamplingState* state = nullptr;  // the sampler sees its SamplingContext
  const StopChecker* stop = nullptr;
  int32_t* generated = nullptr;  // tokens so far; advanced per token
};

// What Tokens produced: the tokens to stream, in order, and what the
// scheduler is told (token_id: the last token; num_accepted_drafts: the
// drafts before it that were kept).
struct SequenceTokens {
  std::vector<SampleResult> tokens;
  SampledToken sampled;
  int32_t accepted = 0;  // drafts (or forced tokens) taken
};

class StepSampling {
 public:
  // `sampler`: the workflow's (not owned); `vocab_size`: logits read per row.
  StepSampling(TokenSampler* sampler, int32_t vocab_size);

  // Prompt logprobs of the prompt chunk starting at `start_pos`: row j
  // predicts prompt[start_pos + j + 1]; positions up to `*done` (a chunk
  // recomputed after a preemption) are skipped, positions past the prompt
  // ignored. Appends one entry per new position (the prompt token with its
  // logprob and its `k` most likely alternatives) to `out`, advancing
  // `*done`. INTERNAL when the model gave other than `expected_rows` rows.
  absl::Status PromptLogprobs(const LogitRows& rows, int32_t expected_rows,
                              absl::Span<const int32_t> prompt,
                              int32_t start_pos, int32_t k, int32_t* done,
                              std::vector<SampleResult>* out);

  // The sequence's next token(s) from its rows: drafts.size() + 1 rows for
  // speculative verification (one row without drafts), one row when
  // `forced` (the drafts are tokens the structured output forces).
  // INTERNAL on a row count or width the step did not ask for;
  // INVALID_ARGUMENT (the sampler's) when no token can be chosen.
  absl::Status Tokens(const LogitRows& rows, absl::Span<const int32_t> drafts,
                      bool forced, SequenceDecoding seq, SequenceTokens* out);

  // A fork's first token, sampled with `child`'s own state from the last
  // row of `parent_rows`; `*reason` says whether that token ends it.
  absl::Status ForkFirstToken(const LogitRows& parent_rows,
                              SequenceDecoding child, SampleResult* result,
                              FinishReason* reason);

 private:
  // The stop rules for the next token of `seq` (its count advanced), and a
  // complete structured output when `may_complete`.
  static FinishReason Finish(SequenceDecoding seq, int32_t token_id,
                             bool may_complete);
  // Copies row `r` into the scratch row the sampler overwrites.
  absl::Span<float> Scratch(const LogitRows& rows, int32_t r);

  TokenSampler& sampler_;
  Sampler raw_;  // prompt logprobs: the raw distribution
  const int32_t vocab_size_;
  std::vector<float> row_;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_GEN_STEP_SAMPLING_H_
