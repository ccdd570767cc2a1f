// Speculative decoding through the GenerateEngine with a fake bigram model
// that answers kAllLogits: greedy transcripts (tokens, text, chunks,
// logprobs, finish and stop reasons) are the same with and without drafts
// under stop strings, stop ids, max_tokens, min_tokens and structured
// output; sampled outputs follow the model's exact distribution; KV blocks
// all come back.
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "runtime/engine/generate_engine.h"
#include "runtime/engine/input_processor.h"
#include "runtime/gen/sampler.h"
#include "runtime/gen/scheduler.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/runtime/engine/generate_test_util.h"

namespace inferd {
namespace {

using testing_internal::BigramLogits;
using testing_internal::BigramRunner;
using testing_internal::kBigramTable;
using testing_internal::kEos;
using testing_internal::kVocab;
using testing_internal::MakeEngine;

std::unique_ptr<Tokenizer> Words() { return testing_internal::WordTokenizer(); }

struct SpecEngine {
  std::atomic<int64_t> calls{0};
  std::unique_ptr<GenerateEngine> engine;

  SpecEngine(const Tokenizer* tok, int32_t default_drafts, bool overlap = true) {
    GenerateEngineOptions o;
    o.prep_threads = 1;
    o.overlap_output = overlap;
    o.max_queue_requests = 8192;
    o.speculative_draft_tokens = default_drafts;
    SchedulerConfig& sc = o.scheduler;
    sc.max_model_len = 128;
    sc.max_batched_tokens = 256;
    sc.max_seqs = 32;
    sc.kv_cache.num_blocks = 512;
    sc.kv_cache.block_size = 4;
    // No prefix-cache hits: the step counts the tests compare stay those
    // of the requests alone.
    sc.kv_cache.enable_prefix_caching = false;
    auto runner = std::make_unique<BigramRunner>(
        &calls, sc.kv_cache.num_blocks, sc.kv_cache.block_size);
    engine = MakeEngine(tok, std::move(o), std::move(runner));
  }
  // After Stop: every block is free again.
  void ExpectAllBlocksFree() {
    engine->Stop();
    const EngineStats s = engine->Stats();
    EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
    EXPECT_EQ(s.running_requests, 0);
  }
};

struct Chunk {
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<std::pair<int32_t, float>> logprobs;  // sampled, then tops
  FinishReason finish = FinishReason::kNone;
  std::string stop_reason;
  int64_t completion_tokens = 0;
  bool operator==(const Chunk& o) const {
    return text == o.text && token_ids == o.token_ids &&
           logprobs == o.logprobs && finish == o.finish &&
           stop_reason == o.stop_reason &&
           completion_tokens == o.completion_tokens;
  }
};

struct Transcript {
  absl::Mutex mu;
  std::map<int, std::vector<Chunk>> chunks ABSL_GUARDED_BY(mu);
  std::map<int, std::pair<int64_t, int64_t>> drafts ABSL_GUARDED_BY(mu);
  std::map<int, absl::Status> errors ABSL_GUARDED_BY(mu);
  int finals ABSL_GUARDED_BY(mu) = 0;

