// Model runner tests: the C++ forward pass of every generated tiny model
// against tests/reference/reference.py (NumPy, float64), batched.
#include "runtime/model/model_runner.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/common/registry.h"
#include "runtime/loader/model_dir.h"
#include "runtime/model/model_registry.h"
#include "tests/runtime/model/model_test_util.h"

namespace inferd {
namespace {

using testing_util::BlockLayout;
using testing_util::Compare;
using testing_util::ErrorStats;
using testing_util::Flatten;
using testing_util::MakeRunner;
using testing_util::RandomIds;
using testing_util::RunReference;
using testing_util::TestModelDir;

// F32 tolerance: inferd computes in float32 against a float64 reference;
// 2-layer tiny models accumulate a few ulps per op, far below 1e-4.
constexpr double kF32Tol = 1e-4;

// Sequences of different lengths for batched runs.
std::vector<std::vector<int32_t>> TestPrompts(int64_t vocab) {
  const int32_t hi = static_cast<int32_t>(std::min<int64_t>(vocab, 2000));
  return {RandomIds(9, 5, hi, 1), RandomIds(3, 5, hi, 2),
          RandomIds(17, 5, hi, 3), RandomIds(1, 5, hi, 4)};
}

std::unique_ptr<ModelRunnerBase> Runner(const std::string& name,
                                        DType dtype = DType::kF32,
                                        bool bidirectional = false) {
  auto runner = MakeRunner(TestModelDir(name), dtype, bidirectional);
  EXPECT_TRUE(runner.ok()) << name << ": " << runner.status();
  return runner.ok() ? std::move(*runner) : nullptr;
}

// Expects `actual` (rows x cols) to match `expected` within
// tol * max|expected|.
void ExpectClose(const std::vector<float>& actual,
                 const std::vector<float>& expected, int64_t cols, double tol,
                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  const ErrorStats s = Compare(actual, expected, cols);
  EXPECT_LE(s.max_abs_err, tol * s.max_abs_ref)
      << what << ": max abs err " << s.max_abs_err << ", max |ref| "
      << s.max_abs_ref;
}

// The same against a reference output (nested JSON arrays).
void ExpectClose(const std::vector<float>& actual, const nlohmann::json& ref,
                 int64_t cols, double tol, const std::string& what) {
  ExpectClose(actual, Flatten(ref), cols, tol, what);
}

// A model's name in test names ('-' is not allowed there).
std::string TestNameOf(std::string model) {
  std::replace(model.begin(), model.end(), '-', '_');
  return model;
}

// Names the tests of a suite parameterized by model.
std::string ModelTestName(const ::testing::TestParamInfo<std::string>& info) {
  return TestNameOf(info.param);
}

// ---------------------------------------------------------------------------
// Encoders and decoder embedders: hidden states of a batch of sequences.

struct HiddenCase {
  std::string model;
  bool bidirectional;
};

class HiddenStatesTest : public ::testing::TestWithParam<HiddenCase> {};

TEST_P(HiddenStatesTest, BatchedHiddenStatesMatchReference) {
  const HiddenCase& c = GetParam();
  auto runner = Runner(c.model, DType::kF32, c.bidirectional);
  ASSERT_NE(runner, nullptr);
  EXPECT_EQ(runner->attention_backend(),
            c.bidirectional || runner->info().is_encoder ? "bidirectional_prefill"
                                                         : "causal_prefill");
  const auto prompts = TestPrompts(runner->vocab_size());
  BatchPlan plan;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SequencePlan s;
    s.seq_id = static_cast<int64_t>(i);
    s.token_ids = prompts[i];
    s.output = StepOutput::kHiddenStates;
    plan.seqs.push_back(s);
  }
  auto result = runner->Execute(plan);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->seqs.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const SequenceResult& r = result->seqs[i];
    EXPECT_EQ(r.seq_id, static_cast<int64_t>(i));
    EXPECT_EQ(r.rows, static_cast<int32_t>(prompts[i].size()));
    EXPECT_EQ(r.cols, runner->hidden_size());
    auto ref = RunReference(TestModelDir(c.model), prompts[i],
                            c.bidirectional ? "--bidirectional" : "");
    ASSERT_TRUE(ref.ok()) << ref.status();
    ExpectClose(r.values, (*ref)["hidden_states"], r.cols, kF32Tol,
                absl::StrCat(c.model, " seq ", i));
  }
}

INSTANTIATE_TEST_SUITE_P(
    TinyModels, HiddenStatesTest,
    ::testing::Values(
        HiddenCase{"bert-embed", false}, HiddenCase{"bert-mean", false},
        HiddenCase{"xlmr-embed", false}, HiddenCase{"roberta-embed", false},
        HiddenCase{"bert-maxpool", false}, HiddenCase{"qwen2-embed", false},
        HiddenCase{"mistral-embed", false}, HiddenCase{"qwen2-embed", true},
        HiddenCase{"qwen3-embed", false}, HiddenCase{"qwen3-embed", true},
        HiddenCase{"mistral-embed", true}, HiddenCase{"llama-tiny", true}),
    [](const ::testing::TestParamInfo<HiddenCase>& info) {
      return TestNameOf(info.param.model) +
             (info.param.bidirectional ? "_bidirectional" : "");
    });

