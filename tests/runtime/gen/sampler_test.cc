#include "runtime/gen/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace inferd {
namespace {

std::vector<float> RandomLogits(int32_t rows, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(rows) * vocab);
  for (float& x : v) x = dist(rng);
  return v;
}

int32_t Argmax(const float* x, int32_t n) {
  return static_cast<int32_t>(std::max_element(x, x + n) - x);
}

// Log-probabilities of `logits` (as-is), from the definition.
std::vector<double> LogSoftmax(const std::vector<float>& logits) {
  double m = -INFINITY;
  for (float x : logits) m = std::max<double>(m, x);
  double s = 0.0;
  for (float x : logits) s += std::exp(x - m);
  std::vector<double> out;
  for (float x : logits) out.push_back(x - m - std::log(s));
  return out;
}

// Samples `n` times from the same logits; returns the token counts.
std::vector<int> Histogram(const std::vector<float>& logits,
                           const SamplingParams& params, int n) {
  const int32_t v = static_cast<int32_t>(logits.size());
  Sampler sampler(v);
  SamplingState state(params, {}, {});
  std::vector<int> counts(v, 0);
  SampleResult r;
  for (int i = 0; i < n; ++i) {
    std::vector<float> row = logits;
    EXPECT_TRUE(sampler.SampleRow(absl::MakeSpan(row), &state, &r).ok());
    ++counts[r.token_id];
  }
  return counts;
}

// Probabilities of hand-built logits.
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

const std::vector<double> kProbs = {0.05, 0.30, 0.10, 0.40, 0.15};

TEST(SamplerTest, GreedyPicksTheArgmaxOfEveryRow) {
  const int32_t rows = 6, vocab = 300;
  std::vector<float> logits = RandomLogits(rows, vocab, 1);
  const std::vector<float> original = logits;
  SamplingParams p;
  p.temperature = 0.0f;
  std::vector<std::unique_ptr<SamplingState>> states;
  std::vector<SamplingState*> ptrs;
  for (int i = 0; i < rows; ++i) {
    states.push_back(std::make_unique<SamplingState>(
        p, absl::Span<const int32_t>(), absl::Span<const int32_t>()));
    ptrs.push_back(states.back().get());
  }
  Sampler sampler(vocab);
  std::vector<SampleResult> results;
  ASSERT_TRUE(sampler.Sample(absl::MakeSpan(logits), ptrs, &results).ok());
  ASSERT_EQ(results.size(), static_cast<size_t>(rows));
  for (int i = 0; i < rows; ++i) {
    EXPECT_EQ(results[i].token_id, Argmax(original.data() + i * vocab, vocab));
    EXPECT_EQ(states[i]->num_output_tokens(), 1);
  }
}

TEST(SamplerTest, LogitBiasBansAndForcesTokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 0.5f};
  auto greedy = [&](const SamplingParams& params) {
    Sampler sampler(4);
    SamplingState state(params, {}, {});
    std::vector<float> row = logits;
    SampleResult r;
    EXPECT_TRUE(sampler.SampleRow(absl::MakeSpan(row), &state, &r).ok());
    return r.token_id;
  };
  EXPECT_EQ(greedy(p), 2);
  p.logit_bias = {{2, -100.0f}};
  EXPECT_EQ(greedy(p), 1);  // the best one banned
  p.logit_bias = {{3, 100.0f}};
  EXPECT_EQ(greedy(p), 3);  // the worst one forced
  p.logit_bias = {{0, 2.5f}};
  EXPECT_EQ(greedy(p), 0);  // 1 + 2.5 > 3: a plain shift of one logit
  p.logit_bias = {{0, 1.5f}};
  EXPECT_EQ(greedy(p), 2);  // 1 + 1.5 < 3
  // Sampled: a banned token never comes out.
  SamplingParams s;
  s.temperature = 1.0f;
  s.seed = 5;
  s.logit_bias = {{1, -100.0f}, {3, -100.0f}};
  std::vector<int> counts = Histogram(LogitsOf(kProbs), s, 2000);
  EXPECT_EQ(counts[1], 0);
  EXPECT_EQ(counts[3], 0);
  EXPECT_GT(counts[0] + counts[2] + counts[4], 1990);
}

TEST(SamplingParamsTest, LogitBiasOutOfRangeIsInvalid) {
  SamplingParams p;
  p.logit_bias = {{1, 150.0f}};
  absl::Status s = p.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("logit_bias"), std::string::npos);
  p.logit_bias = {{1, std::nanf("")}};
  EXPECT_EQ(p.Validate().code(), absl::StatusCode::kInvalidArgument);
  p.logit_bias.clear();
  for (int i = 0; i <= kMaxLogitBias; ++i) p.logit_bias.emplace_back(i, 1.0f);
  EXPECT_EQ(p.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SamplerTest, TopKOfOneEqualsGreedy) {
  const int32_t vocab = 200;
  Sampler sampler(vocab);
  for (uint32_t seed = 0; seed < 20; ++seed) {
    std::vector<float> logits = RandomLogits(1, vocab, 100 + seed);
    const int32_t expected = Argmax(logits.data(), vocab);
    SamplingParams p;
    p.temperature = 1.3f;
    p.top_k = 1;
    p.seed = seed;
    SamplingState state(p, {}, {});
    SampleResult r;
    ASSERT_TRUE(sampler.SampleRow(absl::MakeSpan(logits), &state, &r).ok());
    EXPECT_EQ(r.token_id, expected);
  }
}

