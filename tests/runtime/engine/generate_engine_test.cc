#include "runtime/engine/generate_engine.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/engine/input_processor.h"
#include "runtime/gen/sampler.h"
#include "runtime/gen/scheduler.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/runtime/engine/generate_test_util.h"
#include "tests/runtime/engine/test_gate.h"

namespace inferd {
namespace {

using testing_internal::kEos;
using testing_internal::kVocab;
using testing_internal::MakeEngine;
using testing_internal::WordTokenizer;

constexpr int32_t kNext = 5;  // the fake model's favourite token

using testing_internal::Gate;

// The chat rendering step: records the threads it runs on, can block on a
// gate, and refuses a first message "bad" as a template error would.
struct RenderHook {
  absl::Mutex mu;
  std::vector<std::thread::id> threads ABSL_GUARDED_BY(mu);
  Gate* gate = nullptr;

  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& m) {
    {
      absl::MutexLock lock(&mu);
      threads.push_back(std::this_thread::get_id());
    }
    if (gate != nullptr) gate->Enter();
    if (!m.empty() && m[0].content == "bad") {
      return absl::InvalidArgumentError("chat template: bad message");
    }
    return std::string("a b c");
  }
  std::vector<std::thread::id> Threads() {
    absl::MutexLock lock(&mu);
    return threads;
  }
};

// An input processor (a component, as a plug-in could register) that
// renders chat messages through `hook`; prompts as the built-in one.
class HookedInput : public InputProcessor {
 public:
  HookedInput(RenderHook* hook, const Tokenizer* tokenizer,
              InputProcessorOptions io)
      : hook_(hook),
        tokenizer_(tokenizer),
        plain_("prompt_tokenizer", TokenizingInputProcessor::kPrompt,
               tokenizer, std::move(io)) {}
  absl::string_view name() const override { return "hooked_prompt"; }
  absl::StatusOr<std::vector<int32_t>> ProcessPrompt(
      const GenerateParams& params) const override {
    if (params.messages.empty()) return plain_.ProcessPrompt(params);
    absl::StatusOr<std::string> text = hook_->Render(params.messages);
    if (!text.ok()) return text.status();
    absl::StatusOr<Encoding> enc = tokenizer_->Encode(*text, false);
    if (!enc.ok()) return enc.status();
    return enc->ids;
  }

 private:
  RenderHook* hook_;
  const Tokenizer* tokenizer_;
  TokenizingInputProcessor plain_;
};

// A fake model whose logits always favour kNext. Counts its calls.
class FakeRunner : public StepRunner {
 public:
  explicit FakeRunner(std::atomic<int>* calls) : calls_(calls) {}
  absl::StatusOr<BatchResult> Execute(const BatchPlan& plan) override {
    calls_->fetch_add(1);
    BatchResult r;
    for (const SequencePlan& s : plan.seqs) {
      SequenceResult out;
      out.seq_id = s.seq_id;
      out.output = s.output;
      if (s.output == StepOutput::kLastLogits) {
        out.rows = 1;
        out.cols = kVocab;
        out.values.assign(kVocab, 0.0f);
        out.values[kNext] = 10.0f;
      }
      r.seqs.push_back(std::move(out));
    }
    return r;
  }

 private:
  std::atomic<int>* calls_;
};

// Every chunk of one request; `finals` counts final answers (an error, or
// a chunk with a finish reason).
struct Answers {
  absl::Mutex mu;
  std::map<int, int> finals ABSL_GUARDED_BY(mu);
  std::map<int, absl::Status> status ABSL_GUARDED_BY(mu);
  std::map<int, FinishReason> finish ABSL_GUARDED_BY(mu);
  std::map<int, std::vector<int32_t>> tokens ABSL_GUARDED_BY(mu);
  int total_finals ABSL_GUARDED_BY(mu) = 0;

  GenerateCallback For(int key) {
    return [this, key](const absl::StatusOr<GenerateChunk>& c) {
      absl::MutexLock lock(&mu);
      if (c.ok()) {
        tokens[key].insert(tokens[key].end(), c->token_ids.begin(),
                           c->token_ids.end());
        if (c->finish == FinishReason::kNone) return;
        finish[key] = c->finish;
      }
      status[key] = c.status();
      ++finals[key];
      ++total_finals;
    };
  }
  void WaitFinals(int n) {
    absl::MutexLock lock(&mu);
    std::pair<int*, int> want(&total_finals, n);
    mu.Await(absl::Condition(
        +[](std::pair<int*, int>* a) { return *a->first >= a->second; },
        &want));
  }
};

struct Fixture {
  std::unique_ptr<Tokenizer> tokenizer = WordTokenizer();
  RenderHook render;
  std::atomic<int> calls{0};
  std::unique_ptr<GenerateEngine> engine;

