#include "runtime/gen/step_sampling.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace inferd {
namespace {

constexpr int32_t kVocab = 8;
constexpr int32_t kEos = 7;

// Rows of logits whose argmax is the given token (logit 5 there, 0 elsewhere
// except a second-best 1 at (token + 1) % kVocab), padded to `stride`.
std::vector<float> RowsWithArgmax(const std::vector<int32_t>& argmax,
                                  size_t stride = kVocab) {
  std::vector<float> v(argmax.size() * stride, 0.0f);
  for (size_t r = 0; r < argmax.size(); ++r) {
    v[r * stride + static_cast<size_t>(argmax[r])] = 5.0f;
    v[r * stride + static_cast<size_t>((argmax[r] + 1) % kVocab)] = 1.0f;
  }
  return v;
}

// One sequence's sampling state and stop rules, greedy unless told.
struct Seq {
  explicit Seq(int32_t max_new, SamplingParams p = Greedy())
      : params(p), state(params, {}, {kEos}), stop(params, {kEos}, max_new) {}
  static SamplingParams Greedy() {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
  }
  SequenceDecoding decoding() {
    SequenceDecoding d;
    d.state = &state;
    d.stop = &stop;
    d.generated = &generated;
    return d;
  }
  SamplingParams params;
  SamplingState state;
  StopChecker stop;
  int32_t generated = 0;
};

std::vector<int32_t> Ids(const SequenceTokens& t) {
  std::vector<int32_t> ids;
  for (const SampleResult& r : t.tokens) ids.push_back(r.token_id);
  return ids;
}

class StepSamplingTest : public ::testing::Test {
 protected:
  Sampler sampler_{kVocab};
  StepSampling stages_{&sampler_, kVocab};
};

TEST_F(StepSamplingTest, OneRowIsOneSampledToken) {
  Seq seq(16);
  const std::vector<float> v = RowsWithArgmax({3}, 12);  // wider rows
  SequenceTokens out;
  out.sampled.seq_id = 42;
  ASSERT_TRUE(
      stages_.Tokens(LogitRows::Of(v, 1), {}, false, seq.decoding(), &out)
          .ok());
  EXPECT_EQ(Ids(out), std::vector<int32_t>({3}));
  EXPECT_EQ(out.sampled.seq_id, 42);
  EXPECT_EQ(out.sampled.token_id, 3);
  EXPECT_EQ(out.sampled.finish_reason, FinishReason::kNone);
  EXPECT_EQ(out.sampled.num_accepted_drafts, 0);
  EXPECT_EQ(out.accepted, 0);
  EXPECT_EQ(seq.generated, 1);
  EXPECT_EQ(seq.state.num_output_tokens(), 1);
}

TEST_F(StepSamplingTest, VerifiedDraftsThenTheRowAfterTheFirstMiss) {
  Seq seq(16);
  // Drafts 1, 2, 4; the model agrees with 1 and 2, then says 5.
  const std::vector<float> v = RowsWithArgmax({1, 2, 5, 6});
  SequenceTokens out;
  ASSERT_TRUE(
      stages_
          .Tokens(LogitRows::Of(v, 4), {1, 2, 4}, false, seq.decoding(), &out)
          .ok());
  EXPECT_EQ(Ids(out), std::vector<int32_t>({1, 2, 5}));
  EXPECT_EQ(out.accepted, 2);
  EXPECT_EQ(out.sampled.token_id, 5);
  EXPECT_EQ(out.sampled.num_accepted_drafts, 2);
  EXPECT_EQ(seq.generated, 3);
}

TEST_F(StepSamplingTest, AllDraftsAcceptedGiveTheBonusToken) {
  Seq seq(16);
  const std::vector<float> v = RowsWithArgmax({1, 2, 6});
  SequenceTokens out;
  ASSERT_TRUE(
      stages_.Tokens(LogitRows::Of(v, 3), {1, 2}, false, seq.decoding(), &out)
          .ok());
  EXPECT_EQ(Ids(out), std::vector<int32_t>({1, 2, 6}));
  EXPECT_EQ(out.accepted, 2);
  EXPECT_EQ(out.sampled.num_accepted_drafts, 2);
}

TEST_F(StepSamplingTest, AStopTokenAmongTheDraftsEndsTheSequenceThere) {
  Seq seq(16);
  const std::vector<float> v = RowsWithArgmax({1, kEos, 3});
  SequenceTokens out;
  ASSERT_TRUE(
      stages_
          .Tokens(LogitRows::Of(v, 3), {1, kEos}, false, seq.decoding(), &out)
          .ok());
  EXPECT_EQ(Ids(out), std::vector<int32_t>({1, kEos}));
  EXPECT_EQ(out.sampled.token_id, kEos);
  EXPECT_EQ(out.sampled.finish_reason, FinishReason::kEos);
  EXPECT_EQ(out.sampled.num_accepted_drafts, 1);
}

TEST_F(StepSamplingTest, MaxTokensEndsInTheMiddleOfTheDrafts) {
  Seq seq(/*max_new=*/2);
  const std::vector<float> v = RowsWithArgmax({1, 2, 3, 4});
  SequenceTokens out;
  ASSERT_TRUE(
      stages_
          .Tokens(LogitRows::Of(v, 4), {1, 2, 3}, false, seq.decoding(), &out)
          .ok());
  EXPECT_EQ(Ids(out), std::vector<int32_t>({1, 2}));
  EXPECT_EQ(out.sampled.finish_reason, FinishReason::kLength);
  EXPECT_EQ(seq.generated, 2);
}

TEST_F(StepSamplingTest, ForcedTokensAreTakenThenOneRowSamples) {
  Seq seq(16);
  // One row only: the forced tokens are not verified.
  const std::vector<float> v = RowsWithArgmax({6});
  SequenceTokens out;
  ASSERT_TRUE(
      stages_.Tokens(LogitRows::Of(v, 1), {4, 5}, true, seq.decoding(), &out)
          .ok());
  EXPECT_EQ(Ids(out), std::vector<int32_t>({4, 5, 6}));
  EXPECT_EQ(out.accepted, 2);
  EXPECT_EQ(out.sampled.token_id, 6);
  EXPECT_EQ(out.sampled.num_accepted_drafts, 2);
  EXPECT_EQ(seq.state.num_output_tokens(), 3);
}

TEST_F(StepSamplingTest, AForcedStopTokenEndsBeforeTheRowIsRead) {
  Seq seq(16);
  const std::vector<float> v = RowsWithArgmax({6});
  SequenceTokens out;
  ASSERT_TRUE(
      stages_
          .Tokens(LogitRows::Of(v, 1), {4, kEos, 5}, true, seq.decoding(), &out)
          .ok());
  EXPECT_EQ(Ids(out), std::vector<int32_t>({4, kEos}));
  EXPECT_EQ(out.sampled.finish_reason, FinishReason::kEos);
  EXPECT_EQ(out.sampled.num_accepted_drafts, 1);
}

TEST_F(StepSamplingTest, RowsTheStepDidNotAskForAreAnInternalError) {
  Seq seq(16);
  const std::vector<float> v = RowsWithArgmax({1, 2});
  SequenceTokens out;
  // Two drafts need three rows.
  EXPECT_EQ(
      stages_.Tokens(LogitRows::Of(v, 2), {1, 2}, false, seq.decoding(), &out)
          .code(),
      absl::StatusCode::kInternal);
  // Rows narrower than the vocabulary.
  const std::vector<float> narrow(kVocab - 1, 0.0f);
  EXPECT_EQ(
      stages_.Tokens(LogitRows::Of(narrow, 1), {}, false, seq.decoding(), &out)
          .code(),
      absl::StatusCode::kInternal);
  EXPECT_EQ(seq.generated, 0);
}

// Log-softmax from the definition, in double.
double LogProb(const float* row, int32_t token) {
  double m = -INFINITY;
  for (int32_t i = 0; i < kVocab; ++i) m = std::max<double>(m, row[i]);
  double s = 0.0;
  for (int32_t i = 0; i < kVocab; ++i) s += std::exp(row[i] - m);
  return row[token] - m - std::log(s);
}

TEST_F(StepSamplingTest, PromptLogprobsAreTheRawDistributionOfEachNextToken) {
  const std::vector<int32_t> prompt = {0, 3, 1, 4, 2};
  // A chunk of positions 1..3 (start_pos 1): its rows predict positions
  // 2, 3 and 4.
  std::vector<float> v = RowsWithArgmax({1, 4, 0});
  v[1] = -2.5f;  // not a one-hot distribution
  int32_t done = 0;
  std::vector<SampleResult> got;
  ASSERT_TRUE(
      stages_.PromptLogprobs(LogitRows::Of(v, 3), 3, prompt, 1, 2, &done, &got)
          .ok());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(done, 4);
  for (int32_t j = 0; j < 3; ++j) {
    const SampleResult& r = got[static_cast<size_t>(j)];
    const int32_t pos = 1 + j + 1;
    EXPECT_EQ(r.token_id, prompt[static_cast<size_t>(pos)]);
    EXPECT_NEAR(r.logprob,
                LogProb(&v[static_cast<size_t>(j) * kVocab],
                        prompt[static_cast<size_t>(pos)]),
                1e-5);
    ASSERT_EQ(r.top_logprobs.size(), 2u);
  }
  // The same chunk again (a recompute after a preemption) adds nothing; a
  // chunk running past the prompt's end stops there.
  got.clear();
  ASSERT_TRUE(
      stages_.PromptLogprobs(LogitRows::Of(v, 3), 3, prompt, 1, 2, &done, &got)
          .ok());
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(
      stages_.PromptLogprobs(LogitRows::Of(v, 3), 2, prompt, 1, 2, &done, &got)
          .code(),
      absl::StatusCode::kInternal);
}

TEST_F(StepSamplingTest, AForkDrawsItsFirstTokenFromTheParentsLastRow) {
  Seq child(16);
  const std::vector<float> v = RowsWithArgmax({1, 2, 5});
  SampleResult r;
  FinishReason reason = FinishReason::kError;
  ASSERT_TRUE(
      stages_.ForkFirstToken(LogitRows::Of(v, 3), child.decoding(), &r, &reason)
          .ok());
  EXPECT_EQ(r.token_id, 5);
  EXPECT_EQ(reason, FinishReason::kNone);
  EXPECT_EQ(child.generated, 1);
  Seq short_child(/*max_new=*/1);
  ASSERT_TRUE(stages_
                  .ForkFirstToken(LogitRows::Of(v, 3), short_child.decoding(),
                                  &r, &reason)
                  .ok());
  EXPECT_EQ(reason, FinishReason::kLength);
}

// A workflow sampler without its own VerifyRow (as a plug-in's may be):
// the stage accepts a draft exactly when the sampler draws it.
class AlwaysToken : public TokenSampler {
 public:
  explicit AlwaysToken(int32_t token) : token_(token) {}
  absl::Status SampleRow(absl::Span<float> logits, SamplingContext* state,
                         SampleResult* result) override {
    (void)logits;
    result->token_id = token_;
    state->Accept(token_);
    ++calls;
    return absl::OkStatus();
  }
  int calls = 0;

 private:
  int32_t token_;
};

TEST_F(StepSamplingTest, TheWorkflowsSamplerDecidesTheTokens) {
  AlwaysToken always(2);
  StepSampling stages(&always, kVocab);
  Seq seq(16);
  const std::vector<float> v = RowsWithArgmax({2, 2, 1});
  SequenceTokens out;
  ASSERT_TRUE(
      stages.Tokens(LogitRows::Of(v, 3), {2, 3}, false, seq.decoding(), &out)
          .ok());
  // Draft 2 accepted (the sampler drew it), draft 3 refused: the sampler's
  // 2 takes its place.
  EXPECT_EQ(Ids(out), std::vector<int32_t>({2, 2}));
  EXPECT_EQ(out.accepted, 1);
  EXPECT_EQ(always.calls, 2);
}

}  // namespace
}  // namespace inferd
