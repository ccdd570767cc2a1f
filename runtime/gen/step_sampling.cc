#include "runtime/gen/step_sampling.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"

namespace inferd {

LogitRows LogitRows::Of(absl::Span<const float> values, int32_t rows) {
  LogitRows r;
  r.values = values;
  r.rows = rows;
  r.stride = rows > 0 ? values.size() / static_cast<size_t>(rows) : 0;
  return r;
}

LogitRows LogitRows::Row(int32_t r) const {
  LogitRows one;
  one.values = values.subspan(static_cast<size_t>(r) * stride, stride);
  one.rows = 1;
  one.stride = stride;
  return one;
}

StepSampling::StepSampling(TokenSampler* sampler, int32_t vocab_size)
    : sampler_(*sampler), raw_(vocab_size), vocab_size_(vocab_size) {}

FinishReason StepSampling::Finish(SequenceDecoding seq, int32_t token_id,
                                  bool may_complete) {
  // EOS, stop ids and max_tokens end a sequence here, so the scheduler
  // frees it at once; stop strings are the output side's.
  FinishReason reason = seq.stop->TokenFinish(token_id, ++*seq.generated);
  // A complete structured output ends like a stop token.
  if (reason == FinishReason::kNone && may_complete &&
      seq.state->constraint_complete()) {
    reason = FinishReason::kStop;
  }
  return reason;
}

absl::Span<float> StepSampling::Scratch(const LogitRows& rows, int32_t r) {
  const float* row = rows.row(r);
  row_.assign(row, row + vocab_size_);
  return absl::MakeSpan(row_);
}

absl::Status StepSampling::PromptLogprobs(const LogitRows& rows,
                                          int32_t expected_rows,
                                          absl::Span<const int32_t> prompt,
                                          int32_t start_pos, int32_t k,
                                          int32_t* done,
                                          std::vector<SampleResult>* out) {
  const size_t v = static_cast<size_t>(vocab_size_);
  if (rows.rows != expected_rows || rows.stride < v) {
    return absl::InternalError(absl::StrCat(
        "the model returned ", rows.rows, " logits rows of ", rows.stride,
        " values for prompt logprobs; expected ", expected_rows, " of ", v));
  }
  const int32_t prompt_len = static_cast<int32_t>(prompt.size());
  for (int32_t j = 0; j < rows.rows; ++j) {
    const int32_t pos = start_pos + j + 1;
    if (pos >= prompt_len) break;
    if (pos <= *done) continue;
    SampleResult res;
    RETURN_IF_ERROR(raw_.RawLogprobs(absl::MakeConstSpan(rows.row(j), v),
                                     prompt[pos], k, &res));
    out->push_back(std::move(res));
    *done = pos;
  }
  return absl::OkStatus();
}

absl::Status StepSampling::Tokens(const LogitRows& rows,
                                  absl::Span<const int32_t> drafts, bool forced,
                                  SequenceDecoding seq, SequenceTokens* out) {
  const int32_t num_drafts = static_cast<int32_t>(drafts.size());
  const int32_t want_rows = forced ? 1 : num_drafts + 1;
  if (rows.rows != want_rows ||
      rows.stride < static_cast<size_t>(vocab_size_)) {
    return absl::InternalError(absl::StrCat(
        "the model returned ", rows.rows, " logits rows of ", rows.stride,
        " values; expected ", want_rows, " of ", vocab_size_));
  }
  out->tokens.clear();
  out->accepted = 0;
  const int64_t seq_id = out->sampled.seq_id;
  out->sampled = SampledToken();
  out->sampled.seq_id = seq_id;
  auto record = [&](int32_t token_id, FinishReason reason, int32_t kept) {
    out->sampled.token_id = token_id;
    out->sampled.finish_reason = reason;
    out->sampled.num_accepted_drafts = kept;
  };
  if (forced) {
    // The constraint allowed nothing else: the forced tokens are taken as
    // they are (stops still apply; past a stop the sequence ends and the
    // state is not used again), then the row samples the token after them.
    Sampler::AcceptForced(seq.state, drafts, &out->tokens);
    for (int32_t j = 0; j < num_drafts; ++j) {
      const int32_t id = out->tokens[static_cast<size_t>(j)].token_id;
      ++out->accepted;
      // The state is past every forced token: only the last one can leave
      // it complete; before it the format still forces more.
      const FinishReason reason = Finish(seq, id, j == num_drafts - 1);
      record(id, reason, j);
      if (reason != FinishReason::kNone) {
        out->tokens.resize(static_cast<size_t>(j) + 1);
        return absl::OkStatus();
      }
    }
    SampleResult& res = out->tokens.emplace_back();
    RETURN_IF_ERROR(sampler_.SampleRow(Scratch(rows, 0), seq.state, &res));
    record(res.token_id, Finish(seq, res.token_id, true), num_drafts);
    return absl::OkStatus();
  }
  // Row j predicts the token after the j-th new token: it verifies draft j,
  // and the row after the last draft samples the bonus token. Each token
  // goes through the sampling state (penalties, grammar) and the stop
  // checks before the next row is looked at.
  for (int32_t j = 0; j <= num_drafts; ++j) {
    SampleResult& res = out->tokens.emplace_back();
    bool took_draft = false;
    if (j < num_drafts) {
      RETURN_IF_ERROR(sampler_.VerifyRow(Scratch(rows, j), seq.state,
                                         drafts[static_cast<size_t>(j)], &res,
                                         &took_draft));
    } else {
      RETURN_IF_ERROR(sampler_.SampleRow(Scratch(rows, j), seq.state, &res));
    }
    if (took_draft) ++out->accepted;
    const FinishReason reason = Finish(seq, res.token_id, true);
    record(res.token_id, reason, j);
    if (reason != FinishReason::kNone || !took_draft) break;
  }
  return absl::OkStatus();
}

absl::Status StepSampling::ForkFirstToken(const LogitRows& parent_rows,
                                          SequenceDecoding child,
                                          SampleResult* result,
                                          FinishReason* reason) {
  if (parent_rows.rows < 1 ||
      parent_rows.stride < static_cast<size_t>(vocab_size_)) {
    return absl::InternalError(absl::StrCat(
        "a fork needs its parent's logits row; the model returned ",
        parent_rows.rows, " rows of ", parent_rows.stride, " values"));
  }
  RETURN_IF_ERROR(sampler_.SampleRow(Scratch(parent_rows, parent_rows.rows - 1),
                                     child.state, result));
  *reason = Finish(child, result->token_id, true);
  return absl::OkStatus();
}

}  // namespace inferd