TEST(ModelRunnerTest, TokenTypeIdsChangeBertOutputsLikeReference) {
  auto runner = Runner("bert-embed");
  ASSERT_NE(runner, nullptr);
  const std::vector<int32_t> ids = RandomIds(10, 5, 2000, 7);
  const std::vector<int32_t> types = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
  BatchPlan plan;
  SequencePlan s;
  s.token_ids = ids;
  s.token_type_ids = types;
  s.output = StepOutput::kHiddenStates;
  plan.seqs.push_back(s);
  auto result = runner->Execute(plan);
  ASSERT_TRUE(result.ok()) << result.status();
  auto ref = RunReference(TestModelDir("bert-embed"), ids,
                          "--type-ids " + absl::StrJoin(types, ","));
  ASSERT_TRUE(ref.ok()) << ref.status();
  ExpectClose(result->seqs[0].values, (*ref)["hidden_states"],
              runner->hidden_size(), kF32Tol, "bert-embed with token types");
}

// ---------------------------------------------------------------------------
// Classification heads.

class ClassifierTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ClassifierTest, BatchedClassifierLogitsMatchReference) {
  auto runner = Runner(GetParam());
  ASSERT_NE(runner, nullptr);
  ASSERT_GT(runner->num_labels(), 0);
  const auto prompts = TestPrompts(runner->vocab_size());
  BatchPlan plan;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SequencePlan s;
    s.seq_id = static_cast<int64_t>(10 + i);
    s.token_ids = prompts[i];
    s.output =
        i == 1 ? StepOutput::kLastHiddenState : StepOutput::kClassifierLogits;
    plan.seqs.push_back(s);
  }
  auto result = runner->Execute(plan);
  ASSERT_TRUE(result.ok()) << result.status();
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto ref = RunReference(TestModelDir(GetParam()), prompts[i]);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const SequenceResult& r = result->seqs[i];
    if (i == 1) {
      ASSERT_EQ(r.rows, 1);
      ExpectClose(r.values, (*ref)["hidden_states"].back(), r.cols, kF32Tol,
                  "last hidden state");
      continue;
    }
    EXPECT_EQ(r.output, StepOutput::kClassifierLogits);
    EXPECT_EQ(r.cols, runner->num_labels());
    ExpectClose(r.values, (*ref)["logits"], r.cols, kF32Tol,
                absl::StrCat(GetParam(), " seq ", i));
  }
}

INSTANTIATE_TEST_SUITE_P(TinyModels, ClassifierTest,
                         ::testing::Values("bert-classifier", "bert-multilabel",
                                           "xlmr-reranker", "roberta-classifier"),
                         ModelTestName);

// ---------------------------------------------------------------------------
// Causal LMs over the paged KV cache.

// Greedy decoding of several prompts at once: one prefill step for all, then
// one decode step per token for all. Returns the generated ids per prompt
// and (optionally) the prefill's last-token logits.
std::vector<std::vector<int32_t>> GreedyBatch(
    ModelRunnerBase* runner, const std::vector<std::vector<int32_t>>& prompts,
    int steps, const BlockLayout& layout,
    std::vector<std::vector<float>>* prefill_logits = nullptr) {
  std::vector<std::vector<int32_t>> seqs = prompts;
  std::vector<std::vector<int32_t>> generated(prompts.size());
  for (int step = 0; step < steps; ++step) {
    BatchPlan plan;
    for (size_t i = 0; i < seqs.size(); ++i) {
      SequencePlan s;
      s.seq_id = static_cast<int64_t>(i);
      if (step == 0) {
        s.token_ids = seqs[i];
        s.start_pos = 0;
      } else {
        s.token_ids = {seqs[i].back()};
        s.start_pos = static_cast<int32_t>(seqs[i].size() - 1);
      }
      s.block_table = layout.Table(static_cast<int>(i),
                                   static_cast<int64_t>(seqs[i].size()));
      s.output = StepOutput::kLastLogits;
      plan.seqs.push_back(s);
    }
    auto result = runner->Execute(plan);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return generated;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const std::vector<float>& logits = result->seqs[i].values;
      if (step == 0 && prefill_logits != nullptr) {
        prefill_logits->push_back(logits);
      }
      const int32_t next = static_cast<int32_t>(
          std::max_element(logits.begin(), logits.end()) - logits.begin());
      generated[i].push_back(next);
      seqs[i].push_back(next);
    }
  }
  return generated;
}

class CausalLmTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CausalLmTest, PrefillLogitsAndGreedyTokensMatchReference) {
  auto runner = Runner(GetParam());
  ASSERT_NE(runner, nullptr);
  EXPECT_EQ(runner->attention_backend(), "causal_paged");
  const BlockLayout layout;
  ASSERT_TRUE(
      runner->AllocateKvCache(8 * layout.per_seq, layout.block_size).ok());
  // The 17- and 24-token prompts exceed mistral-tiny's 16-token window.
  auto prompts = TestPrompts(runner->vocab_size());
  prompts.push_back(RandomIds(24, 5, 2000, 9));
  constexpr int kSteps = 10;
  std::vector<std::vector<float>> prefill_logits;
  const auto generated =
      GreedyBatch(runner.get(), prompts, kSteps, layout, &prefill_logits);
  ASSERT_EQ(prefill_logits.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto ref = RunReference(TestModelDir(GetParam()), prompts[i],
                            absl::StrCat("--logits last --greedy ", kSteps));
    ASSERT_TRUE(ref.ok()) << ref.status();
    ExpectClose(prefill_logits[i], (*ref)["logits"], runner->vocab_size(),
                kF32Tol, absl::StrCat(GetParam(), " prefill logits ", i));
    std::vector<int32_t> expected =
        (*ref)["greedy"].get<std::vector<int32_t>>();
    std::vector<int32_t> actual = generated[i];
    actual.resize(std::min(actual.size(), expected.size()));
    EXPECT_EQ(actual, expected) << GetParam() << " prompt " << i;
  }
}

