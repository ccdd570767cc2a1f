// SamplingParams.n (parallel samples sharing the prompt's KV blocks) and
// SamplingParams.prompt_logprobs through the GenerateEngine, over the paged
// bigram fake model (generate_test_util.h), whose answers are read back
// from its KV blocks: a sample given a wrong or wrongly shared block would
// generate other tokens.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "runtime/engine/generate_engine.h"
#include "tests/runtime/engine/generate_test_util.h"

namespace inferd {
namespace {

using testing_internal::BigramLogits;
using testing_internal::BigramRunner;
using testing_internal::kVocab;
using testing_internal::MakeEngine;
using testing_internal::WordTokenizer;

constexpr int32_t kBlockSize = 4;
constexpr int32_t kNumBlocks = 256;

// BigramRunner that holds its `hold_at`-th call (1-based) until resumed.
class HoldingRunner : public StepRunner {
 public:
  HoldingRunner(std::unique_ptr<StepRunner> inner, int hold_at)
      : inner_(std::move(inner)), hold_at_(hold_at) {}
  absl::StatusOr<BatchResult> Execute(const BatchPlan& plan) override {
    if (++calls_ == hold_at_) {
      held.Notify();
      resume.WaitForNotification();
    }
    return inner_->Execute(plan);
  }
  absl::Notification held;
  absl::Notification resume;

 private:
  std::unique_ptr<StepRunner> inner_;
  const int hold_at_;
  int calls_ = 0;  // engine thread only
};

struct Engine {
  std::atomic<int64_t> calls{0};
  std::unique_ptr<GenerateEngine> engine;
  HoldingRunner* holding = nullptr;

  explicit Engine(const Tokenizer* tok, int32_t max_batched_tokens = 256,
                  int32_t default_drafts = 0, int hold_at = 0) {
    GenerateEngineOptions o;
    o.prep_threads = 1;
    o.speculative_draft_tokens = default_drafts;
    SchedulerConfig& sc = o.scheduler;
    sc.max_model_len = 128;
    sc.max_batched_tokens = max_batched_tokens;
    sc.max_seqs = 32;
    sc.kv_cache.num_blocks = kNumBlocks;
    sc.kv_cache.block_size = kBlockSize;
    std::unique_ptr<StepRunner> runner =
        std::make_unique<BigramRunner>(&calls, kNumBlocks, kBlockSize);
    if (hold_at > 0) {
      auto h = std::make_unique<HoldingRunner>(std::move(runner), hold_at);
      holding = h.get();
      runner = std::move(h);
    }
    engine = MakeEngine(tok, std::move(o), std::move(runner));
  }
};

// Every chunk of one request by sample; `done` once the call ended (the
// final chunk without more_samples, or an error).
struct Samples {
  absl::Mutex mu;
  std::map<int, std::vector<int32_t>> tokens ABSL_GUARDED_BY(mu);
  std::map<int, GenerateChunk> finals ABSL_GUARDED_BY(mu);
  std::vector<TokenLogprobs> prompt_logprobs ABSL_GUARDED_BY(mu);
  int chunks ABSL_GUARDED_BY(mu) = 0;
  // Chunks with prompt logprobs, and the index of the first one.
  int prompt_logprob_chunks ABSL_GUARDED_BY(mu) = 0;
  int prompt_logprob_chunk ABSL_GUARDED_BY(mu) = -1;
  int after_end ABSL_GUARDED_BY(mu) = 0;
  int more_false ABSL_GUARDED_BY(mu) = 0;
  absl::Status error ABSL_GUARDED_BY(mu);
  bool done ABSL_GUARDED_BY(mu) = false;

