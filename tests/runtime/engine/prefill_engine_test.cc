#include "runtime/engine/prefill_engine.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/common/registry.h"
#include "runtime/engine/components.h"
#include "runtime/engine/prefill_scheduler.h"
#include "runtime/engine/workflow.h"
#include "tests/runtime/engine/test_gate.h"

namespace inferd {
namespace {

std::shared_ptr<PrefillWork> Work(std::vector<int> lengths,
                                  std::vector<absl::Status>* answers = nullptr) {
  auto w = std::make_shared<PrefillWork>();
  for (int len : lengths) {
    PrefillSequence s;
    s.ids.assign(len, 7);
    w->seqs.push_back(s);
  }
  w->handle = std::make_shared<RequestHandle>();
  w->arrival = absl::Now();
  {
    absl::MutexLock lock(&w->mu);
    w->results.resize(w->seqs.size());
  }
  w->done = [answers](absl::StatusOr<std::vector<SequenceResult>> r) {
    if (answers) answers->push_back(r.status());
  };
  return w;
}

TEST(PrefillOnlySchedulerTest, PacksWithinTokenBudgetAndSeqCap) {
  PrefillSchedulerOptions o;
  o.max_batched_tokens = 100;
  o.max_seqs = 3;
  PrefillOnlyScheduler s(o);
  ASSERT_TRUE(s.Submit(Work({40, 40})).ok());
  ASSERT_TRUE(s.Submit(Work({30, 10, 10, 10})).ok());
  std::vector<std::vector<int>> batches;
  int total_seqs = 0;
  while (total_seqs < 6) {
    auto batch = s.NextBatch();
    ASSERT_FALSE(batch.empty());
    int tokens = 0;
    std::vector<int> lens;
    for (const auto& item : batch) {
      int len = static_cast<int>(item.work->seqs[item.seq_index].ids.size());
      tokens += len;
      lens.push_back(len);
    }
    EXPECT_LE(tokens, o.max_batched_tokens);
    EXPECT_LE(static_cast<int>(batch.size()), o.max_seqs);
    total_seqs += static_cast<int>(batch.size());
    batches.push_back(lens);
  }
  // Arrival order is kept: 40+40 fill the first batch (the 30 does not fit),
  // then 30, 10, 10 (cap 3), then the last 10.
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (std::vector<int>{40, 40}));
  EXPECT_EQ(batches[1], (std::vector<int>{30, 10, 10}));
  EXPECT_EQ(batches[2], (std::vector<int>{10}));
  EXPECT_EQ(s.waiting_requests(), 0);
  EXPECT_EQ(s.waiting_tokens(), 0);
}

TEST(PrefillOnlySchedulerTest, SequenceLongerThanBudgetRunsAlone) {
  PrefillSchedulerOptions o;
  o.max_batched_tokens = 16;
  PrefillOnlyScheduler s(o);
  ASSERT_TRUE(s.Submit(Work({64, 4})).ok());
  auto first = s.NextBatch();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].work->seqs[first[0].seq_index].ids.size(), 64u);
  auto second = s.NextBatch();
  ASSERT_EQ(second.size(), 1u);
}

TEST(PrefillOnlySchedulerTest, RejectsWhenQueueFull) {
  PrefillSchedulerOptions o;
  o.max_queue_requests = 2;
  o.max_queue_tokens = 100;
  PrefillOnlyScheduler s(o);
  ASSERT_TRUE(s.Submit(Work({10})).ok());
  ASSERT_TRUE(s.Submit(Work({10})).ok());
  absl::Status full = s.Submit(Work({10}));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("max-queue-requests"), std::string::npos);

  PrefillOnlyScheduler t(o);
  ASSERT_TRUE(t.Submit(Work({90})).ok());
  absl::Status tokens = t.Submit(Work({20}));
  EXPECT_EQ(tokens.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(tokens.message().find("max-queue-tokens"), std::string::npos);
}

// Runs `batch` as a replica loop would: each sequence finishes with
// `status`.
void FinishBatch(const std::vector<PrefillBatchItem>& batch,
                 const absl::Status& status) {
  for (const PrefillBatchItem& item : batch) {
    item.work->FinishSeqs(1, status);
  }
}