TEST_P(CausalLmTest, PrefillHiddenStatesMatchReference) {
  auto runner = Runner(GetParam());
  ASSERT_NE(runner, nullptr);
  const BlockLayout layout;
  ASSERT_TRUE(
      runner->AllocateKvCache(8 * layout.per_seq, layout.block_size).ok());
  const auto prompts = TestPrompts(runner->vocab_size());
  BatchPlan plan;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SequencePlan s;
    s.seq_id = static_cast<int64_t>(i);
    s.token_ids = prompts[i];
    s.block_table = layout.Table(static_cast<int>(i),
                                 static_cast<int64_t>(prompts[i].size()));
    s.output = StepOutput::kHiddenStates;
    plan.seqs.push_back(s);
  }
  auto result = runner->Execute(plan);
  ASSERT_TRUE(result.ok()) << result.status();
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto ref =
        RunReference(TestModelDir(GetParam()), prompts[i], "--logits none");
    ASSERT_TRUE(ref.ok()) << ref.status();
    ExpectClose(result->seqs[i].values, (*ref)["hidden_states"],
                runner->hidden_size(), kF32Tol, absl::StrCat("seq ", i));
  }
}

// Feeding a prompt in chunks of 7 tokens across steps (the scheduler's
// chunked prefill) must give the logits of a one-shot prefill.
TEST_P(CausalLmTest, ChunkedPrefillMatchesOneShotPrefill) {
  auto runner = Runner(GetParam());
  ASSERT_NE(runner, nullptr);
  const BlockLayout layout;
  ASSERT_TRUE(
      runner->AllocateKvCache(4 * layout.per_seq, layout.block_size).ok());
  const std::vector<int32_t> prompt = RandomIds(30, 5, 2000, 11);

  BatchPlan one;
  SequencePlan s;
  s.token_ids = prompt;
  s.block_table = layout.Table(0, 30);
  s.output = StepOutput::kLastLogits;
  one.seqs.push_back(s);
  auto whole = runner->Execute(one);
  ASSERT_TRUE(whole.ok()) << whole.status();

  std::vector<float> chunked;
  for (int start = 0; start < 30; start += 7) {
    const int end = std::min(30, start + 7);
    BatchPlan plan;
    SequencePlan c;
    c.token_ids.assign(prompt.begin() + start, prompt.begin() + end);
    c.start_pos = start;
    c.block_table = layout.Table(1, end);
    c.output = end == 30 ? StepOutput::kLastLogits : StepOutput::kNone;
    plan.seqs.push_back(c);
    auto r = runner->Execute(plan);
    ASSERT_TRUE(r.ok()) << r.status();
    if (end < 30) {
      EXPECT_TRUE(r->seqs[0].values.empty());
    } else {
      chunked = r->seqs[0].values;
    }
  }
  ExpectClose(chunked, whole->seqs[0].values, runner->vocab_size(), 1e-5,
              absl::StrCat(GetParam(), " chunked prefill"));
}

// Speculative verification: kAllLogits over 5 new tokens after a cached
// prefix gives, row by row, the reference logits at those positions (next
// to a plain decode of another sequence in the batch).
TEST_P(CausalLmTest, AllLogitsRowsMatchTheReferenceAtEachPosition) {
  auto runner = Runner(GetParam());
  ASSERT_NE(runner, nullptr);
  const BlockLayout layout;
  ASSERT_TRUE(
      runner->AllocateKvCache(4 * layout.per_seq, layout.block_size).ok());
  const std::vector<int32_t> seq = RandomIds(25, 5, 2000, 13);
  const int64_t v = runner->vocab_size();
  // Prefix of 20 tokens into the cache, then tokens 20..24 in one step.
  BatchPlan prefill;
  SequencePlan p;
  p.token_ids.assign(seq.begin(), seq.begin() + 20);
  p.block_table = layout.Table(0, 25);
  p.output = StepOutput::kNone;
  prefill.seqs.push_back(p);
  ASSERT_TRUE(runner->Execute(prefill).ok());
  BatchPlan verify;
  SequencePlan other;  // a decode of another sequence in the same batch
  other.seq_id = 9;
  other.token_ids = {seq[3]};
  other.block_table = layout.Table(1, 1);
  other.output = StepOutput::kLastLogits;
  verify.seqs.push_back(other);
  SequencePlan all = p;
  all.token_ids.assign(seq.begin() + 20, seq.end());
  all.start_pos = 20;
  all.output = StepOutput::kAllLogits;
  verify.seqs.push_back(all);
  auto result = runner->Execute(verify);
  ASSERT_TRUE(result.ok()) << result.status();
  const SequenceResult& r = result->seqs[1];
  EXPECT_EQ(r.output, StepOutput::kAllLogits);
  ASSERT_EQ(r.rows, 5);
  ASSERT_EQ(r.cols, v);
  ASSERT_EQ(result->seqs[0].rows, 1);
  // The reference's logits at every position of the whole sequence: rows
  // 20..24 are what the 5 new tokens predict.
  auto ref = RunReference(TestModelDir(GetParam()), seq, "--logits all");
  ASSERT_TRUE(ref.ok()) << ref.status();
  const std::vector<float> every = Flatten((*ref)["logits"]);
  ASSERT_EQ(every.size(), static_cast<size_t>(25 * v));
  ExpectClose(r.values, std::vector<float>(every.begin() + 20 * v, every.end()),
              v, kF32Tol, absl::StrCat(GetParam(), " rows 20..24"));
}