  GenerateCallback For(int key) {
    return [this, key](const absl::StatusOr<GenerateChunk>& c) {
      absl::MutexLock lock(&mu);
      if (!c.ok()) {
        errors[key] = c.status();
        ++finals;
        return;
      }
      Chunk k{c->text, c->token_ids, {}, c->finish, c->stop_reason,
              c->usage.completion_tokens};
      for (const TokenLogprobs& lp : c->logprobs) {
        k.logprobs.emplace_back(lp.sampled.token_id, lp.sampled.logprob);
        for (const TokenLogprobValue& t : lp.top) {
          k.logprobs.emplace_back(t.token_id, t.logprob);
        }
      }
      chunks[key].push_back(std::move(k));
      if (c->finish != FinishReason::kNone) {
        drafts[key] = {c->usage.draft_tokens, c->usage.accepted_draft_tokens};
        ++finals;
      }
    };
  }
  void WaitFinals(int n) {
    absl::MutexLock lock(&mu);
    std::pair<int*, int> want(&finals, n);
    mu.Await(absl::Condition(
        +[](std::pair<int*, int>* a) { return *a->first >= a->second; },
        &want));
  }
  std::vector<int32_t> Tokens(int key) {
    absl::MutexLock lock(&mu);
    std::vector<int32_t> out;
    for (const Chunk& c : chunks[key]) {
      out.insert(out.end(), c.token_ids.begin(), c.token_ids.end());
    }
    return out;
  }
};

const std::vector<std::vector<int32_t>> kPrompts = {
    {2, 3, 4}, {5, 6}, {4, 4, 7, 2}, {7, 2, 5}, {6, 3, 2, 7, 5},
    {2, 3, 4, 5, 6, 7, 2, 3, 4, 5, 6, 7}};

GenerateParams Greedy(const std::vector<int32_t>& prompt, int max_tokens) {
  GenerateParams p;
  p.prompt_token_ids = prompt;
  p.sampling.temperature = 0.0f;
  p.sampling.max_tokens = max_tokens;
  p.sampling.logprobs = 2;
  return p;
}

// Runs `requests` on a fresh engine with `default_drafts`, all at once or
// (`one_at_a_time`) each alone, so the model calls do not depend on when
// requests arrive.
std::map<int, std::vector<Chunk>> RunAll(
    const Tokenizer* tok, int32_t default_drafts,
    const std::vector<GenerateParams>& requests, int64_t* accepted = nullptr,
    int64_t* calls = nullptr, bool overlap = true,
    bool one_at_a_time = false) {
  SpecEngine e(tok, default_drafts, overlap);
  Transcript t;
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_TRUE(
        e.engine->SubmitGenerate(requests[i], t.For(static_cast<int>(i))).ok());
    if (one_at_a_time) t.WaitFinals(static_cast<int>(i) + 1);
  }
  t.WaitFinals(static_cast<int>(requests.size()));
  e.ExpectAllBlocksFree();
  absl::MutexLock lock(&t.mu);
  EXPECT_TRUE(t.errors.empty());
  int64_t acc = 0;
  for (const auto& [key, d] : t.drafts) {
    EXPECT_LE(d.second, d.first);
    if (default_drafts == 0) {
      EXPECT_EQ(d.first, 0) << key;
    }
    acc += d.second;
  }
  if (accepted != nullptr) *accepted = acc;
  if (calls != nullptr) *calls = e.calls.load();
  return t.chunks;
}

// Each request alone (one step per token without drafts), so the step
// counts are exact.
TEST(SpeculativeEngineTest, GreedyTranscriptsAreTheSameWithFewerSteps) {
  std::unique_ptr<Tokenizer> tok = Words();
  std::vector<GenerateParams> requests;
  for (const auto& p : kPrompts) requests.push_back(Greedy(p, 40));
  int64_t accepted_off = 0, accepted_on = 0, calls_off = 0, calls_on = 0;
  const auto off = RunAll(tok.get(), 0, requests, &accepted_off, &calls_off,
                          /*overlap=*/true, /*one_at_a_time=*/true);
  EXPECT_EQ(calls_off, 40 * static_cast<int64_t>(requests.size()));
  for (bool overlap : {true, false}) {
    const auto on = RunAll(tok.get(), 5, requests, &accepted_on, &calls_on,
                           overlap, /*one_at_a_time=*/true);
    for (size_t i = 0; i < requests.size(); ++i) {
      const std::vector<Chunk>& a = off.at(static_cast<int>(i));
      const std::vector<Chunk>& b = on.at(static_cast<int>(i));
      ASSERT_EQ(a.size(), b.size()) << i;  // one chunk per token in both
      for (size_t k = 0; k < a.size(); ++k) {
        EXPECT_TRUE(a[k] == b[k]) << "request " << i << " chunk " << k;
      }
      EXPECT_EQ(b.back().finish, FinishReason::kLength);
      EXPECT_EQ(b.back().completion_tokens, 40);
    }
    EXPECT_EQ(accepted_off, 0);
    EXPECT_GT(accepted_on, 100);
    EXPECT_LT(calls_on, calls_off / 2);
  }
}

// The request decides: speculative.num_draft_tokens 0 turns it off on a
// server that speculates by default, 4 turns it on on one that does not.
TEST(SpeculativeEngineTest, RequestsOptInAndOut) {
  std::unique_ptr<Tokenizer> tok = Words();
  for (int32_t server : {0, 6}) {
    SpecEngine e(tok.get(), server);
    Transcript t;
    GenerateParams in = Greedy(kPrompts[5], 30);
    in.speculative.num_draft_tokens = 4;
    GenerateParams out = Greedy(kPrompts[5], 30);
    out.speculative.num_draft_tokens = 0;
    GenerateParams deflt = Greedy(kPrompts[5], 30);
    ASSERT_TRUE(e.engine->SubmitGenerate(in, t.For(0)).ok());
    ASSERT_TRUE(e.engine->SubmitGenerate(out, t.For(1)).ok());
    ASSERT_TRUE(e.engine->SubmitGenerate(deflt, t.For(2)).ok());
    GenerateParams bad = Greedy(kPrompts[5], 30);
    bad.speculative.num_draft_tokens = 17;
    EXPECT_EQ(e.engine->SubmitGenerate(bad, t.For(3)).status().code(),
              absl::StatusCode::kInvalidArgument);
    t.WaitFinals(3);
    EXPECT_EQ(t.Tokens(0), t.Tokens(1));
    EXPECT_EQ(t.Tokens(2), t.Tokens(1));
    e.ExpectAllBlocksFree();
    const EngineStats s = e.engine->Stats();
    absl::MutexLock lock(&t.mu);
    EXPECT_GT(t.drafts[0].second, 0);
    EXPECT_EQ(t.drafts[1].first, 0);
    if (server == 0) {
      EXPECT_EQ(t.drafts[2].first, 0);
      EXPECT_EQ(s.spec_draft_tokens, t.drafts[0].first);
    } else {
      EXPECT_GT(t.drafts[2].second, 0);
      EXPECT_EQ(s.spec_draft_tokens, t.drafts[0].first + t.drafts[2].first);
    }
    EXPECT_LE(s.spec_accepted_tokens, s.spec_draft_tokens);
  }
}

// Several tokens per step, and still the same ends as one token at a
// time: stop strings (with and without the stop text), stop ids, min_tokens,
// max_tokens and structured output cut at the same token, with the same
// text, reasons and counts.
TEST(SpeculativeEngineTest, StopsAndLimitsCutAtTheSameToken) {
  std::unique_ptr<Tokenizer> tok = Words();
  std::vector<GenerateParams> requests;
  for (const auto& prompt : kPrompts) {
    // What the model writes, greedy.
    std::vector<int32_t> ref = prompt;
    for (int i = 0; i < 30; ++i) {
      const size_t n = ref.size();
      ref.push_back(kBigramTable[n > 1 ? ref[n - 2] : 0][ref[n - 1]]);
    }
    const std::vector<int32_t> gen(ref.begin() + prompt.size(), ref.end());
    for (int max_tokens : {1, 2, 3, 7, 20}) {
      requests.push_back(Greedy(prompt, max_tokens));
    }
    for (size_t k : {0, 3, 9, 17}) {
      GenerateParams p = Greedy(prompt, 30);
      p.sampling.stop = {tok->IdToToken(gen[k])};
      requests.push_back(p);
      p.sampling.include_stop_str_in_output = true;
      requests.push_back(p);
      GenerateParams ids = Greedy(prompt, 30);
      ids.sampling.stop_token_ids = {gen[k]};
      requests.push_back(ids);
      ids.sampling.min_tokens = 12;
      requests.push_back(ids);
    }
    GenerateParams format = Greedy(prompt, 30);
    format.sampling.response_format.type = ResponseFormat::Type::kRegex;
    // Word tokens add " a", " b", ...
    format.sampling.response_format.spec = "( [a-e]){6} f";
    requests.push_back(format);
  }
  const auto off = RunAll(tok.get(), 0, requests);
  int64_t accepted = 0;
  const auto on = RunAll(tok.get(), 8, requests, &accepted);
  EXPECT_GT(accepted, 100);
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::vector<Chunk>& a = off.at(static_cast<int>(i));
    const std::vector<Chunk>& b = on.at(static_cast<int>(i));
    ASSERT_EQ(a.size(), b.size()) << i;
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_TRUE(a[k] == b[k]) << "request " << i << " chunk " << k << ": '"
                                << a[k].text << "' vs '" << b[k].text << "'";
    }
    const SamplingParams& sp = requests[i].sampling;
    if (!sp.stop.empty() ||
        (!sp.stop_token_ids.empty() && sp.min_tokens == 0) ||
        sp.response_format.type != ResponseFormat::Type::kText) {
      EXPECT_EQ(b.back().finish, FinishReason::kStop) << i;
    }
  }
}