TEST(PrefillOnlySchedulerTest, CloseAnswersRequestPartlyDispatched) {
  PrefillSchedulerOptions o;
  o.max_seqs = 1;
  PrefillOnlyScheduler s(o);
  std::vector<absl::Status> answers;
  ASSERT_TRUE(s.Submit(Work({5, 5, 5}, &answers)).ok());
  auto running = s.NextBatch();  // sequence 0 runs; 1 and 2 wait
  ASSERT_EQ(running.size(), 1u);
  s.Close();
  EXPECT_TRUE(answers.empty());  // sequence 0 is still running
  FinishBatch(running, absl::OkStatus());
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(s.NextBatch().empty());
}

TEST(PrefillOnlySchedulerTest, CancelStopsTheRestOfARunningRequest) {
  PrefillSchedulerOptions o;
  o.max_seqs = 1;
  PrefillOnlyScheduler s(o);
  std::vector<absl::Status> answers;
  auto big = Work({5, 5, 5, 5}, &answers);
  ASSERT_TRUE(s.Submit(big).ok());
  auto live = Work({3});
  ASSERT_TRUE(s.Submit(live).ok());
  auto first = s.NextBatch();
  ASSERT_EQ(first.size(), 1u);
  big->handle->Abort();
  // The next batch skips the cancelled request's three other sequences.
  auto next = s.NextBatch();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].work.get(), live.get());
  EXPECT_EQ(s.waiting_tokens(), 0);
  EXPECT_TRUE(answers.empty());  // its first sequence is still running
  FinishBatch(first, absl::OkStatus());
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].code(), absl::StatusCode::kCancelled);
}

TEST(PrefillOnlySchedulerTest, DeadlineStopsTheRestOfARunningRequest) {
  PrefillSchedulerOptions o;
  o.max_seqs = 1;
  PrefillOnlyScheduler s(o);
  std::vector<absl::Status> answers;
  auto big = Work({5, 5}, &answers);
  ASSERT_TRUE(s.Submit(big).ok());
  auto first = s.NextBatch();
  ASSERT_EQ(first.size(), 1u);
  FinishBatch(first, absl::OkStatus());
  big->deadline = absl::Now() - absl::Seconds(1);  // expires mid-request
  ASSERT_TRUE(s.Submit(Work({3})).ok());
  auto next = s.NextBatch();
  ASSERT_EQ(next.size(), 1u);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(PrefillOnlySchedulerTest, EarlierBatchFailureIsTheAnswer) {
  PrefillSchedulerOptions o;
  o.max_seqs = 1;
  PrefillOnlyScheduler s(o);
  std::vector<absl::Status> answers;
  ASSERT_TRUE(s.Submit(Work({5, 5}, &answers)).ok());
  auto first = s.NextBatch();
  auto second = s.NextBatch();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  FinishBatch(first, absl::InternalError("the kernel failed"));
  FinishBatch(second, absl::OkStatus());
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].code(), absl::StatusCode::kInternal);
  EXPECT_EQ(answers[0].message(), "the kernel failed");
}

TEST(PrefillOnlySchedulerTest, OnlyDroppedRequestsDoNotEndTheLoop) {
  // A pass that finds nothing but cancelled requests must not return an
  // empty batch: replica loops read that as "closed" and exit, and the
  // model then never answers again.
  PrefillOnlyScheduler s(PrefillSchedulerOptions{});
  std::vector<absl::Status> answers;
  auto cancelled = Work({5});
  // The live request arrives only once the cancelled one was answered,
  // i.e. after the pass that dropped it.
  cancelled->done = [&](absl::StatusOr<std::vector<SequenceResult>> r) {
    answers.push_back(r.status());
    ASSERT_TRUE(s.Submit(Work({4})).ok());
  };
  ASSERT_TRUE(s.Submit(cancelled).ok());
  cancelled->handle->Abort();
  std::vector<PrefillBatchItem> batch = s.NextBatch();
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].work->seqs[0].ids.size(), 4u);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].code(), absl::StatusCode::kCancelled);
}

TEST(PrefillOnlySchedulerTest, DropsAbortedAndExpiredBeforeScheduling) {
  PrefillOnlyScheduler s(PrefillSchedulerOptions{});
  std::vector<absl::Status> answers;
  auto aborted = Work({5}, &answers);
  auto expired = Work({5}, &answers);
  expired->deadline = absl::Now() - absl::Seconds(1);
  auto live = Work({5}, &answers);
  ASSERT_TRUE(s.Submit(aborted).ok());
  ASSERT_TRUE(s.Submit(expired).ok());
  ASSERT_TRUE(s.Submit(live).ok());
  aborted->handle->Abort();
  std::vector<PrefillBatchItem> batch = s.NextBatch();
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].work.get(), live.get());
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(answers[1].code(), absl::StatusCode::kDeadlineExceeded);
}

