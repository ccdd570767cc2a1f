#include "runtime/engine/output_processor.h"

#include <algorithm>
#include <cmath>

#include "gtest/gtest.h"
#include "runtime/common/registry.h"
#include "runtime/engine/components.h"
#include "runtime/engine/output_stages.h"

namespace inferd {
namespace {

SequenceResult Hidden(std::vector<std::vector<float>> rows) {
  SequenceResult r;
  r.output = StepOutput::kHiddenStates;
  r.rows = static_cast<int32_t>(rows.size());
  r.cols = static_cast<int32_t>(rows[0].size());
  for (const auto& row : rows)
    r.values.insert(r.values.end(), row.begin(), row.end());
  return r;
}

// The request's rows after stages `names` (built from the registry).
absl::StatusOr<std::vector<float>> RunStages(
    const std::vector<std::string>& names, OutputStageContext context,
    const StageRequest& request, std::vector<float> row) {
  auto stages = CreateOutputStages(names, context);
  if (!stages.ok()) return stages.status();
  std::vector<const OutputStage*> plan;
  for (const auto& s : *stages) plan.push_back(s.get());
  OutputRows rows;
  rows.rows = 1;
  rows.cols = static_cast<int64_t>(row.size());
  rows.values = std::move(row);
  if (absl::Status s =
          RunOutputStages(ExecutionContext{}, request, plan, &rows);
      !s.ok()) {
    return s;
  }
  return rows.values;
}

// Pools with the registered built-in `name`, then runs the embedding tail
// (dense, matryoshka, normalize) with `dense` and `request`.
absl::StatusOr<std::vector<float>> PoolEmbedding(
    const std::string& name, const SequenceResult& r, int32_t pool_start,
    const StageRequest& request,
    std::vector<DenseLayer> dense = std::vector<DenseLayer>()) {
  auto factory = OutputProcessors().Get(name);
  if (!factory.ok()) return factory.status();
  auto pooler = (*factory)(OutputProcessorContext{});
  if (!pooler.ok()) return pooler.status();
  OutputRequest req;
  req.pool_start = pool_start;
  auto pooled = (*pooler)->Process(r, req);
  if (!pooled.ok()) return pooled.status();
  OutputStageContext context;
  context.dense =
      std::make_shared<const std::vector<DenseLayer>>(std::move(dense));
  Workflow embed;
  embed.tasks = {Task::kEmbed};
  return RunStages(DefaultOutputStages(embed), context, request, *pooled);
}

TEST(PoolEmbeddingTest, MeanPoolingSkipsPromptTokens) {
  StageRequest o;
  o.normalize = false;
  auto e =
      PoolEmbedding("pooling_mean", Hidden({{100, 100}, {1, 2}, {3, 4}}), 1, o);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e, (std::vector<float>{2, 3}));
}

TEST(PoolEmbeddingTest, ClsAndLastPickTheirRows) {
  StageRequest o;
  o.normalize = false;
  auto cls =
      PoolEmbedding("pooling_cls", Hidden({{5, 6}, {1, 2}, {3, 4}}), 1, o);
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
  StageRequest o;
  o.normalize = true;
  o.dimensions = 2;
  auto e = PoolEmbedding("pooling_cls", Hidden({{1, 2}, {9, 9}}), 0, o,
                         std::move(dense));
  ASSERT_TRUE(e.ok()) << e.status();
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
  StageRequest o;
  EXPECT_EQ(
      PoolEmbedding("pooling_cls", Hidden({{1, 2}}), 0, o, std::move(dense))
          .status()
          .code(),
      absl::StatusCode::kInternal);
}

// Normalization in double, rounded once: the bits of the formula on the
// host (the embeddings' golden bits depend on it).
TEST(OutputStagesTest, NormalizeGivesTheBitsOfTheHostFormula) {
  const std::vector<float> x = {0.1f, -3.25f, 7.0f, 1e-3f, 2.5f};
  StageRequest o;
  auto got = RunStages({"normalize"}, {}, o, x);
  ASSERT_TRUE(got.ok()) << got.status();
  double sum = 0;
  for (float v : x) sum += double{v} * v;
  const double scale = 1.0 / std::max(std::sqrt(sum), 1e-12);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ((*got)[i], static_cast<float>(x[i] * scale)) << i;
  }
  o.normalize = false;
  EXPECT_EQ(*RunStages({"normalize"}, {}, o, x), x);
}

TEST(OutputStagesTest, UnknownStagesAreNamed) {
  auto s = CreateOutputStages({"normalize", "nope"}, {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("nope"), std::string::npos);
  EXPECT_NE(s.status().message().find("matryoshka"), std::string::npos);
}

TEST(OutputStagesTest, RecipesWithoutStagesGetTheirTasksTail) {
  Workflow w;
  w.tasks = {Task::kRerank, Task::kClassify};
  EXPECT_EQ(DefaultOutputStages(w), std::vector<std::string>({"scores"}));
  w.output_stages = {"normalize"};
  EXPECT_EQ(DefaultOutputStages(w), std::vector<std::string>({"normalize"}));
  w = Workflow();
  w.tasks = {Task::kGenerate};
  EXPECT_TRUE(DefaultOutputStages(w).empty());
}

TEST(ScoresStageTest, SoftmaxSigmoidAndRaw) {
  OutputStageContext softmax;
  softmax.scores = ScoreFunction::kSoftmax;
  StageRequest o;
  auto s = RunStages({"scores"}, softmax, o, {0, std::log(3.0f)});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NEAR((*s)[0], 0.25, 1e-6);
  EXPECT_NEAR((*s)[1], 0.75, 1e-6);
  OutputStageContext sigmoid;
  sigmoid.scores = ScoreFunction::kSigmoid;
  EXPECT_NEAR((*RunStages({"scores"}, sigmoid, o, {0}))[0], 0.5, 1e-7);
  EXPECT_EQ((*RunStages({"scores"}, sigmoid, o, {2}))[0],
            static_cast<float>(1.0 / (1.0 + std::exp(-2.0))));
  o.raw_scores = true;
  EXPECT_EQ((*RunStages({"scores"}, softmax, o, {-2.5f, 1}))[0], -2.5f);
}

TEST(LogitsProcessorTest, HeadsGiveTheLogitsAsTheyAre) {
  auto p = CreateLogitsProcessor("label_scores");
  SequenceResult r;
  r.output = StepOutput::kClassifierLogits;
  r.values = {0, std::log(3.0f)};
  OutputRequest req;
  auto logits = p->Process(r, req);
  ASSERT_TRUE(logits.ok());
  EXPECT_EQ(*logits, r.values);
  r.values.clear();
  EXPECT_EQ(p->Process(r, req).status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace inferd