// Sampling at temperature 1: the first tokens of 6000 seeded generations
// with drafts follow the exact distribution of the model (joint of the
// first two tokens, marginals of the third and fourth; standard error
// <= 0.0065, tolerance 0.03), while most drafts are accepted and some are
// not.
TEST(SpeculativeEngineTest, SampledOutputsFollowTheExactDistribution) {
  std::unique_ptr<Tokenizer> tok = Words();
  // The cycle of (2, 3) twice: lookups find drafts from the first step.
  std::vector<int32_t> prompt = {2, 3};
  for (int i = 0; i < 14; ++i) {
    const size_t n = prompt.size();
    prompt.push_back(kBigramTable[prompt[n - 2]][prompt[n - 1]]);
  }
  // Exact: enumerate the first 4 tokens.
  auto softmax = [](std::vector<float> l) {
    double m = -INFINITY, z = 0.0;
    for (float x : l) m = std::max<double>(m, x);
    std::vector<double> p;
    for (float x : l) p.push_back(std::exp(x - m));
    for (double x : p) z += x;
    for (double& x : p) x /= z;
    return p;
  };
  std::vector<double> joint01(kVocab * kVocab, 0.0), marg2(kVocab, 0.0),
      marg3(kVocab, 0.0);
  const size_t n = prompt.size();
  const std::vector<double> p0 = softmax(BigramLogits(prompt[n - 2], prompt[n - 1]));
  for (int32_t a = 0; a < kVocab; ++a) {
    const std::vector<double> p1 = softmax(BigramLogits(prompt[n - 1], a));
    for (int32_t b = 0; b < kVocab; ++b) {
      const double pab = p0[a] * p1[b];
      joint01[a * kVocab + b] += pab;
      const std::vector<double> p2 = softmax(BigramLogits(a, b));
      for (int32_t c = 0; c < kVocab; ++c) {
        marg2[c] += pab * p2[c];
        const std::vector<double> p3 = softmax(BigramLogits(b, c));
        for (int32_t d = 0; d < kVocab; ++d) marg3[d] += pab * p2[c] * p3[d];
      }
    }
  }
  constexpr int kRuns = 6000;
  SpecEngine e(tok.get(), 4);
  Transcript t;
  for (int i = 0; i < kRuns; ++i) {
    GenerateParams p;
    p.prompt_token_ids = prompt;
    p.sampling.temperature = 1.0f;
    p.sampling.seed = 77 + i;
    p.sampling.max_tokens = 4;
    p.sampling.ignore_eos = true;
    ASSERT_TRUE(e.engine->SubmitGenerate(p, t.For(i)).ok());
  }
  t.WaitFinals(kRuns);
  e.ExpectAllBlocksFree();
  std::vector<double> got01(kVocab * kVocab, 0.0), got2(kVocab, 0.0),
      got3(kVocab, 0.0);
  int64_t drafts = 0, accepted = 0;
  for (int i = 0; i < kRuns; ++i) {
    const std::vector<int32_t> tokens = t.Tokens(i);
    ASSERT_EQ(tokens.size(), 4u) << i;
    got01[tokens[0] * kVocab + tokens[1]] += 1.0 / kRuns;
    got2[tokens[2]] += 1.0 / kRuns;
    got3[tokens[3]] += 1.0 / kRuns;
    absl::MutexLock lock(&t.mu);
    drafts += t.drafts[i].first;
    accepted += t.drafts[i].second;
  }
  for (int32_t k = 0; k < kVocab * kVocab; ++k) {
    EXPECT_NEAR(got01[k], joint01[k], 0.03) << "(t0, t1) = " << k;
  }
  for (int32_t k = 0; k < kVocab; ++k) {
    EXPECT_NEAR(got2[k], marg2[k], 0.03) << "t2 = " << k;
    EXPECT_NEAR(got3[k], marg3[k], 0.03) << "t3 = " << k;
  }
  EXPECT_GT(accepted, drafts / 2);
  EXPECT_LT(accepted, drafts);
}

}  // namespace
}  // namespace inferd