  explicit Fixture(int prep_threads = 1, int max_queue_requests = 1024) {
    GenerateEngineOptions o;
    o.max_queue_requests = max_queue_requests;
    o.prep_threads = prep_threads;
    SchedulerConfig& sc = o.scheduler;
    sc.max_model_len = 32;
    sc.max_waiting_requests = max_queue_requests;
    sc.kv_cache.num_blocks = 64;
    sc.kv_cache.block_size = 4;
    InputProcessorOptions io;
    io.max_input_tokens = sc.max_model_len;
    engine = MakeEngine(
        tokenizer.get(), std::move(o), std::make_unique<FakeRunner>(&calls),
        {}, std::make_unique<HookedInput>(&render, tokenizer.get(), io));
  }
  ~Fixture() { engine.reset(); }
};

GenerateParams Chat(const std::string& content, int max_tokens = 3) {
  GenerateParams p;
  p.messages.push_back({"user", content});
  p.sampling.max_tokens = max_tokens;
  return p;
}

GenerateParams Ids(std::vector<int32_t> ids, int max_tokens = 3) {
  GenerateParams p;
  p.prompt_token_ids = std::move(ids);
  p.sampling.max_tokens = max_tokens;
  return p;
}

// The chat template and tokenization run on the engine's prep worker,
// never on the submitting (gRPC callback) thread.
TEST(GenerateEngineTest, PromptPreparationRunsOnTheEngineNotTheSubmitter) {
  Fixture f;
  Answers answers;
  ASSERT_TRUE(f.engine->SubmitGenerate(Chat("hi"), answers.For(0)).ok());
  answers.WaitFinals(1);
  const std::vector<std::thread::id> threads = f.render.Threads();
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_NE(threads[0], std::this_thread::get_id());
  absl::MutexLock lock(&answers.mu);
  EXPECT_TRUE(answers.status[0].ok()) << answers.status[0];
  EXPECT_EQ(answers.finish[0], FinishReason::kLength);
  EXPECT_EQ(answers.tokens[0], (std::vector<int32_t>{kNext, kNext, kNext}));
}

// Errors found while preparing the prompt are the callback's final
// status (Submit accepted the request); each request is answered once and
// costs no model call. Checks that need no tokenizer stay in Submit.
TEST(GenerateEngineTest, PreparationErrorsAreTheCallbacksFinalStatus) {
  Fixture f;
  Answers answers;
  ASSERT_TRUE(f.engine
                  ->SubmitGenerate(Ids(std::vector<int32_t>(40, 2)),
                                   answers.For(0))
                  .ok());
  ASSERT_TRUE(f.engine->SubmitGenerate(Ids({2, 9}), answers.For(1)).ok());
  ASSERT_TRUE(f.engine->SubmitGenerate(Chat("bad"), answers.For(2)).ok());
  ASSERT_TRUE(
      f.engine->SubmitGenerate(Ids({2, 3}, /*max_tokens=*/31), answers.For(3))
          .ok());
  GenerateParams bad_sampling = Ids({2, 3});
  bad_sampling.sampling.temperature = -1.0f;
  std::atomic<int> never{0};
  auto refused = f.engine->SubmitGenerate(
      bad_sampling,
      [&never](const absl::StatusOr<GenerateChunk>&) { never.fetch_add(1); });
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  answers.WaitFinals(4);
  f.engine->Stop();
  absl::MutexLock lock(&answers.mu);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(answers.finals[k], 1) << k;
    EXPECT_EQ(answers.status[k].code(), absl::StatusCode::kInvalidArgument)
        << k << " " << answers.status[k];
  }
  EXPECT_NE(answers.status[0].message().find("the prompt has 40 tokens"),
            std::string::npos);
  EXPECT_NE(answers.status[1].message().find("outside the vocabulary"),
            std::string::npos);
  EXPECT_NE(answers.status[2].message().find("chat template"),
            std::string::npos);
  EXPECT_NE(answers.status[3].message().find("exceed the model's context"),
            std::string::npos);
  EXPECT_EQ(never.load(), 0);
  EXPECT_EQ(f.calls.load(), 0);
}