TEST(SamplerTest, SeededRunsRepeatExactlyWhateverTheBatchPosition) {
  const int32_t vocab = 64;
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  p.seed = 1234;
  SamplingParams other = p;
  other.seed = 99;
  // Run 1: the seeded request alone. Run 2: it sits at row 2 of 3, with
  // neighbours drawing from their own generators.
  SamplingState alone(p, {}, {});
  SamplingState batched(p, {}, {});
  SamplingState n0(other, {}, {});
  SamplingState n1(other, {}, {});
  SamplingState different(other, {}, {});
  Sampler sampler(vocab);
  std::vector<int32_t> a, b, c;
  std::vector<SampleResult> results;
  for (uint32_t step = 0; step < 50; ++step) {
    const std::vector<float> row = RandomLogits(1, vocab, step);
    std::vector<float> one = row;
    SampleResult r;
    ASSERT_TRUE(sampler.SampleRow(absl::MakeSpan(one), &alone, &r).ok());
    a.push_back(r.token_id);

    std::vector<float> batch = RandomLogits(3, vocab, 1000 + step);
    std::copy(row.begin(), row.end(), batch.begin() + 2 * vocab);
    std::vector<SamplingState*> states = {&n0, &n1, &batched};
    ASSERT_TRUE(sampler.Sample(absl::MakeSpan(batch), states, &results).ok());
    b.push_back(results[2].token_id);

    std::vector<float> three = row;
    ASSERT_TRUE(sampler.SampleRow(absl::MakeSpan(three), &different, &r).ok());
    c.push_back(r.token_id);
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(SamplerTest, TopKKeepsOnlyTheKMostLikelyTokens) {
  SamplingParams p;
  p.top_k = 3;
  p.seed = 5;
  // Expected set: the 3 largest probabilities.
  std::vector<int> order(kProbs.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [](int a, int b) { return kProbs[a] > kProbs[b]; });
  std::vector<bool> allowed(kProbs.size(), false);
  double mass = 0.0;
  for (int i = 0; i < 3; ++i) {
    allowed[order[i]] = true;
    mass += kProbs[order[i]];
  }
  const int n = 20000;
  std::vector<int> counts = Histogram(LogitsOf(kProbs), p, n);
  for (size_t t = 0; t < kProbs.size(); ++t) {
    if (!allowed[t]) {
      EXPECT_EQ(counts[t], 0) << "token " << t;
    } else {
      EXPECT_NEAR(counts[t] / static_cast<double>(n), kProbs[t] / mass, 0.02)
          << "token " << t;
    }
  }
}

TEST(SamplerTest, TopPKeepsTheSmallestSetReachingP) {
  SamplingParams p;
  p.top_p = 0.65f;
  p.seed = 6;
  std::vector<int> order(kProbs.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [](int a, int b) { return kProbs[a] > kProbs[b]; });
  std::vector<bool> allowed(kProbs.size(), false);
  double cum = 0.0;
  for (int t : order) {
    allowed[t] = true;
    cum += kProbs[t];
    if (cum >= p.top_p) break;
  }
  const int n = 20000;
  std::vector<int> counts = Histogram(LogitsOf(kProbs), p, n);
  int kept = 0;
  for (size_t t = 0; t < kProbs.size(); ++t) {
    if (!allowed[t]) {
      EXPECT_EQ(counts[t], 0) << "token " << t;
    } else {
      ++kept;
      EXPECT_NEAR(counts[t] / static_cast<double>(n), kProbs[t] / cum, 0.02);
    }
  }
  EXPECT_EQ(kept, 2);
}

TEST(SamplerTest, MinPDropsTokensBelowAFractionOfTheTopProbability) {
  SamplingParams p;
  p.min_p = 0.3f;
  p.seed = 7;
  const double top = *std::max_element(kProbs.begin(), kProbs.end());
  std::vector<bool> allowed;
  double mass = 0.0;
  for (double q : kProbs) {
    allowed.push_back(q >= p.min_p * top);
    if (allowed.back()) mass += q;
  }
  const int n = 20000;
  std::vector<int> counts = Histogram(LogitsOf(kProbs), p, n);
  for (size_t t = 0; t < kProbs.size(); ++t) {
    if (!allowed[t]) {
      EXPECT_EQ(counts[t], 0) << "token " << t;
    } else {
      EXPECT_NEAR(counts[t] / static_cast<double>(n), kProbs[t] / mass, 0.02);
    }
  }
}

TEST(SamplerTest, TemperatureSharpensTheDistribution) {
  SamplingParams p;
  p.temperature = 0.5f;
  p.seed = 8;
  // p_i^(1/T), renormalized.
  std::vector<double> expected;
  double z = 0.0;
  for (double q : kProbs) {
    expected.push_back(std::pow(q, 2.0));
    z += expected.back();
  }
  const int n = 20000;
  std::vector<int> counts = Histogram(LogitsOf(kProbs), p, n);
  for (size_t t = 0; t < kProbs.size(); ++t) {
    EXPECT_NEAR(counts[t] / static_cast<double>(n), expected[t] / z, 0.02);
  }
}

TEST(SamplerTest, PenaltiesChangeLogitsExactlyPerFormula) {
  const std::vector<float> logits = {1.0f, 2.0f, -1.0f, 0.5f, -0.25f, 3.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 1.5f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  const std::vector<int32_t> prompt = {1, 2};
  SamplingState state(p, prompt, {});
  const std::vector<int32_t> outputs = {2, 3, 3};
  for (int32_t t : outputs) state.Accept(t);

  std::vector<double> expected(logits.begin(), logits.end());
  std::vector<int> count(logits.size(), 0);
  for (int32_t t : outputs) ++count[t];
  for (size_t t = 0; t < logits.size(); ++t) {
    const bool seen =
        std::find(prompt.begin(), prompt.end(), t) != prompt.end() ||
        count[t] > 0;
    if (seen) {
      expected[t] = expected[t] > 0 ? expected[t] / 1.5 : expected[t] * 1.5;
    }
    if (count[t] > 0) expected[t] -= 0.25 * count[t] + 0.5;
  }
  std::vector<float> row = logits;
  Sampler sampler(static_cast<int32_t>(logits.size()));
  SampleResult r;
  ASSERT_TRUE(sampler.SampleRow(absl::MakeSpan(row), &state, &r).ok());
  for (size_t t = 0; t < logits.size(); ++t) {
    EXPECT_NEAR(row[t], expected[t], 1e-6) << "token " << t;
  }
  EXPECT_EQ(r.token_id, std::max_element(expected.begin(), expected.end()) -
                            expected.begin());
}

TEST(SamplerTest, MinTokensMasksEosAndStopTokensUntilReached) {
  const int32_t vocab = 10, eos = 9, stop = 8;
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 3;
  p.stop_token_ids = {stop};
  const std::vector<int32_t> eos_ids = {eos};
  SamplingState state(p, {}, eos_ids);
  Sampler sampler(vocab);
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) {
    std::vector<float> row(vocab, 0.0f);
    row[eos] = 10.0f;
    row[stop] = 9.0f;
    row[4] = 1.0f;
    SampleResult r;
    ASSERT_TRUE(sampler.SampleRow(absl::MakeSpan(row), &state, &r).ok());
    got.push_back(r.token_id);
  }
  EXPECT_EQ(got, (std::vector<int32_t>{4, 4, 4, eos}));
}

TEST(SamplerTest, LogprobsAreLogSoftmaxOfTheTemperatureScaledLogits) {
  const int32_t vocab = 50;
  const std::vector<float> original = RandomLogits(1, vocab, 77);
  SamplingParams p;
  p.temperature = 0.7f;
  p.logprobs = 5;
  p.seed = 3;
  SamplingState state(p, {}, {});
  Sampler sampler(vocab);
  std::vector<float> row = original;
  SampleResult r;
  ASSERT_TRUE(sampler.SampleRow(absl::MakeSpan(row), &state, &r).ok());

  std::vector<float> scaled;
  for (float x : original) scaled.push_back(x / 0.7f);
  const std::vector<double> ls = LogSoftmax(scaled);
  EXPECT_NEAR(r.logprob, ls[r.token_id], 1e-4);
  ASSERT_EQ(r.top_logprobs.size(), 5u);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&ls](int32_t a, int32_t b) { return ls[a] > ls[b]; });
  double mass = 0.0;
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(r.top_logprobs[i].token_id, order[i]);
    EXPECT_NEAR(r.top_logprobs[i].logprob, ls[order[i]], 1e-4);
    mass += std::exp(r.top_logprobs[i].logprob);
  }
  EXPECT_LE(mass, 1.0 + 1e-6);
  double all = 0.0;
  for (double l : ls) all += std::exp(l);
  EXPECT_NEAR(all, 1.0, 1e-6);
}

TEST(SamplerTest, RejectsLogitsOfTheWrongSize) {
  Sampler sampler(8);
  SamplingParams p;
  SamplingState state(p, {}, {});
  std::vector<float> logits(15, 0.0f);
  std::vector<SamplingState*> states = {&state, &state};
  std::vector<SampleResult> results;
  EXPECT_EQ(sampler.Sample(absl::MakeSpan(logits), states, &results).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SamplingParamsTest, ValidateNamesTheOffendingField) {
  SamplingParams p;
  EXPECT_TRUE(p.Validate().ok());
  p.top_p = 0.0f;
  absl::Status s = p.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("top_p"), std::string::npos);
  p = SamplingParams();
  p.max_tokens = 2;
  p.min_tokens = 3;
  EXPECT_EQ(p.Validate().code(), absl::StatusCode::kInvalidArgument);
  p = SamplingParams();
  p.logprobs = 21;
  EXPECT_EQ(p.Validate().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inferd