// A sequence's outputs do not depend on what else is in its batch (prefill
// chunks and decodes mixed).
TEST_P(CausalLmTest, OutputsDoNotDependOnBatchComposition) {
  auto runner = Runner(GetParam());
  ASSERT_NE(runner, nullptr);
  const BlockLayout layout;
  ASSERT_TRUE(
      runner->AllocateKvCache(8 * layout.per_seq, layout.block_size).ok());
  const std::vector<int32_t> prompt = RandomIds(13, 5, 2000, 21);
  const std::vector<int32_t> other = RandomIds(20, 5, 2000, 22);

  auto step = [&](int slot, const std::vector<int32_t>& ids, int start,
                  bool with_others) -> std::vector<float> {
    BatchPlan plan;
    if (with_others) {
      // Another sequence's prefill and a third one's first tokens.
      SequencePlan o;
      o.seq_id = 100;
      o.token_ids = other;
      o.block_table = layout.Table(slot + 1, 20);
      o.output = StepOutput::kLastLogits;
      plan.seqs.push_back(o);
    }
    SequencePlan s;
    s.seq_id = 1;
    s.token_ids = ids;
    s.start_pos = start;
    s.block_table =
        layout.Table(slot, start + static_cast<int64_t>(ids.size()));
    s.output = StepOutput::kLastLogits;
    plan.seqs.push_back(s);
    if (with_others) {
      SequencePlan o;
      o.seq_id = 101;
      o.token_ids = {other[0], other[1]};
      o.block_table = layout.Table(slot + 2, 2);
      o.output = StepOutput::kHiddenStates;
      plan.seqs.push_back(o);
    }
    auto r = runner->Execute(plan);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->seqs[with_others ? 1 : 0].values : std::vector<float>();
  };
  // Alone: slot 0; in a batch: slot 3 (others in slots 4, 5).
  const std::vector<float> alone_prefill = step(0, prompt, 0, false);
  const std::vector<float> mixed_prefill = step(3, prompt, 0, true);
  const std::vector<float> alone_decode = step(0, {prompt[0]}, 13, false);
  const std::vector<float> mixed_decode = step(3, {prompt[0]}, 13, true);
  ExpectClose(mixed_prefill, alone_prefill, runner->vocab_size(), 1e-5,
              absl::StrCat(GetParam(), " prefill in a batch"));
  ExpectClose(mixed_decode, alone_decode, runner->vocab_size(), 1e-5,
              absl::StrCat(GetParam(), " decode in a batch"));
}

INSTANTIATE_TEST_SUITE_P(TinyModels, CausalLmTest,
                         ::testing::Values("llama-tiny", "llama31-tiny",
                                           "mistral-tiny", "qwen2-tiny",
                                           "qwen3-tiny", "smollm3-tiny",
                                           "phi3-tiny", "gemma2-tiny",
                                           "gemma3-tiny"),
                         ModelTestName);

TEST(ModelRunnerTest, EncoderOutputsDoNotDependOnBatchComposition) {
  auto runner = Runner("xlmr-embed");
  ASSERT_NE(runner, nullptr);
  const auto prompts = TestPrompts(runner->vocab_size());
  BatchPlan alone;
  SequencePlan s;
  s.token_ids = prompts[0];
  s.output = StepOutput::kHiddenStates;
  alone.seqs.push_back(s);
  BatchPlan mixed;
  for (const auto& p : prompts) {
    SequencePlan o;
    o.token_ids = p;
    o.output = StepOutput::kHiddenStates;
    mixed.seqs.push_back(o);
  }
  std::swap(mixed.seqs[0], mixed.seqs[2]);  // prompts[0] in the middle
  auto a = runner->Execute(alone);
  ASSERT_TRUE(a.ok()) << a.status();
  const std::vector<float> alone_values = a->seqs[0].values;
  auto b = runner->Execute(mixed);
  ASSERT_TRUE(b.ok()) << b.status();
  ExpectClose(b->seqs[2].values, alone_values, runner->hidden_size(), 1e-5,
              "xlmr-embed in a batch");
}