// --tokenization-workers 0: the prompt is prepared inside Submit, whose
// errors return from it (the callback never fires).
TEST(GenerateEngineTest, InlinePreparationReturnsErrorsFromSubmit) {
  Fixture f(/*prep_threads=*/0);
  std::atomic<int> never{0};
  auto bad = f.engine->SubmitGenerate(
      Ids(std::vector<int32_t>(40, 2)),
      [&never](const absl::StatusOr<GenerateChunk>&) { never.fetch_add(1); });
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_chat = f.engine->SubmitGenerate(
      Chat("bad"),
      [&never](const absl::StatusOr<GenerateChunk>&) { never.fetch_add(1); });
  EXPECT_EQ(bad_chat.status().code(), absl::StatusCode::kInvalidArgument);
  Answers answers;
  ASSERT_TRUE(f.engine->SubmitGenerate(Chat("hi"), answers.For(0)).ok());
  answers.WaitFinals(1);
  const std::vector<std::thread::id> threads = f.render.Threads();
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads[1], std::this_thread::get_id());
  f.engine->Stop();
  EXPECT_EQ(never.load(), 0);
  absl::MutexLock lock(&answers.mu);
  EXPECT_EQ(answers.finish[0], FinishReason::kLength);
}

// A request aborted while it is prepared, or while it waits for the prep
// worker, gets one final answer (CANCELLED) and never reaches the
// scheduler; the engine goes on serving.
TEST(GenerateEngineTest, AbortDuringPreparationAnswersOnceAndNeverSchedules) {
  Fixture f;
  Gate gate;
  f.render.gate = &gate;
  Answers answers;
  auto preparing = f.engine->SubmitGenerate(Chat("hi"), answers.For(0));
  ASSERT_TRUE(preparing.ok());
  gate.WaitEntered(1);  // the prep worker is inside the chat template
  auto waiting = f.engine->SubmitGenerate(Ids({2, 3}), answers.For(1));
  ASSERT_TRUE(waiting.ok());
  EXPECT_EQ(f.engine->Stats().waiting_requests, 2);
  (*preparing)->Abort();
  (*waiting)->Abort();
  (*waiting)->Abort();  // idempotent
  gate.Notify();
  answers.WaitFinals(2);
  EXPECT_EQ(f.calls.load(), 0);
  EngineStats s = f.engine->Stats();
  EXPECT_EQ(s.waiting_requests, 0);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);

  // Still serving.
  ASSERT_TRUE(f.engine->SubmitGenerate(Ids({2, 3, 4}), answers.For(2)).ok());
  answers.WaitFinals(3);
  f.engine->Stop();
  absl::MutexLock lock(&answers.mu);
  EXPECT_EQ(answers.total_finals, 3);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(answers.finals[k], 1) << k;
    EXPECT_TRUE(answers.status[k].ok()) << answers.status[k];
    EXPECT_EQ(answers.finish[k], FinishReason::kCancelled) << k;
    EXPECT_TRUE(answers.tokens[k].empty()) << k;
  }
  EXPECT_EQ(answers.finish[2], FinishReason::kLength);
}

TEST(GenerateEngineTest, DeadlinePassedBeforePreparationIsTheAnswer) {
  Fixture f;
  Answers answers;
  GenerateParams p = Chat("hi");
  p.deadline = absl::Now() - absl::Seconds(1);
  ASSERT_TRUE(f.engine->SubmitGenerate(p, answers.For(0)).ok());
  answers.WaitFinals(1);
  EXPECT_TRUE(f.render.Threads().empty());  // no preparation either
  EXPECT_EQ(f.calls.load(), 0);
  absl::MutexLock lock(&answers.mu);
  EXPECT_EQ(answers.status[0].code(), absl::StatusCode::kDeadlineExceeded);
}