  GenerateCallback Callback() {
    return [this](const absl::StatusOr<GenerateChunk>& c) {
      absl::MutexLock lock(&mu);
      if (done) ++after_end;
      if (!c.ok()) {
        error = c.status();
        done = true;
        return;
      }
      if (!c->prompt_logprobs.empty()) {
        ++prompt_logprob_chunks;
        prompt_logprob_chunk = chunks;
        prompt_logprobs = c->prompt_logprobs;
      }
      ++chunks;
      std::vector<int32_t>& t = tokens[c->sample_index];
      t.insert(t.end(), c->token_ids.begin(), c->token_ids.end());
      if (c->finish != FinishReason::kNone) {
        EXPECT_EQ(finals.count(c->sample_index), 0u) << c->sample_index;
        finals[c->sample_index] = *c;
        if (!c->more_samples) {
          ++more_false;
          done = true;
        }
      }
    };
  }
  void Wait() {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&done));
  }
  // Waits until every one of `n` samples has at least `k` tokens.
  struct Want {
    Samples* s;
    int n;
    size_t k;
  };
  static bool Enough(Want* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (int i = 0; i < w->n; ++i) {
      auto it = w->s->tokens.find(i);
      if (it == w->s->tokens.end() || it->second.size() < w->k) return false;
    }
    return true;
  }
  void WaitTokens(int n, size_t k) {
    absl::MutexLock lock(&mu);
    Want w{this, n, k};
    mu.Await(absl::Condition(&Enough, &w));
  }
};

GenerateParams Request(std::vector<int32_t> prompt, int32_t n,
                       int32_t max_tokens, float temperature,
                       std::optional<uint64_t> seed = std::nullopt) {
  GenerateParams p;
  p.prompt_token_ids = std::move(prompt);
  p.sampling.n = n;
  p.sampling.max_tokens = max_tokens;
  p.sampling.temperature = temperature;
  p.sampling.seed = seed;
  p.sampling.ignore_eos = true;
  return p;
}

// Runs one request on `engine` and returns its tokens by sample.
std::map<int, std::vector<int32_t>> RunRequest(GenerateEngine* engine,
                                        const GenerateParams& p,
                                        Samples* s = nullptr) {
  Samples local;
  if (s == nullptr) s = &local;
  EXPECT_TRUE(engine->SubmitGenerate(p, s->Callback()).ok());
  s->Wait();
  absl::MutexLock lock(&s->mu);
  EXPECT_TRUE(s->error.ok()) << s->error;
  EXPECT_EQ(s->more_false, 1);
  EXPECT_EQ(s->after_end, 0);
  return s->tokens;
}

const std::vector<std::vector<int32_t>> kPrompts = {
    {2, 3, 4, 5, 6, 7},        // a partial last block
    {2, 3, 4, 5, 6, 7, 5, 4},  // full blocks only
    {6, 3},                    // shorter than a block
};

// Greedy: every sample is the n = 1 output (with and without speculative
// decoding), each sample ends once with its own usage (the prompt counted
// once per sample, as its length), and the prompt is computed once: the
// other samples only recompute its last partial block.
TEST(ParallelSamplesTest, GreedySamplesAreTheGreedyOutputAndPrefillOnce) {
  std::unique_ptr<Tokenizer> tok = WordTokenizer();
  constexpr int32_t kN = 4;
  constexpr int32_t kMax = 5;
  for (const std::vector<int32_t>& prompt : kPrompts) {
    std::vector<int32_t> greedy;
    {
      Engine e(tok.get());
      greedy = RunRequest(e.engine.get(), Request(prompt, 1, kMax, 0.0f))[0];
      ASSERT_EQ(greedy.size(), static_cast<size_t>(kMax));
    }
    for (int32_t drafts : {0, 3}) {
      Engine e(tok.get(), 256, drafts);
      Samples s;
      auto got = RunRequest(e.engine.get(), Request(prompt, kN, kMax, 0.0f), &s);
      ASSERT_EQ(got.size(), static_cast<size_t>(kN));
      for (int i = 0; i < kN; ++i) {
        EXPECT_EQ(got[i], greedy) << "sample " << i << " drafts " << drafts;
      }
      absl::MutexLock lock(&s.mu);
      ASSERT_EQ(s.finals.size(), static_cast<size_t>(kN));
      for (const auto& [i, f] : s.finals) {
        EXPECT_EQ(f.sample_index, i);
        EXPECT_EQ(f.finish, FinishReason::kLength);
        EXPECT_EQ(f.usage.prompt_tokens, static_cast<int64_t>(prompt.size()));
        EXPECT_EQ(f.usage.completion_tokens, kMax);
      }
      e.engine->Stop();
      const EngineStats st = e.engine->Stats();
      EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total);
      if (drafts == 0) {
        // Sample 0: the prompt, then kMax - 1 decodes; each other sample:
        // the prompt's partial last block and its first token, then
        // kMax - 2 decodes.
        const int64_t p = static_cast<int64_t>(prompt.size());
        const int64_t tail = p % kBlockSize;
        EXPECT_EQ(st.batched_tokens,
                  p + (kMax - 1) + (kN - 1) * (tail + 1 + kMax - 2));
      }
    }
  }
}