// Pooled step outputs come back as one row per sequence (not T x H), with
// the bits the same pooling of kHiddenStates on the host gives: the first
// row, and the double-accumulated mean of rows [pool_start, n).
TEST(ModelRunnerTest, PooledOutputsAreOneRowWithTheHostPoolingBits) {
  auto runner = Runner("bert-embed");
  ASSERT_NE(runner, nullptr);
  const auto prompts = TestPrompts(runner->vocab_size());
  const int64_t h = runner->hidden_size();
  BatchPlan full;
  BatchPlan pooled;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SequencePlan s;
    s.token_ids = prompts[i];
    s.output = StepOutput::kHiddenStates;
    full.seqs.push_back(s);
    s.output = i % 2 == 0 ? StepOutput::kMeanHiddenState
                          : StepOutput::kFirstHiddenState;
    s.pool_start = static_cast<int32_t>(i % 3);  // prompt rows left out
    pooled.seqs.push_back(s);
  }
  auto a = runner->Execute(full);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = runner->Execute(pooled);
  ASSERT_TRUE(b.ok()) << b.status();
  int64_t full_bytes = 0;
  int64_t pooled_bytes = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const SequenceResult& all = a->seqs[i];
    const SequenceResult& one = b->seqs[i];
    full_bytes += static_cast<int64_t>(all.values.size() * sizeof(float));
    pooled_bytes += static_cast<int64_t>(one.values.size() * sizeof(float));
    ASSERT_EQ(one.rows, 1);
    ASSERT_EQ(one.cols, h);
    ASSERT_EQ(one.values.size(), static_cast<size_t>(h));
    std::vector<float> want(static_cast<size_t>(h));
    if (pooled.seqs[i].output == StepOutput::kFirstHiddenState) {
      std::copy(all.values.begin(), all.values.begin() + h, want.begin());
    } else {
      const int32_t start = std::min(pooled.seqs[i].pool_start, all.rows - 1);
      std::vector<double> acc(static_cast<size_t>(h), 0.0);
      for (int32_t r = start; r < all.rows; ++r) {
        for (int64_t j = 0; j < h; ++j) acc[j] += all.values[r * h + j];
      }
      const double inv = 1.0 / (all.rows - start);
      for (int64_t j = 0; j < h; ++j) want[j] = static_cast<float>(acc[j] * inv);
    }
    EXPECT_EQ(one.values, want) << "sequence " << i;
  }
  EXPECT_LT(pooled_bytes * 4, full_bytes);
}

// ---------------------------------------------------------------------------
// BF16 compute. BF16 keeps 8 significant bits (relative rounding error
// 2^-9 ~ 2e-3 per weight); through two layers of GEMMs, norms and attention
// the errors add up to ~1e-2 relative on hidden states, so the bounds are a
// cosine similarity >= 0.999 per token and max abs err <= 3e-2 * max|ref|.

class Bf16Test : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16Test, Bf16HiddenStatesStayCloseToReference) {
  auto runner = Runner(GetParam(), DType::kBF16);
  ASSERT_NE(runner, nullptr);
  EXPECT_EQ(runner->compute_dtype(), DType::kBF16);
  EXPECT_GT(runner->weight_bytes_allocated(), 0);  // GEMM weights converted
  const BlockLayout layout;
  if (runner->uses_kv_cache()) {
    ASSERT_TRUE(
        runner->AllocateKvCache(8 * layout.per_seq, layout.block_size).ok());
  }
  const auto prompts = TestPrompts(runner->vocab_size());
  BatchPlan plan;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SequencePlan s;
    s.token_ids = prompts[i];
    if (runner->uses_kv_cache()) {
      s.block_table = layout.Table(static_cast<int>(i),
                                   static_cast<int64_t>(prompts[i].size()));
    }
    s.output = StepOutput::kHiddenStates;
    plan.seqs.push_back(s);
  }
  auto result = runner->Execute(plan);
  ASSERT_TRUE(result.ok()) << result.status();
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto ref = RunReference(TestModelDir(GetParam()), prompts[i],
                            runner->uses_kv_cache() ? "--logits none" : "");
    ASSERT_TRUE(ref.ok()) << ref.status();
    const ErrorStats e =
        Compare(result->seqs[i].values, Flatten((*ref)["hidden_states"]),
                runner->hidden_size());
    EXPECT_GE(e.min_row_cosine, 0.999) << "seq " << i;
    EXPECT_LE(e.max_abs_err, 3e-2 * e.max_abs_ref) << "seq " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(TinyModels, Bf16Test,
                         ::testing::Values("bert-embed", "xlmr-reranker",
                                           "llama-tiny", "qwen2-tiny",
                                           "qwen3-tiny"),
                         ModelTestName);

// ---------------------------------------------------------------------------
// Loading, metadata and errors.

TEST(ModelRunnerTest, F32WeightsAreUsedInPlaceFromTheMapping) {
  auto runner = Runner("llama-tiny");
  ASSERT_NE(runner, nullptr);
  EXPECT_EQ(runner->weight_bytes_allocated(), 0);
  EXPECT_GT(runner->weight_bytes_mapped(), 0);
}

// BF16 checkpoints: with BF16 compute the GEMM weights and the embedding
// table are used in place (only the small norm vectors become F32); with F32
// compute they are widened once, exactly, so the F32 tolerance still holds.
TEST(ModelRunnerTest, Bf16CheckpointsLoadInPlaceOrWidened) {
  const std::string dir = absl::StrCat(INFERD_BINARY_DIR, "/model_test_bf16");
  const std::string cmd =
      absl::StrCat("/usr/bin/python3 ", INFERD_SOURCE_DIR,
                   "/tools/make_test_models.py --out ", dir,
                   " --only llama-tiny --dtype bf16 > /dev/null");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string model = dir + "/llama-tiny";

  auto bf16 = MakeRunner(model, DType::kBF16);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_GT((*bf16)->weight_bytes_mapped(), 0);
  EXPECT_LT((*bf16)->weight_bytes_allocated(),
            (*bf16)->weight_bytes_mapped() / 20);

  auto f32 = MakeRunner(model, DType::kF32);
  ASSERT_TRUE(f32.ok()) << f32.status();
  const BlockLayout layout;
  ASSERT_TRUE((*f32)->AllocateKvCache(layout.per_seq, layout.block_size).ok());
  const std::vector<int32_t> ids = RandomIds(12, 5, 2000, 31);
  BatchPlan plan;
  SequencePlan s;
  s.token_ids = ids;
  s.block_table = layout.Table(0, 12);
  s.output = StepOutput::kHiddenStates;
  plan.seqs.push_back(s);
  auto result = (*f32)->Execute(plan);
  ASSERT_TRUE(result.ok()) << result.status();
  auto ref = RunReference(model, ids, "--logits none");
  ASSERT_TRUE(ref.ok()) << ref.status();
  ExpectClose(result->seqs[0].values, (*ref)["hidden_states"],
              (*f32)->hidden_size(), kF32Tol, "bf16 checkpoint, f32 compute");
}