// Admission counts the requests waiting for preparation: the queue limit
// is exact and answered at Submit.
TEST(GenerateEngineTest, QueueLimitCountsRequestsBeingPrepared) {
  Fixture f(/*prep_threads=*/1, /*max_queue_requests=*/2);
  Gate gate;
  f.render.gate = &gate;
  Answers answers;
  ASSERT_TRUE(f.engine->SubmitGenerate(Chat("hi"), answers.For(0)).ok());
  gate.WaitEntered(1);
  ASSERT_TRUE(f.engine->SubmitGenerate(Ids({2}), answers.For(1)).ok());
  std::atomic<int> never{0};
  auto over = f.engine->SubmitGenerate(
      Ids({2}),
      [&never](const absl::StatusOr<GenerateChunk>&) { never.fetch_add(1); });
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  gate.Notify();
  answers.WaitFinals(2);
  f.engine->Stop();
  EXPECT_EQ(never.load(), 0);
  absl::MutexLock lock(&answers.mu);
  EXPECT_EQ(answers.finish[0], FinishReason::kLength);
  EXPECT_EQ(answers.finish[1], FinishReason::kLength);
}

// Stop while requests wait for the prep worker: each gets one final answer
// (UNAVAILABLE for those never prepared), the worker is joined, and later
// submits are refused.
TEST(GenerateEngineTest, StopWithQueuedPreparationAnswersEveryRequest) {
  Fixture f;
  Gate gate;
  f.render.gate = &gate;
  Answers answers;
  ASSERT_TRUE(f.engine->SubmitGenerate(Chat("hi"), answers.For(0)).ok());
  gate.WaitEntered(1);
  int submitted = 1;
  for (; submitted < 4; ++submitted) {
    ASSERT_TRUE(
        f.engine->SubmitGenerate(Ids({2, 3}), answers.For(submitted)).ok());
  }
  std::thread stopper([&f] { f.engine->Stop(); });
  // Stop waits for the blocked worker. Once it has begun, Submit answers
  // UNAVAILABLE; what was accepted before waits behind the blocked worker.
  while (true) {
    auto h = f.engine->SubmitGenerate(Ids({2, 3}), answers.For(submitted));
    if (!h.ok()) {
      if (h.status().code() == absl::StatusCode::kUnavailable) break;
      EXPECT_EQ(h.status().code(), absl::StatusCode::kResourceExhausted);
    } else {
      ++submitted;
    }
    std::this_thread::yield();
  }
  gate.Notify();
  stopper.join();
  absl::MutexLock lock(&answers.mu);
  EXPECT_EQ(answers.total_finals, submitted);
  for (int k = 0; k < submitted; ++k) {
    EXPECT_EQ(answers.finals[k], 1) << k;
  }
  // The one being prepared went to the loop, which ran it or answered it
  // at shutdown.
  EXPECT_TRUE(answers.status[0].ok() ||
              answers.status[0].code() == absl::StatusCode::kUnavailable)
      << answers.status[0];
  for (int k = 1; k < submitted; ++k) {
    EXPECT_EQ(answers.status[k].code(), absl::StatusCode::kUnavailable)
        << k << " " << answers.status[k];
  }
  EXPECT_EQ(f.render.Threads().size(), 1u);
}


// A fake model whose next token (2..7: never EOS or unknown) is a hash of
// the whole sequence so far, read back from what the plans fed it, so the
// output depends on every token. Notifies `reached` once a sequence has
// been fed `reach_len` tokens.
class PrefixHashRunner : public StepRunner {
 public:
  static int32_t Next(const std::vector<int32_t>& seq) {
    uint64_t h = 1469598103934665603ULL;
    for (int32_t t : seq) {
      h ^= static_cast<uint64_t>(t) + 0x9e37;
      h *= 1099511628211ULL;
    }
    return 2 + static_cast<int32_t>((h >> 17) % 6);
  }
  // The reference: what a correct engine generates.
  static std::vector<int32_t> Generate(std::vector<int32_t> prompt, int n) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(Next(prompt));
      prompt.push_back(out.back());
    }
    return out;
  }

  PrefixHashRunner(absl::Notification* reached, size_t reach_len)
      : reached_(reached), reach_len_(reach_len) {}

  absl::StatusOr<BatchResult> Execute(const BatchPlan& plan) override {
    BatchResult r;
    for (const SequencePlan& s : plan.seqs) {
      std::vector<int32_t>& h = history_[s.seq_id];
      h.resize(static_cast<size_t>(s.start_pos));
      h.insert(h.end(), s.token_ids.begin(), s.token_ids.end());
      if (reached_ != nullptr && h.size() >= reach_len_ &&
          !reached_->HasBeenNotified()) {
        reached_->Notify();
      }
      SequenceResult out;
      out.seq_id = s.seq_id;
      out.output = s.output;
      if (s.output == StepOutput::kLastLogits) {
        out.rows = 1;
        out.cols = kVocab;
        out.values.assign(kVocab, 0.0f);
        out.values[Next(h)] = 10.0f;
      }
      r.seqs.push_back(std::move(out));
    }
    return r;
  }

 private:
  absl::Notification* reached_;
  size_t reach_len_;
  std::map<int64_t, std::vector<int32_t>> history_;  // engine thread only
};

