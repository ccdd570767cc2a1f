#include "service/metrics.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace inferd {
namespace {

// The value of the exposition line that starts with `series` (name plus
// exact label set), or -1 when absent.
double Value(const std::string& text, const std::string& series) {
  size_t pos = 0;
  while ((pos = text.find(series + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') {
      return std::stod(text.substr(pos + series.size() + 1));
    }
    pos += series.size();
  }
  return -1;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = ModelManager::Create({});
    ASSERT_TRUE(m.ok()) << m.status();
    models_ = std::move(m).value();
    metrics_ = std::make_unique<Metrics>(models_.get(), [] { return 3; });
  }
  std::unique_ptr<ModelManager> models_;
  std::unique_ptr<Metrics> metrics_;
};

TEST_F(MetricsTest, CountsRpcsByCodeAndModel) {
  metrics_->OnRpcDone("Generate", "llm", absl::OkStatus(), 0.5);
  metrics_->OnRpcDone("Generate", "llm", absl::OkStatus(), 0.5);
  metrics_->OnRpcDone("Embed", "", absl::UnauthenticatedError("no key"),
                      0.001);
  const std::string text = metrics_->Render();
  EXPECT_EQ(Value(text,
                  "inferd_rpc_requests_total{code=\"OK\",model=\"llm\","
                  "rpc=\"Generate\"}"),
            2);
  EXPECT_EQ(Value(text,
                  "inferd_rpc_requests_total{code=\"UNAUTHENTICATED\","
                  "model=\"\",rpc=\"Embed\"}"),
            1);
  EXPECT_EQ(Value(text,
                  "inferd_rpc_duration_seconds_count{model=\"llm\","
                  "rpc=\"Generate\"}"),
            2);
  EXPECT_EQ(Value(text, "inferd_rpc_in_flight"), 3);
}

TEST_F(MetricsTest, GenerationFeedsTokenCountersAndLatencyHistograms) {
  GenerateChunk c;
  c.finish = FinishReason::kLength;
  c.usage.prompt_tokens = 7;
  c.usage.completion_tokens = 4;
  c.timings.queue_seconds = 0.002;
  c.timings.time_to_first_token_seconds = 0.02;
  c.timings.total_seconds = 0.05;
  const std::vector<double> gaps = {0.01, 0.01, 0.01};
  metrics_->OnGenerateDone("llm", c, gaps);
  c.finish = FinishReason::kEos;
  metrics_->OnGenerateDone("llm", c, gaps);
  const std::string text = metrics_->Render();
  EXPECT_EQ(Value(text, "inferd_prompt_tokens_total{model=\"llm\"}"), 14);
  EXPECT_EQ(Value(text, "inferd_generation_tokens_total{model=\"llm\"}"), 8);
  EXPECT_EQ(Value(text,
                  "inferd_request_success_total{finished_reason=\"length\","
                  "model=\"llm\"}"),
            1);
  EXPECT_EQ(Value(text,
                  "inferd_request_success_total{finished_reason=\"eos\","
                  "model=\"llm\"}"),
            1);
  EXPECT_EQ(
      Value(text, "inferd_time_to_first_token_seconds_count{model=\"llm\"}"),
      2);
  EXPECT_EQ(
      Value(text, "inferd_time_per_output_token_seconds_count{model=\"llm\"}"),
      6);
  EXPECT_NEAR(
      Value(text, "inferd_time_per_output_token_seconds_sum{model=\"llm\"}"),
      0.06, 1e-9);
  // 0.01 falls in the le="0.01" bucket, not below it.
  EXPECT_EQ(Value(text,
                  "inferd_time_per_output_token_seconds_bucket{model=\"llm\","
                  "le=\"0.01\"}"),
            6);
  EXPECT_EQ(Value(text,
                  "inferd_time_per_output_token_seconds_bucket{model=\"llm\","
                  "le=\"0.005\"}"),
            0);
  EXPECT_EQ(
      Value(text, "inferd_e2e_request_latency_seconds_count{model=\"llm\"}"),
      2);
  EXPECT_EQ(
      Value(text, "inferd_request_queue_time_seconds_count{model=\"llm\"}"), 2);
}

TEST_F(MetricsTest, PrefillRequestsCountInputsAndTokensPerTask) {
  RequestTimings t;
  t.queue_seconds = 0.001;
  t.tokenization_seconds = 0.0005;
  t.inference_seconds = 0.004;
  t.total_seconds = 0.006;
  metrics_->OnPrefillDone("embed", "emb", 3, 30, t);
  metrics_->OnPrefillDone("embed", "emb", 2, 10, t);
  metrics_->OnPrefillDone("rerank", "rr", 5, 50, t);
  const std::string text = metrics_->Render();
  EXPECT_EQ(
      Value(text, "inferd_embed_request_count{model=\"emb\",task=\"embed\"}"),
      2);
  EXPECT_EQ(
      Value(text, "inferd_embed_input_count{model=\"emb\",task=\"embed\"}"), 5);
  EXPECT_EQ(
      Value(text, "inferd_embed_token_count{model=\"emb\",task=\"embed\"}"),
      40);
  EXPECT_EQ(
      Value(text, "inferd_embed_input_count{model=\"rr\",task=\"rerank\"}"), 5);
  EXPECT_EQ(Value(text,
                  "inferd_embed_tokenization_duration_seconds_count{"
                  "model=\"emb\",task=\"embed\"}"),
            2);
  EXPECT_EQ(Value(text,
                  "inferd_embed_inference_duration_seconds_count{"
                  "model=\"rr\",task=\"rerank\"}"),
            1);
  EXPECT_EQ(
      Value(text, "inferd_request_queue_time_seconds_count{model=\"emb\"}"), 2);
}

TEST_F(MetricsTest, StepObserverRecordsBatchSizeAndTokens) {
  StepObserver* o = metrics_->StepObserverFor("llm");
  EXPECT_EQ(o, metrics_->StepObserverFor("llm"));
  o->OnStep({4, 100});
  o->OnStep({1, 1});
  const std::string text = metrics_->Render();
  EXPECT_EQ(Value(text, "inferd_iteration_batch_size_count{model=\"llm\"}"), 2);
  EXPECT_EQ(Value(text, "inferd_iteration_batch_size_sum{model=\"llm\"}"), 5);
  EXPECT_EQ(Value(text, "inferd_iteration_tokens_sum{model=\"llm\"}"), 101);
}

TEST_F(MetricsTest, StepObserverRecordsPrefillDecodeTokensAndStepTime) {
  StepObserver* o = metrics_->StepObserverFor("gen");
  StepInfo mixed;  // 16 decodes and a 48-token prompt chunk
  mixed.num_seqs = 17;
  mixed.num_tokens = 64;
  mixed.num_prefill_tokens = 48;
  mixed.num_decode_tokens = 16;
  mixed.seconds = 0.3;
  StepInfo decode_only;
  decode_only.num_seqs = 16;
  decode_only.num_tokens = 16;
  decode_only.num_decode_tokens = 16;
  decode_only.seconds = 0.1;
  o->OnStep(mixed);
  o->OnStep(decode_only);
  o->OnStep({2, 40});  // an engine without the split: not counted there
  const std::string text = metrics_->Render();
  EXPECT_EQ(Value(text, "inferd_iteration_prefill_tokens_count{model=\"gen\"}"),
            2);
  EXPECT_EQ(Value(text, "inferd_iteration_prefill_tokens_sum{model=\"gen\"}"),
            48);
  // The decode-only step's 0 prefill tokens sit in the le="0" bucket.
  EXPECT_EQ(Value(text, "inferd_iteration_prefill_tokens_bucket{model=\"gen\","
                        "le=\"0\"}"),
            1);
  EXPECT_EQ(Value(text, "inferd_iteration_decode_tokens_sum{model=\"gen\"}"),
            32);
  EXPECT_EQ(
      Value(text, "inferd_iteration_duration_seconds_count{model=\"gen\"}"), 2);
  EXPECT_NEAR(
      Value(text, "inferd_iteration_duration_seconds_sum{model=\"gen\"}"), 0.4,
      1e-9);
  EXPECT_EQ(Value(text, "inferd_iteration_tokens_sum{model=\"gen\"}"), 120);
}

TEST_F(MetricsTest, ServesOnAnEphemeralPortAndRejectsABadAddress) {
  ASSERT_TRUE(metrics_->Serve("127.0.0.1:0").ok());
  EXPECT_GT(metrics_->port(), 0);
  metrics_->StopServing();
  EXPECT_EQ(metrics_->port(), 0);
  Metrics other(models_.get(), nullptr);
  absl::Status s = other.Serve("256.1.1.1:http");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

}  // namespace
}  // namespace inferd