// Sampling with a seed: sample i is the n = 1 output with seed + i, the
// samples differ, and the same seed gives the same samples again.
TEST(ParallelSamplesTest, SeededSamplesAreReproducibleAndDistinct) {
  std::unique_ptr<Tokenizer> tok = WordTokenizer();
  constexpr int32_t kN = 4;
  constexpr int32_t kMax = 12;
  const std::vector<int32_t> prompt = {2, 3, 4, 5, 6};
  Engine e(tok.get());
  auto first = RunRequest(e.engine.get(), Request(prompt, kN, kMax, 1.5f, 7));
  auto again = RunRequest(e.engine.get(), Request(prompt, kN, kMax, 1.5f, 7));
  EXPECT_EQ(first, again);
  std::set<std::vector<int32_t>> distinct;
  for (int i = 0; i < kN; ++i) {
    auto alone =
        RunRequest(e.engine.get(), Request(prompt, 1, kMax, 1.5f, 7 + i))[0];
    EXPECT_EQ(first[i], alone) << "sample " << i;
    distinct.insert(first[i]);
  }
  EXPECT_GE(distinct.size(), 3u);
  e.engine->Stop();
  const EngineStats st = e.engine->Stats();
  EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total);
}

// Cancelling the call ends every sample (each with a CANCELLED final chunk,
// the call with the last) and gives back every sample's blocks.
TEST(ParallelSamplesTest, CancelEndsEverySampleAndFreesTheirBlocks) {
  std::unique_ptr<Tokenizer> tok = WordTokenizer();
  constexpr int32_t kN = 4;
  // The 8th forward pass waits: by then the first 7 gave every sample 7
  // tokens, and the stats were refreshed after the 7th.
  Engine e(tok.get(), 256, 0, /*hold_at=*/8);
  Samples s;
  // 9 prompt tokens: each sample holds blocks of its own beyond the 2
  // shared ones.
  auto handle = e.engine->SubmitGenerate(
      Request({2, 3, 4, 5, 6, 7, 2, 3, 4}, kN, 100, 1.0f, 3), s.Callback());
  ASSERT_TRUE(handle.ok());
  e.holding->held.WaitForNotification();
  s.WaitTokens(kN, 7);
  // Sample 0: 4 blocks (15 tokens); each other: 2 blocks past the shared 2.
  EXPECT_EQ(e.engine->Stats().kv_blocks_free, kNumBlocks - 4 - 2 * (kN - 1));
  (*handle)->Abort();
  e.holding->resume.Notify();
  s.Wait();
  {
    absl::MutexLock lock(&s.mu);
    EXPECT_TRUE(s.error.ok()) << s.error;
    ASSERT_EQ(s.finals.size(), static_cast<size_t>(kN));
    for (const auto& [i, f] : s.finals) {
      EXPECT_EQ(f.finish, FinishReason::kCancelled) << i;
    }
  }
  // A later request's steps come after the cancelled samples were reaped,
  // and the stats are refreshed after each step: by its second token they
  // show the blocks back (all but the one it holds).
  RunRequest(e.engine.get(), Request({5, 6}, 1, 2, 0.0f));
  EXPECT_GE(e.engine->Stats().kv_blocks_free, kNumBlocks - 1);
}

// Cancelled before its first step (queued behind a running request): every
// sample still gets its one CANCELLED final chunk, the last one ending the
// call, and none was ever scheduled.
TEST(ParallelSamplesTest, CancelBeforeTheFirstStepEndsEverySample) {
  std::unique_ptr<Tokenizer> tok = WordTokenizer();
  Engine e(tok.get(), 256, 0, /*hold_at=*/1);
  Samples busy;
  ASSERT_TRUE(e.engine
                  ->SubmitGenerate(Request({2, 3}, 1, 2, 0.0f),
                                   busy.Callback())
                  .ok());
  e.holding->held.WaitForNotification();
  Samples s;
  auto handle =
      e.engine->SubmitGenerate(Request({4, 5, 6}, 3, 4, 1.0f), s.Callback());
  ASSERT_TRUE(handle.ok());
  (*handle)->Abort();
  e.holding->resume.Notify();
  s.Wait();
  busy.Wait();
  absl::MutexLock lock(&s.mu);
  EXPECT_TRUE(s.error.ok()) << s.error;
  EXPECT_EQ(s.more_false, 1);
  EXPECT_EQ(s.after_end, 0);
  ASSERT_EQ(s.finals.size(), 3u);
  for (const auto& [i, f] : s.finals) {
    EXPECT_EQ(f.finish, FinishReason::kCancelled) << i;
    EXPECT_EQ(f.usage.completion_tokens, 0) << i;
  }
}