// ---------------------------------------------------------------------------
// A family's GGUF file (written by tests/gguf/make_gguf_models.py from the
// tiny model's weights, F32, as llama.cpp's converter lays it out) gives
// the logits of its Hugging Face directory, and both the float64
// reference's.

struct GgufCase {
  std::string hf_model;  // generated tiny model directory
  std::string gguf;      // make_gguf_models.py entry
};

// Test names and logs show the case by name.
void PrintTo(const GgufCase& c, std::ostream* os) { *os << c.gguf; }

class GgufMatchesHfTest : public ::testing::TestWithParam<GgufCase> {};

// Logits at every position of `ids`, prefilled in one step.
std::vector<float> AllLogits(ModelRunnerBase& runner,
                             const std::vector<int32_t>& ids) {
  const BlockLayout layout;
  EXPECT_TRUE(runner.AllocateKvCache(layout.per_seq, layout.block_size).ok());
  BatchPlan plan;
  SequencePlan s;
  s.token_ids = ids;
  s.block_table = layout.Table(0, static_cast<int64_t>(ids.size()));
  s.output = StepOutput::kAllLogits;
  plan.seqs.push_back(s);
  auto result = runner.Execute(plan);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? result->seqs[0].values : std::vector<float>();
}

TEST_P(GgufMatchesHfTest, GgufLogitsEqualHfLogitsAndReference) {
  const GgufCase& c = GetParam();
  const std::string dir = absl::StrCat(INFERD_BINARY_DIR, "/model_test_gguf");
  const std::string cmd = absl::StrCat(
      INFERD_BINARY_DIR, "/venv/bin/python ", INFERD_SOURCE_DIR,
      "/tests/gguf/make_gguf_models.py --test-models ", INFERD_TEST_MODELS_DIR,
      " --out ", dir, " --only ", c.gguf, " > /dev/null");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto hf = Runner(c.hf_model);
  ASSERT_NE(hf, nullptr);
  auto gguf = MakeRunner(absl::StrCat(dir, "/", c.gguf, ".gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const int64_t v = hf->vocab_size();
  ASSERT_EQ((*gguf)->vocab_size(), v);
  // 40 positions: past the short wavelengths the tiny models' rope scaling
  // changes (llama31-tiny's original context is 64) and past phi3-tiny's
  // original context (32: LongRoPE's long factors).
  const std::vector<int32_t> ids = RandomIds(40, 5, 2000, 41);
  const std::vector<float> from_hf = AllLogits(*hf, ids);
  const std::vector<float> from_gguf = AllLogits(**gguf, ids);
  ASSERT_EQ(from_hf.size(), static_cast<size_t>(40 * v));
  auto ref = RunReference(TestModelDir(c.hf_model), ids, "--logits all");
  ASSERT_TRUE(ref.ok()) << ref.status();
  // Same weights, same arithmetic up to the RoPE layout and the F32
  // rounding of the GGUF's factors: 1e-5 of the largest logit.
  ExpectClose(from_gguf, from_hf, v, 1e-5, c.gguf + " vs " + c.hf_model);
  ExpectClose(from_hf, (*ref)["logits"], v, kF32Tol, c.hf_model);
  ExpectClose(from_gguf, (*ref)["logits"], v, kF32Tol, c.gguf);
}

// Under the int8 policy two runners over one store (a model's replicas,
// each with a private CPU device) share the int8 panels of the GGUF's
// quantized weights, made once; the first runner destroyed (its device
// with it), the second computes what a runner over a store of its own
// does, bit for bit. The stored weights' pages are released once packed
// (made inaccessible): a kernel reading them would crash this test.
TEST(GgufInt8PanelsTest, ReplicasShareThePanelsAndOutliveEachOther) {
  const std::string dir = absl::StrCat(INFERD_BINARY_DIR, "/model_test_gguf");
  const std::string cmd = absl::StrCat(
      INFERD_BINARY_DIR, "/venv/bin/python ", INFERD_SOURCE_DIR,
      "/tests/gguf/make_gguf_models.py --test-models ", INFERD_TEST_MODELS_DIR,
      " --out ", dir, " --only qwen2-tiny-q4_0 > /dev/null");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string path = dir + "/qwen2-tiny-q4_0.gguf";
  auto runner_on = [&](std::shared_ptr<const WeightStore> store) {
    ModelRunnerOptions o;
    o.model_dir = path;
    o.weights = std::move(store);
    o.threads = 1;
    o.activations = ActivationPrecision::kInt8;
    return CreateModelRunner(o);
  };
  absl::StatusOr<std::unique_ptr<WeightStore>> opened = OpenModelWeights(path);
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::shared_ptr<const WeightStore> shared = std::move(*opened);
  auto first = runner_on(shared);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = runner_on(shared);
  ASSERT_TRUE(second.ok()) << second.status();
  absl::StatusOr<std::unique_ptr<WeightStore>> own = OpenModelWeights(path);
  ASSERT_TRUE(own.ok()) << own.status();
  auto alone = runner_on(std::move(*own));
  ASSERT_TRUE(alone.ok()) << alone.status();
  const std::vector<int32_t> ids = RandomIds(20, 5, 2000, 43);
  const std::vector<float> a = AllLogits(**first, ids);
  first->reset();
  const std::vector<float> b = AllLogits(**second, ids);
  const std::vector<float> c = AllLogits(**alone, ids);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  EXPECT_EQ(b, c);
  second->reset();
  shared.reset();  // the panels go with the store
}

INSTANTIATE_TEST_SUITE_P(
    TinyModels, GgufMatchesHfTest,
    ::testing::Values(GgufCase{"llama31-tiny", "llama31-tiny-f32"},
                      GgufCase{"smollm3-tiny", "smollm3-tiny-f32"},
                      GgufCase{"phi3-tiny", "phi3-tiny-f32"},
                      GgufCase{"gemma2-tiny", "gemma2-tiny-f32"},
                      GgufCase{"gemma3-tiny", "gemma3-tiny-f32"}),
    [](const ::testing::TestParamInfo<GgufCase>& info) {
      return TestNameOf(info.param.gguf);
    });

TEST(ModelRunnerTest, ReportsModelMetadataAndKvBlockSize) {
  auto runner = Runner("mistral-tiny");
  ASSERT_NE(runner, nullptr);
  EXPECT_EQ(runner->hidden_size(), 64);
  // The generated model's embedding table (tools/make_test_models.py pads
  // it to at least 12000 rows).
  std::ifstream cfg(TestModelDir("mistral-tiny") + "/config.json");
  ASSERT_TRUE(cfg.good());
  const int64_t vocab = nlohmann::json::parse(cfg)["vocab_size"].get<int64_t>();
  EXPECT_GE(vocab, 12000);
  EXPECT_EQ(runner->vocab_size(), vocab);
  EXPECT_EQ(runner->max_positions(), 4096);
  EXPECT_EQ(runner->num_labels(), 0);
  // 2 layers x (K + V) x 16 tokens x 2 kv heads x 16 dims x 4 bytes.
  EXPECT_EQ(runner->KvCacheBytesPerBlock(16), 2 * 2 * 16 * 2 * 16 * 4);
  ASSERT_TRUE(runner->AllocateKvCache(10, 16).ok());
  EXPECT_EQ(runner->kv_cache_bytes(), 10 * runner->KvCacheBytesPerBlock(16));
  auto plan = runner->PlanKvCache(0.0, 1 << 20, 16, 256);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->blocks, (1 << 20) / runner->KvCacheBytesPerBlock(16));
  EXPECT_EQ(plan->budget_bytes, 1 << 20);
  // This runner's own cache is not "another runner's".
  EXPECT_EQ(plan->other_kv_bytes, ProcessKvCacheBytes() - runner->kv_cache_bytes());
  // An absolute size beyond what the process may use is refused.
  auto too_big = runner->PlanKvCache(0.0, int64_t{1} << 50, 16, 256);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(too_big.status().message()),
              testing::HasSubstr("--kv-cache-memory"));

  auto classifier = Runner("bert-classifier");
  ASSERT_NE(classifier, nullptr);
  EXPECT_EQ(classifier->num_labels(), 3);
  EXPECT_EQ(classifier->KvCacheBytesPerBlock(16), 0);
}