std::unique_ptr<GenerateEngine> HashEngine(const Tokenizer* tokenizer,
                                           bool overlap,
                                           absl::Notification* reached = nullptr,
                                           size_t reach_len = 0) {
  GenerateEngineOptions o;
  o.prep_threads = 1;
  o.overlap_output = overlap;
  SchedulerConfig& sc = o.scheduler;
  sc.max_model_len = 64;
  sc.max_batched_tokens = 16;
  sc.max_prefill_tokens_while_decoding = 3;
  sc.kv_cache.num_blocks = 128;
  sc.kv_cache.block_size = 4;
  return MakeEngine(tokenizer, std::move(o),
                    std::make_unique<PrefixHashRunner>(reached, reach_len));
}

// Every chunk of every request, in order; counts chunks after a final one.
struct Transcript {
  struct Chunk {
    std::string text;
    std::vector<int32_t> token_ids;
    FinishReason finish = FinishReason::kNone;
    std::string stop_reason;
    int64_t completion_tokens = 0;
    bool operator==(const Chunk& o) const {
      return text == o.text && token_ids == o.token_ids &&
             finish == o.finish && stop_reason == o.stop_reason &&
             completion_tokens == o.completion_tokens;
    }
  };
  absl::Mutex mu;
  std::map<int, std::vector<Chunk>> chunks ABSL_GUARDED_BY(mu);
  std::map<int, bool> done ABSL_GUARDED_BY(mu);
  int after_final ABSL_GUARDED_BY(mu) = 0;
  int finals ABSL_GUARDED_BY(mu) = 0;
  // Entered (on the output thread) by the final chunk of `gated`.
  Gate* gate = nullptr;
  int gated = -1;