using testing_internal::Gate;

// A fake model: hidden state row i of a sequence = [sum of ids, i, len];
// classifier logits = [len, -len]. Counts calls; can block until released.
class FakeRunner : public StepRunner {
 public:
  FakeRunner(std::atomic<int>* calls, Gate* gate)
      : calls_(calls), gate_(gate) {}
  absl::StatusOr<BatchResult> Execute(const BatchPlan& plan) override {
    if (gate_ != nullptr) gate_->Enter();
    calls_->fetch_add(1);
    BatchResult r;
    for (const SequencePlan& s : plan.seqs) {
      SequenceResult out;
      out.seq_id = s.seq_id;
      out.output = s.output;
      const float len = static_cast<float>(s.token_ids.size());
      float sum = 0;
      for (int32_t id : s.token_ids) sum += static_cast<float>(id);
      if (s.output == StepOutput::kClassifierLogits) {
        out.rows = 1;
        out.cols = 2;
        out.values = {len, -len};
      } else if (s.output == StepOutput::kLastHiddenState) {
        out.rows = 1;
        out.cols = 3;
        out.values = {sum, len - 1, len};
      } else if (s.output == StepOutput::kFirstHiddenState) {
        out.rows = 1;
        out.cols = 3;
        out.values = {sum, 0.0f, len};
      } else if (s.output == StepOutput::kMeanHiddenState) {
        // Row i is {sum, i, len}: the mean of rows [start, n).
        const int32_t n = static_cast<int32_t>(s.token_ids.size());
        const int32_t start = std::clamp(s.pool_start, 0, n - 1);
        out.rows = 1;
        out.cols = 3;
        out.values = {sum, 0.5f * static_cast<float>(start + n - 1), len};
      } else {
        out.rows = static_cast<int32_t>(s.token_ids.size());
        out.cols = 3;
        for (int32_t i = 0; i < out.rows; ++i) {
          out.values.insert(out.values.end(), {sum, float(i), len});
        }
      }
      r.seqs.push_back(std::move(out));
    }
    return r;
  }

 private:
  std::atomic<int>* calls_;
  Gate* gate_;
};

// A whitespace tokenizer is not available without files, so these engine
// tests feed token ids directly.
// The engine of the registered workflow `workflow`, its components built
// from the registry by the recipe's names (mean pooling for embedders).
std::unique_ptr<PrefillEngine> MakeEngine(
    const std::string& workflow, std::atomic<int>* calls, Gate* gate,
    int replicas = 1, int max_queue_requests = 1024,
    std::unique_ptr<InputProcessor> input = nullptr, int prep_threads = 1) {
  auto w = Workflows().Get(workflow);
  EXPECT_TRUE(w.ok()) << w.status();
  PrefillEngineOptions o;
  o.workflow = w->name;
  o.tasks = w->tasks;
  o.replicas = replicas;
  o.default_normalize = false;
  o.max_queue_requests = max_queue_requests;
  o.prep_threads = prep_threads;
  PrefillComponents c;
  InputProcessorContext ic;
  ic.options.max_input_tokens = 8;
  c.input = input != nullptr
                ? std::move(input)
                : std::move(InputProcessors()
                                .Get(w->input_processor)
                                .value()(ic)
                                .value());
  PrefillSchedulerOptions so;
  so.max_queue_requests = max_queue_requests;
  c.scheduler = PrefillSchedulers().Get(w->scheduler).value()(so);
  const std::string output = w->output_processor == kPoolingOutput
                                 ? PoolingComponent("mean")
                                 : w->output_processor;
  auto make_output = [&](const std::string& name) {
    return std::move(OutputProcessors()
                         .Get(name)
                         .value()(OutputProcessorContext{})
                         .value());
  };
  c.output = make_output(output);
  c.poolings["cls"] = make_output("pooling_cls");
  c.poolings["mean"] = make_output("pooling_mean");
  auto e = PrefillEngine::Create(
      o, std::move(c),
      [&](int) -> absl::StatusOr<std::unique_ptr<StepRunner>> {
        return std::unique_ptr<StepRunner>(new FakeRunner(calls, gate));
      });
  EXPECT_TRUE(e.ok()) << e.status();
  return std::move(e).value();
}