TEST(ModelRunnerTest, PagedAttentionWithoutKvCacheFailsPrecondition) {
  auto runner = Runner("llama-tiny");
  ASSERT_NE(runner, nullptr);
  BatchPlan plan;
  SequencePlan s;
  s.token_ids = {5, 6, 7};
  s.block_table = {0};
  s.output = StepOutput::kLastLogits;
  plan.seqs.push_back(s);
  EXPECT_EQ(runner->Execute(plan).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ModelRunnerTest, RejectsPlansTheModelCannotRun) {
  auto encoder = Runner("bert-embed");
  ASSERT_NE(encoder, nullptr);
  auto run = [&](ModelRunnerBase* r, SequencePlan s) {
    BatchPlan plan;
    plan.seqs.push_back(std::move(s));
    return r->Execute(plan).status().code();
  };
  SequencePlan logits;  // an encoder has no LM head
  logits.token_ids = {5, 6};
  logits.output = StepOutput::kLastLogits;
  EXPECT_EQ(run(encoder.get(), logits), absl::StatusCode::kInvalidArgument);
  SequencePlan bad_id;
  bad_id.token_ids = {5, static_cast<int32_t>(encoder->vocab_size())};
  bad_id.output = StepOutput::kHiddenStates;
  EXPECT_EQ(run(encoder.get(), bad_id), absl::StatusCode::kInvalidArgument);
  SequencePlan too_long;
  too_long.token_ids.assign(encoder->max_positions() + 1, 5);
  too_long.output = StepOutput::kHiddenStates;
  EXPECT_EQ(run(encoder.get(), too_long), absl::StatusCode::kInvalidArgument);
  SequencePlan empty;
  EXPECT_EQ(run(encoder.get(), empty), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(encoder->Execute(BatchPlan()).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto lm = Runner("qwen2-tiny");
  ASSERT_NE(lm, nullptr);
  ASSERT_TRUE(lm->AllocateKvCache(4, 4).ok());
  SequencePlan short_table;  // 9 tokens need 3 blocks of 4
  short_table.token_ids.assign(9, 5);
  short_table.block_table = {0, 1};
  short_table.output = StepOutput::kLastLogits;
  EXPECT_EQ(run(lm.get(), short_table), absl::StatusCode::kInvalidArgument);
  SequencePlan bad_block;
  bad_block.token_ids = {5};
  bad_block.block_table = {4};
  EXPECT_EQ(run(lm.get(), bad_block), absl::StatusCode::kInvalidArgument);
  SequencePlan classify;
  classify.token_ids = {5};
  classify.block_table = {0};
  classify.output = StepOutput::kClassifierLogits;
  EXPECT_EQ(run(lm.get(), classify), absl::StatusCode::kInvalidArgument);
}

TEST(ModelRunnerTest, CausalPagedBackendRejectsBidirectionalModels) {
  auto runner =
      MakeRunner(TestModelDir("llama-tiny"), DType::kF32,
                 /*bidirectional=*/true, "causal_paged");
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kInvalidArgument);
  // Encoders are bidirectional: a causal backend is refused.
  auto encoder = MakeRunner(TestModelDir("bert-embed"), DType::kF32,
                            /*bidirectional=*/absl::nullopt, "causal_prefill");
  EXPECT_EQ(encoder.status().code(), absl::StatusCode::kInvalidArgument);
}

// The backend decides the mask: a decoder embedder run under
// bidirectional_prefill (as the decoder_embed_bidirectional workflow does)
// matches the reference's bidirectional pass, and under causal_prefill the
// causal one.
TEST(ModelRunnerTest, NamedPrefillBackendsSetTheDecoderMask) {
  const std::vector<int32_t> ids = RandomIds(11, 5, 2000, 9);
  for (const char* backend : {"bidirectional_prefill", "causal_prefill"}) {
    auto runner = MakeRunner(TestModelDir("qwen2-embed"), DType::kF32,
                             absl::nullopt, backend);
    ASSERT_TRUE(runner.ok()) << runner.status();
    EXPECT_EQ((*runner)->attention_backend(), backend);
    BatchPlan plan;
    SequencePlan sp;
    sp.token_ids = ids;
    sp.output = StepOutput::kHiddenStates;
    plan.seqs.push_back(sp);
    auto result = (*runner)->Execute(plan);
    ASSERT_TRUE(result.ok()) << result.status();
    const bool bidi = std::string(backend) == "bidirectional_prefill";
    auto ref = RunReference(TestModelDir("qwen2-embed"), ids,
                            bidi ? "--bidirectional" : "");
    ASSERT_TRUE(ref.ok()) << ref.status();
    ExpectClose(result->seqs[0].values, (*ref)["hidden_states"],
                (*runner)->hidden_size(), kF32Tol, backend);
  }
}

TEST(ModelRunnerTest, UnknownArchitectureIsNotFound) {
  EXPECT_EQ(FindModelFactory("GPT2LMHeadModel").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(FindModelFactory("Qwen2ForCausalLM").ok());
  ModelRunnerOptions options;
  options.model_dir = TestModelDir("bert-embed");
  options.device = "tpu";
  EXPECT_EQ(CreateModelRunner(options).status().code(),
            absl::StatusCode::kNotFound);
}

// The runner of a device kind comes from the registry: "cpu" is there as a
// built-in, and a kind registered later is found by CreateModelRunner too
// (with or without a ":N" suffix).
TEST(ModelRunnerTest, RunnersComeFromTheRegistryByDeviceKind) {
  ASSERT_TRUE(ModelRunners().Contains("cpu"));
  EXPECT_EQ(ModelRunners().List().front().origin, "builtin");
  ModelRunnerFactory fake = [](const ModelRunnerOptions& options)
      -> absl::StatusOr<std::unique_ptr<ModelRunnerBase>> {
    return absl::UnimplementedError("fake runner for " + options.device);
  };
  ASSERT_TRUE(
      ModelRunners().Add("fakedev", "test only", fake, "model_runner_test")
          .ok());
  ModelRunnerOptions options;
  options.model_dir = TestModelDir("bert-embed");
  for (const char* device : {"fakedev", "fakedev:1"}) {
    options.device = device;
    absl::StatusOr<std::unique_ptr<ModelRunnerBase>> runner =
        CreateModelRunner(options);
    EXPECT_EQ(runner.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_EQ(runner.status().message(),
              absl::StrCat("fake runner for ", device));
  }
  options.device = "cpu:0";
  EXPECT_TRUE(CreateModelRunner(options).ok());
}

TEST(ModelRunnerTest, ParsesComputeDTypes) {
  EXPECT_EQ(*ParseComputeDType("bfloat16"), DType::kBF16);
  EXPECT_EQ(*ParseComputeDType("float32"), DType::kF32);
  EXPECT_FALSE(ParseComputeDType("float16").ok());
  auto paged = FindAttentionBackend("causal_paged");
  ASSERT_TRUE(paged.ok());
  EXPECT_TRUE(paged->uses_kv_cache);
  EXPECT_EQ(paged->mask, AttentionMask::kCausal);
  EXPECT_EQ(FindAttentionBackend("flash").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace inferd