double LogSoftmaxAt(const std::vector<float>& l, int32_t token) {
  double max = l[0];
  for (float v : l) max = std::max<double>(max, v);
  double sum = 0;
  for (float v : l) sum += std::exp(v - max);
  return l[token] - max - std::log(sum);
}

// Prompt logprobs come once, in the first chunk (sample 0's first token),
// one entry per prompt token after the first, equal to the log-softmax of
// the model's logits at the position before it, with the top-k best first;
// computed over chunked prefill, and the prefix cache is bypassed.
TEST(ParallelSamplesTest, PromptLogprobsAreTheModelsLogSoftmaxOnce) {
  std::unique_ptr<Tokenizer> tok = WordTokenizer();
  const std::vector<int32_t> prompt = {2, 3, 4, 5, 6, 7, 3, 3, 5, 2, 6};
  // A budget of 4 tokens: the prompt runs in three chunks.
  Engine e(tok.get(), /*max_batched_tokens=*/4);
  GenerateParams p = Request(prompt, 2, 3, 0.0f);
  p.sampling.prompt_logprobs = 3;
  Samples s;
  RunRequest(e.engine.get(), p, &s);
  // The same prompt again: a prefix-cache hit is allowed only without
  // prompt logprobs.
  Samples again;
  RunRequest(e.engine.get(), p, &again);
  e.engine->Stop();
  EXPECT_EQ(e.engine->Stats().prefix_cache_queries, 0);
  for (Samples* run : {&s, &again}) {
    absl::MutexLock lock(&run->mu);
    EXPECT_EQ(run->prompt_logprob_chunks, 1);
    EXPECT_EQ(run->prompt_logprob_chunk, 0);
    ASSERT_EQ(run->prompt_logprobs.size(), prompt.size() - 1);
    for (size_t pos = 1; pos < prompt.size(); ++pos) {
      const std::vector<float> l =
          BigramLogits(pos >= 2 ? prompt[pos - 2] : 0, prompt[pos - 1]);
      const TokenLogprobs& got = run->prompt_logprobs[pos - 1];
      EXPECT_EQ(got.sampled.token_id, prompt[pos]);
      EXPECT_NEAR(got.sampled.logprob, LogSoftmaxAt(l, prompt[pos]), 1e-5)
          << pos;
      std::vector<int32_t> order(kVocab);
      for (int32_t i = 0; i < kVocab; ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return l[a] > l[b]; });
      ASSERT_EQ(got.top.size(), 3u);
      for (size_t j = 0; j < 3; ++j) {
        EXPECT_EQ(got.top[j].token_id, order[j]) << pos << " " << j;
        EXPECT_NEAR(got.top[j].logprob, LogSoftmaxAt(l, order[j]), 1e-5);
      }
    }
  }
}

// Limits: n above the cap and prompt_logprobs above 20 are refused at
// Submit with the limit in the message.
TEST(ParallelSamplesTest, OutOfRangeCountsAreRefused) {
  std::unique_ptr<Tokenizer> tok = WordTokenizer();
  Engine e(tok.get());
  GenerateParams p = Request({2, 3}, kMaxSamples + 1, 2, 0.0f);
  auto refused = e.engine->SubmitGenerate(
      p, [](const absl::StatusOr<GenerateChunk>&) {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("at most 16 samples"),
            std::string::npos)
      << refused.status();
  p = Request({2, 3}, 1, 2, 0.0f);
  p.sampling.prompt_logprobs = 21;
  refused = e.engine->SubmitGenerate(
      p, [](const absl::StatusOr<GenerateChunk>&) {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("prompt_logprobs"),
            std::string::npos);
}

}  // namespace
}  // namespace inferd
