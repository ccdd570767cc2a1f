// BGE-M3 sparse / multi-vector outputs (runtime/engine/m3_output.h) on
// hand-computed inputs: ReLU, max per token id, special tokens dropped,
// vectors after CLS normalized, MaxSim scores; and the FAILED_PRECONDITION
// a request for a missing head gets.
#include "runtime/engine/m3_output.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace inferd {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;

// Hidden states of 4 tokens, H = 2.
SequenceResult Hidden(std::vector<float> values) {
  SequenceResult r;
  r.output = StepOutput::kHiddenStates;
  r.cols = 2;
  r.rows = static_cast<int32_t>(values.size() / 2);
  r.values = std::move(values);
  return r;
}

M3Heads Heads() {
  M3Heads h;
  LinearWeights sparse;
  sparse.in_features = 2;
  sparse.out_features = 1;
  sparse.weight = {1.0f, -1.0f};  // w = relu(x0 - x1 + 0.5)
  sparse.bias = {0.5f};
  h.sparse = sparse;
  LinearWeights colbert;
  colbert.in_features = 2;
  colbert.out_features = 2;
  colbert.weight = {2, 0, 0, 1};  // y = (2 x0 + 1, x1)
  colbert.bias = {1, 0};
  h.colbert = colbert;
  h.special_ids = {0, 2};
  h.id_to_token = [](int32_t id) { return "t" + std::to_string(id); };
  return h;
}

TEST(M3OutputTest, SparseKeepsTheMaxWeightPerTokenWithoutSpecials) {
  const M3Heads heads = Heads();
  // ids: <s>=0, 7, 7, 9, 5, </s>=2
  const std::vector<int32_t> ids = {0, 7, 7, 9, 5, 2};
  const SequenceResult r = Hidden({
      9, 0,     // CLS: large weight, dropped as special
      1, 0,     // 7: 1.5
      2, 0,     // 7 again: 2.5 (max wins)
      0, 3,     // 9: relu(-2.5) = 0, dropped
      0, 0.25,  // 5: 0.25
      5, 0,     // </s>: dropped
  });
  auto sv =
      SparseWeights(ExecutionContext{}, r, ids, heads, /*with_tokens=*/true);
  ASSERT_TRUE(sv.ok()) << sv.status();
  EXPECT_THAT(sv->token_ids, ElementsAre(5, 7));
  EXPECT_THAT(sv->weights,
              ElementsAre(FloatNear(0.25f, 1e-6f), FloatNear(2.5f, 1e-6f)));
  EXPECT_THAT(sv->tokens, ElementsAre("t5", "t7"));
  auto no_tokens = SparseWeights(ExecutionContext{}, r, ids, heads, false);
  ASSERT_TRUE(no_tokens.ok());
  EXPECT_TRUE(no_tokens->tokens.empty());
}

TEST(M3OutputTest, ColbertVectorsSkipClsAndAreNormalized) {
  const M3Heads heads = Heads();
  const SequenceResult r = Hidden({100, 100, 1, 4, 0, 0});
  auto v =
      ColbertVectors(ExecutionContext{}, r, *heads.colbert, /*normalize=*/true);
  ASSERT_TRUE(v.ok()) << v.status();
  // Row 1: (3, 4) / 5; row 2: (1, 0).
  EXPECT_THAT(*v, ElementsAre(FloatNear(0.6f, 1e-6f), FloatNear(0.8f, 1e-6f),
                              FloatNear(1.0f, 1e-6f), FloatNear(0.0f, 1e-6f)));
  auto raw = ColbertVectors(ExecutionContext{}, r, *heads.colbert,
                            /*normalize=*/false);
  ASSERT_TRUE(raw.ok());
  EXPECT_THAT(*raw, ElementsAre(3, 4, 1, 0));
}

TEST(M3OutputTest, ColbertScoreIsMeanOfMaxSim) {
  // q1 = (1,0), q2 = (0,1); d1 = (0.6,0.8), d2 = (1,0).
  const std::vector<float> q = {1, 0, 0, 1};
  const std::vector<float> d = {0.6f, 0.8f, 1, 0};
  EXPECT_NEAR(ColbertScore(q, d, 2), (1.0 + 0.8) / 2, 1e-6);
  EXPECT_EQ(ColbertScore({}, d, 2), 0.0f);
}

TEST(M3OutputTest, WrongStepOutputIsAnInternalError) {
  const M3Heads heads = Heads();
  SequenceResult r = Hidden({1, 2});
  r.output = StepOutput::kLastHiddenState;
  EXPECT_EQ(ColbertVectors(ExecutionContext{}, r, *heads.colbert, true)
                .status()
                .code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(
      SparseWeights(ExecutionContext{}, Hidden({1, 2}), {1, 2}, heads, false)
          .status()
          .code(),
      absl::StatusCode::kInternal);  // ids and rows disagree
}

TEST(M3OutputTest, MissingHeadsAreFailedPreconditionNamingTheFile) {
  M3Heads none;
  none.sparse_missing = M3HeadMissing("/m", "sparse_linear");
  none.colbert_missing = M3HeadMissing("/m", "colbert_linear");
  EmbedParams p;
  EXPECT_TRUE(none.Check(p).ok());  // dense only
  p.want_sparse = true;
  absl::Status s = none.Check(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("/m/sparse_linear.pt"));
  p.want_sparse = false;
  p.want_multi_vector = true;
  s = none.Check(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("/m/colbert_linear.pt (or "
                                     "colbert_linear.safetensors)"));
  EXPECT_TRUE(Heads().Check(p).ok());
}

}  // namespace
}  // namespace inferd