EmbedParams Ids(std::vector<std::vector<int32_t>> ids) {
  EmbedParams p;
  p.token_ids = std::move(ids);
  return p;
}

TEST(PrefillEngineTest, EmbedsPoolsAndAnswersInInputOrder) {
  std::atomic<int> calls{0};
  auto engine = MakeEngine("encoder_embed", &calls, nullptr);
  absl::Notification done;
  absl::StatusOr<EmbedResult> got;
  auto h = engine->SubmitEmbed(Ids({{1, 2, 3}, {5}}), [&](absl::StatusOr<EmbedResult> r) {
    got = std::move(r);
    done.Notify();
  });
  ASSERT_TRUE(h.ok());
  done.WaitForNotification();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->embeddings.size(), 2u);
  // Mean over rows [sum, i, len]: [6, 1, 3] and [5, 0, 1].
  EXPECT_EQ(got->embeddings[0], (std::vector<float>{6, 1, 3}));
  EXPECT_EQ(got->embeddings[1], (std::vector<float>{5, 0, 1}));
  EXPECT_EQ(got->total_tokens, 4);
  EXPECT_EQ(got->tokens, (std::vector<int32_t>{3, 1}));
}

TEST(PrefillEngineTest, NormalizesAndCutsDimensionsOnRequest) {
  std::atomic<int> calls{0};
  auto engine = MakeEngine("encoder_embed", &calls, nullptr);
  EmbedParams p = Ids({{3, 4}});
  p.pooling = "cls";
  p.normalize = true;
  p.dimensions = 2;
  absl::Notification done;
  absl::StatusOr<EmbedResult> got;
  ASSERT_TRUE(engine->SubmitEmbed(p, [&](absl::StatusOr<EmbedResult> r) {
    got = std::move(r);
    done.Notify();
  }).ok());
  done.WaitForNotification();
  ASSERT_TRUE(got.ok());
  // CLS row = [7, 0, 2] -> cut to [7, 0] -> normalized [1, 0].
  ASSERT_EQ(got->embeddings[0].size(), 2u);
  EXPECT_FLOAT_EQ(got->embeddings[0][0], 1.0f);
  EXPECT_FLOAT_EQ(got->embeddings[0][1], 0.0f);
}

TEST(PrefillEngineTest, TooLongInputIsInvalidUnlessTruncated) {
  std::atomic<int> calls{0};
  auto engine = MakeEngine("encoder_embed", &calls, nullptr);
  // Input processing runs on the engine's prep worker: the error comes
  // through the callback, and costs no model call.
  absl::Notification bad_done;
  absl::Status bad;
  ASSERT_TRUE(engine
                  ->SubmitEmbed(Ids({std::vector<int32_t>(9, 1)}),
                                [&](absl::StatusOr<EmbedResult> r) {
                                  bad = r.status();
                                  bad_done.Notify();
                                })
                  .ok());
  bad_done.WaitForNotification();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("9 tokens"), std::string::npos);
  EXPECT_NE(bad.message().find("at most 8"), std::string::npos);
  EXPECT_EQ(calls.load(), 0);

  EmbedParams p = Ids({std::vector<int32_t>(9, 1)});
  p.truncate = true;
  absl::Notification done;
  absl::StatusOr<EmbedResult> got;
  ASSERT_TRUE(engine->SubmitEmbed(p, [&](absl::StatusOr<EmbedResult> r) {
    got = std::move(r);
    done.Notify();
  }).ok());
  done.WaitForNotification();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->tokens[0], 8);
}

// An input processor that records the threads it runs on.
class RecordingInput : public InputProcessor {
 public:
  absl::string_view name() const override { return "recording"; }
  absl::StatusOr<std::vector<PrefillSequence>> ProcessEmbed(
      const EmbedParams& params) const override {
    absl::MutexLock lock(&mu_);
    threads_.push_back(std::this_thread::get_id());
    std::vector<PrefillSequence> out;
    for (const auto& ids : params.token_ids) out.push_back({ids, {}, 0});
    return out;
  }
  // Waits until `n` requests were processed; their threads.
  std::vector<std::thread::id> WaitProcessed(size_t n) const {
    absl::MutexLock lock(&mu_);
    std::pair<const std::vector<std::thread::id>*, size_t> want(&threads_, n);
    mu_.Await(absl::Condition(
        +[](std::pair<const std::vector<std::thread::id>*, size_t>* a) {
          return a->first->size() >= a->second;
        },
        &want));
    return threads_;
  }