  GenerateCallback For(int key) {
    return [this, key](const absl::StatusOr<GenerateChunk>& c) {
      ASSERT_TRUE(c.ok()) << c.status();
      if (c->finish != FinishReason::kNone && key == gated) gate->Enter();
      absl::MutexLock lock(&mu);
      if (done[key]) ++after_final;
      chunks[key].push_back({c->text, c->token_ids, c->finish, c->stop_reason,
                             c->usage.completion_tokens});
      if (c->finish != FinishReason::kNone) {
        done[key] = true;
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
  std::string Text(int key) {
    absl::MutexLock lock(&mu);
    std::string out;
    for (const Chunk& c : chunks[key]) out += c.text;
    return out;
  }
};

// The number of generated tokens after which `stop` first appears in their
// text (what the stop checker must end at); 0 if never.
size_t StopIndex(const Tokenizer& tok, const std::vector<int32_t>& ids,
                 const std::string& stop) {
  for (size_t k = 1; k <= ids.size(); ++k) {
    auto text = tok.Decode(absl::MakeConstSpan(ids).first(k), true);
    EXPECT_TRUE(text.ok());
    if (text.ok() && text->find(stop) != std::string::npos) return k;
  }
  return 0;
}

GenerateParams HashRequest(int i, std::vector<std::string> stop) {
  GenerateParams p;
  p.prompt_token_ids = {2 + i % 6, 3, 2 + (i * 5) % 6};
  p.sampling.temperature = 0.0f;  // greedy
  p.sampling.max_tokens = 6 + i % 5;
  p.sampling.stop = std::move(stop);
  return p;
}

// Streaming on the output worker (overlapping the next step) and on the
// loop thread give the same chunks, and both the reference tokens: stop
// strings end the sequence exactly where the text first contains them,
// with nothing after the final chunk.
TEST(GenerateEngineTest, OverlappedOutputStreamsTheSameChunksAsInline) {
  std::unique_ptr<Tokenizer> tok = WordTokenizer();
  constexpr int kRequests = 8;
  std::map<int, std::vector<Transcript::Chunk>> runs[2];
  for (int overlap = 0; overlap < 2; ++overlap) {
    std::unique_ptr<GenerateEngine> engine = HashEngine(tok.get(), overlap);
    Transcript t;
    for (int i = 0; i < kRequests; ++i) {
      // Every other request stops at the word of its third reference
      // token.
      std::vector<std::string> stop;
      if (i % 2 == 0) {
        GenerateParams p = HashRequest(i, {});
        std::vector<int32_t> ref =
            PrefixHashRunner::Generate(p.prompt_token_ids, 3);
        stop.push_back(tok->IdToToken(ref[2]));
      }
      ASSERT_TRUE(
          engine->SubmitGenerate(HashRequest(i, stop), t.For(i)).ok());
    }
    t.WaitFinals(kRequests);
    engine->Stop();
    absl::MutexLock lock(&t.mu);
    EXPECT_EQ(t.after_final, 0);
    runs[overlap] = t.chunks;
    for (int i = 0; i < kRequests; ++i) {
      GenerateParams p = HashRequest(i, {});
      const std::vector<int32_t> ref = PrefixHashRunner::Generate(
          p.prompt_token_ids, p.sampling.max_tokens);
      std::vector<int32_t> got;
      std::string text;
      for (const Transcript::Chunk& c : t.chunks[i]) {
        got.insert(got.end(), c.token_ids.begin(), c.token_ids.end());
        text += c.text;
      }
      const Transcript::Chunk& last = t.chunks[i].back();
      if (i % 2 == 0) {
        const std::string stop = tok->IdToToken(
            PrefixHashRunner::Generate(p.prompt_token_ids, 3)[2]);
        const size_t k = StopIndex(*tok, ref, stop);
        ASSERT_GT(k, 0u);
        EXPECT_EQ(got, std::vector<int32_t>(ref.begin(), ref.begin() + k))
            << "request " << i << " overlap " << overlap;
        EXPECT_EQ(last.finish, FinishReason::kStop);
        EXPECT_EQ(last.stop_reason, stop);
        EXPECT_EQ(text.find(stop), std::string::npos) << text;
      } else {
        EXPECT_EQ(got, ref) << "request " << i << " overlap " << overlap;
        EXPECT_EQ(last.finish, FinishReason::kLength);
      }
      EXPECT_EQ(last.completion_tokens, static_cast<int64_t>(got.size()));
    }
  }
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_TRUE(runs[0][i] == runs[1][i]) << "request " << i;
  }
}

// The loop does not wait for the output worker: while the worker is still
// sending the final chunk of a stop string, the loop keeps stepping that
// sequence (here to its max_tokens). Those tokens are never streamed, and
// the request is answered once.
TEST(GenerateEngineTest, TokensSampledAfterAStopStringAreNeverStreamed) {
  std::unique_ptr<Tokenizer> tok = WordTokenizer();
  GenerateParams p = HashRequest(1, {});
  p.sampling.max_tokens = 12;
  const std::vector<int32_t> ref =
      PrefixHashRunner::Generate(p.prompt_token_ids, 12);
  const std::string stop = tok->IdToToken(ref[1]);
  p.sampling.stop = {stop};
  const size_t k = StopIndex(*tok, ref, stop);
  ASSERT_GT(k, 0u);
  ASSERT_LT(k, 12u);
  // The loop feeds the 11th generated token only if it went on after the
  // stop.
  absl::Notification went_on;
  std::unique_ptr<GenerateEngine> engine = HashEngine(
      tok.get(), /*overlap=*/true, &went_on, p.prompt_token_ids.size() + 11);
  Gate gate;
  Transcript t;
  t.gate = &gate;
  t.gated = 0;
  ASSERT_TRUE(engine->SubmitGenerate(p, t.For(0)).ok());
  gate.WaitEntered(1);        // the worker is sending the final chunk
  went_on.WaitForNotification();  // and the loop went on to max_tokens
  gate.Notify();
  t.WaitFinals(1);
  engine->Stop();
  EXPECT_EQ(t.Tokens(0), std::vector<int32_t>(ref.begin(), ref.begin() + k));
  EXPECT_EQ(t.Text(0).find(stop), std::string::npos);
  absl::MutexLock lock(&t.mu);
  EXPECT_EQ(t.after_final, 0);
  EXPECT_EQ(t.finals, 1);
  EXPECT_EQ(t.chunks[0].back().finish, FinishReason::kStop);
  EXPECT_EQ(t.chunks[0].back().completion_tokens, static_cast<int64_t>(k));
  EXPECT_EQ(engine->Stats().running_requests, 0);
}

}  // namespace
}  // namespace inferd
