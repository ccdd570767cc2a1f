#include "runtime/engine/output_processor.h"

#include <cmath>

#include "gtest/gtest.h"
#include "runtime/common/registry.h"
#include "runtime/engine/components.h"

namespace inferd {
namespace {

SequenceResult Hidden(std::vector<std::vector<float>> rows) {
  SequenceResult r;
  r.output = StepOutput::kHiddenStates;
  r.rows = static_cast<int32_t>(rows.size());
  r.cols = static_cast<int32_t>(rows[0].size());
  for (const auto& row : rows) r.values.insert(r.values.end(), row.begin(), row.end());
  return r;
}

// Pools with the registered built-in `name`, then finishes with `o`.
absl::StatusOr<std::vector<float>> PoolEmbedding(const std::string& name,
                                                 const SequenceResult& r,
                                                 int32_t pool_start,
                                                 const EmbedOutputOptions& o) {
  RegisterBuiltinComponents();
  auto factory = Registry::Global().Get<OutputProcessorFactory>(
      registry_kind::kOutputProcessor, name);
  if (!factory.ok()) return factory.status();
  auto pooler = (*factory)(OutputProcessorContext{});
  if (!pooler.ok()) return pooler.status();
  OutputRequest req;
  req.pool_start = pool_start;
  auto pooled = (*pooler)->Process(r, req);
  if (!pooled.ok()) return pooled.status();
  return FinishEmbedding(*pooled, o);
}

TEST(PoolEmbeddingTest, MeanPoolingSkipsPromptTokens) {
  EmbedOutputOptions o;
  o.normalize = false;
  auto e = PoolEmbedding("pooling_mean", Hidden({{100, 100}, {1, 2}, {3, 4}}),
                         1, o);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e, (std::vector<float>{2, 3}));
}

TEST(PoolEmbeddingTest, ClsAndLastPickTheirRows) {
  EmbedOutputOptions o;
  o.normalize = false;
  auto cls = PoolEmbedding("pooling_cls", Hidden({{5, 6}, {1, 2}, {3, 4}}), 1, o);
  ASSERT_TRUE(cls.ok());
  EXPECT_EQ(*cls, (std::vector<float>{5, 6}));
  auto last =
      PoolEmbedding("pooling_last", Hidden({{5, 6}, {1, 2}, {3, 4}}), 0, o);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, (std::vector<float>{3, 4}));
}

TEST(PoolEmbeddingTest, DenseModulesRunAfterPoolingThenCutThenNormalize) {
  // CLS row x = [1, 2]; layer 1: tanh(W1 x + b1), W1 = [[1, 0], [0, 1],
  // [1, 1]], b1 = [0, 0, -3]; layer 2 (identity): W2 = 2 * I3.
  std::vector<DenseLayer> dense(2);
  dense[0].in_features = 2;
  dense[0].out_features = 3;
  dense[0].weight = {1, 0, 0, 1, 1, 1};
  dense[0].bias = {0, 0, -3};
  dense[0].tanh = true;
  dense[1].in_features = 3;
  dense[1].out_features = 3;
  dense[1].weight = {2, 0, 0, 0, 2, 0, 0, 0, 2};
  EmbedOutputOptions o;
  o.normalize = true;
  o.dimensions = 2;
  o.dense = &dense;
  auto e = PoolEmbedding("pooling_cls", Hidden({{1, 2}, {9, 9}}), 0, o);
  ASSERT_TRUE(e.ok());
  const double a = 2 * std::tanh(1.0), b = 2 * std::tanh(2.0);
  const double n = std::sqrt(a * a + b * b);
  ASSERT_EQ(e->size(), 2u);
  EXPECT_NEAR((*e)[0], a / n, 1e-6);
  EXPECT_NEAR((*e)[1], b / n, 1e-6);
}

TEST(PoolEmbeddingTest, DenseShapeMismatchIsAnError) {
  std::vector<DenseLayer> dense(1);
  dense[0].in_features = 3;
  dense[0].out_features = 1;
  dense[0].weight = {1, 1, 1};
  EmbedOutputOptions o;
  o.dense = &dense;
  EXPECT_FALSE(PoolEmbedding("pooling_cls", Hidden({{1, 2}}), 0, o).ok());
}

TEST(ScoresProcessorTest, RawRequestsSkipTheScoreFunction) {
  auto p = CreateScoresProcessor("label_scores", ScoreFunction::kSoftmax);
  SequenceResult r;
  r.output = StepOutput::kClassifierLogits;
  r.values = {0, std::log(3.0f)};
  OutputRequest req;
  auto scored = p->Process(r, req);
  ASSERT_TRUE(scored.ok());
  EXPECT_NEAR((*scored)[1], 0.75, 1e-6);
  req.raw_scores = true;
  auto raw = p->Process(r, req);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(*raw, r.values);
  r.values.clear();
  EXPECT_EQ(p->Process(r, req).status().code(), absl::StatusCode::kInternal);
}

TEST(ScoreLogitsTest, SoftmaxSigmoidAndRaw) {
  auto s = ScoreLogits({0, std::log(3.0f)}, ScoreFunction::kSoftmax);
  EXPECT_NEAR(s[0], 0.25, 1e-6);
  EXPECT_NEAR(s[1], 0.75, 1e-6);
  EXPECT_NEAR(ScoreLogits({0}, ScoreFunction::kSigmoid)[0], 0.5, 1e-7);
  EXPECT_EQ(ScoreLogits({-2.5f}, ScoreFunction::kRaw)[0], -2.5f);
}

}  // namespace
}  // namespace inferd