 private:
  mutable absl::Mutex mu_;
  mutable std::vector<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
};

// Tokenization runs on the engine's own worker, never on the submitting
// (gRPC callback) thread, and the next requests are prepared while a
// batch runs.
TEST(PrefillEngineTest, InputProcessingRunsOnTheEngineWhileABatchRuns) {
  std::atomic<int> calls{0};
  Gate gate;
  auto input = std::make_unique<RecordingInput>();
  const RecordingInput* recorder = input.get();
  auto engine = MakeEngine("encoder_embed", &calls, &gate, 1, 1024,
                           std::move(input));
  absl::Mutex mu;
  int answered = 0;
  auto cb = [&](absl::StatusOr<EmbedResult> r) {
    EXPECT_TRUE(r.ok()) << r.status();
    absl::MutexLock lock(&mu);
    ++answered;
  };
  ASSERT_TRUE(engine->SubmitEmbed(Ids({{1, 2}}), cb).ok());
  gate.WaitEntered(1);  // batch 1 is running (and blocked)
  ASSERT_TRUE(engine->SubmitEmbed(Ids({{3}}), cb).ok());
  ASSERT_TRUE(engine->SubmitEmbed(Ids({{4}, {5}}), cb).ok());
  // Both were prepared while batch 1 still runs.
  const std::vector<std::thread::id> threads = recorder->WaitProcessed(3);
  EXPECT_EQ(calls.load(), 0);
  for (const std::thread::id& t : threads) {
    EXPECT_NE(t, std::this_thread::get_id());
  }
  EXPECT_EQ(engine->Stats().waiting_requests, 2);
  gate.Notify();
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(mu.AwaitWithTimeout(
      absl::Condition(+[](int* n) { return *n >= 3; }, &answered),
      absl::Seconds(60)));
}

// --tokenization-workers 0: the input processor runs inside Submit*, so
// its errors return from it (and the callback never fires).
TEST(PrefillEngineTest, InlineTokenizationReturnsInputErrorsFromSubmit) {
  std::atomic<int> calls{0};
  auto engine = MakeEngine("encoder_embed", &calls, nullptr, 1, 1024, nullptr,
                           /*prep_threads=*/0);
  std::atomic<int> callbacks{0};
  auto bad = engine->SubmitEmbed(
      Ids({std::vector<int32_t>(9, 1)}),
      [&](absl::StatusOr<EmbedResult>) { callbacks.fetch_add(1); });
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  absl::Notification done;
  absl::StatusOr<EmbedResult> got;
  ASSERT_TRUE(engine->SubmitEmbed(Ids({{1, 2, 3}}),
                                  [&](absl::StatusOr<EmbedResult> r) {
                                    got = std::move(r);
                                    done.Notify();
                                  })
                  .ok());
  done.WaitForNotification();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->tokens[0], 3);
  EXPECT_EQ(callbacks.load(), 0);
}

TEST(PrefillEngineTest, AbortBeforeRunCostsNoModelCall) {
  std::atomic<int> calls{0};
  Gate gate;
  auto engine = MakeEngine("encoder_embed", &calls, &gate);
  // The first request occupies the (blocked) replica; the second waits in
  // the queue and is aborted there.
  absl::Notification first_done, second_done;
  absl::Status second_status;
  ASSERT_TRUE(engine->SubmitEmbed(Ids({{1}}), [&](absl::StatusOr<EmbedResult>) {
    first_done.Notify();
  }).ok());
  gate.WaitEntered(1);  // the replica took it
  auto h = engine->SubmitEmbed(Ids({{2}}), [&](absl::StatusOr<EmbedResult> r) {
    second_status = r.status();
    second_done.Notify();
  });
  ASSERT_TRUE(h.ok());
  (*h)->Abort();
  gate.Notify();
  first_done.WaitForNotification();
  second_done.WaitForNotification();
  EXPECT_EQ(second_status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls.load(), 1);  // only the first request ran
  EXPECT_EQ(engine->Stats().model_calls, 1);
}

TEST(PrefillEngineTest, QueueOverflowIsResourceExhaustedAtOnce) {
  std::atomic<int> calls{0};
  Gate gate;
  auto engine = MakeEngine("encoder_embed", &calls, &gate, 1,
                           /*max_queue_requests=*/2);
  absl::Mutex mu;
  int answered = 0;
  auto cb = [&](absl::StatusOr<EmbedResult>) {
    absl::MutexLock lock(&mu);
    ++answered;
  };
  ASSERT_TRUE(engine->SubmitEmbed(Ids({{1}}), cb).ok());
  gate.WaitEntered(1);  // taken by the blocked replica
  ASSERT_TRUE(engine->SubmitEmbed(Ids({{1}}), cb).ok());
  ASSERT_TRUE(engine->SubmitEmbed(Ids({{1}}), cb).ok());
  auto over = engine->SubmitEmbed(Ids({{1}}), cb);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  gate.Notify();
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(mu.AwaitWithTimeout(
      absl::Condition(+[](int* n) { return *n >= 3; }, &answered),
      absl::Seconds(60)));
  EXPECT_EQ(answered, 3);
}

TEST(PrefillEngineTest, RejectsTasksOutsideItsWorkflow) {
  std::atomic<int> calls{0};
  auto engine = MakeEngine("encoder_classify", &calls, nullptr);
  // Embedding is not this workflow's task.
  auto embed = engine->SubmitEmbed(Ids({{1}}), [](absl::StatusOr<EmbedResult>) {});
  EXPECT_EQ(embed.status().code(), absl::StatusCode::kFailedPrecondition);
  auto rerank = engine->SubmitRerank(RerankParams{}, [](absl::StatusOr<RerankResult>) {});
  EXPECT_EQ(rerank.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PrefillEngineTest, StopAnswersQueuedRequestsUnavailable) {
  std::atomic<int> calls{0};
  Gate gate;
  auto engine = MakeEngine("encoder_embed", &calls, &gate);
  std::vector<absl::Status> answers;
  absl::Mutex mu;
  auto cb = [&](absl::StatusOr<EmbedResult> r) {
    absl::MutexLock lock(&mu);
    answers.push_back(r.status());
  };
  ASSERT_TRUE(engine->SubmitEmbed(Ids({{1}}), cb).ok());
  gate.WaitEntered(1);
  ASSERT_TRUE(engine->SubmitEmbed(Ids({{1}}), cb).ok());
  std::thread stopper([&] { engine->Stop(); });
  // Stop closes the scheduler (answering the queued request) before it
  // waits for the blocked replica.
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](std::vector<absl::Status>* a) {
      return !a->empty();
    }, &answers));
  }
  gate.Notify();
  stopper.join();
  absl::MutexLock lock(&mu);
  ASSERT_EQ(answers.size(), 2u);
  int unavailable = 0;
  for (const absl::Status& s : answers) {
    unavailable += s.code() == absl::StatusCode::kUnavailable;
  }
  EXPECT_EQ(unavailable, 1);
  auto after = engine->SubmitEmbed(Ids({{1}}), cb);
  EXPECT_EQ(after.status().code(), absl::StatusCode::kUnavailable);
}

TEST(PrefillParallelismTest, DefaultsNeverOversubscribeTheCores) {
  struct Case {
    int64_t hidden;
    int cores, threads, replicas;     // inputs (0 = not set)
    int want_replicas, want_threads;  // outputs
  };
  const Case cases[] = {
      // Small encoder, nothing set: one single-threaded replica per core.
      {384, 2, 0, 0, 2, 1},
      // threads given: replicas fill the cores without exceeding them.
      {384, 2, 2, 0, 1, 2},
      {384, 8, 3, 0, 2, 3},
      {384, 2, 4, 0, 1, 4},
      // Large model: one replica with every core.
      {1024, 4, 0, 0, 1, 4},
      // Both given: the user's choice, even past the cores.
      {384, 2, 2, 3, 3, 2},
      // replicas given alone: threads share the cores.
      {1024, 8, 0, 2, 2, 4},
  };
  for (const Case& c : cases) {
    const PrefillParallelism p =
        ChoosePrefillParallelism(c.hidden, c.cores, c.threads, c.replicas);
    EXPECT_EQ(p.replicas, c.want_replicas)
        << "hidden " << c.hidden << " cores " << c.cores << " threads "
        << c.threads << " replicas " << c.replicas;
    EXPECT_EQ(p.threads, c.want_threads)
        << "hidden " << c.hidden << " cores " << c.cores << " threads "
        << c.threads << " replicas " << c.replicas;
  }
}

}  // namespace
}  // namespace inferd
