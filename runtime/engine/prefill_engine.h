// PrefillEngine: the "prefill_loop" executor of the prefill-only workflows
// (encoder and decoder embedders, cross-encoder rerankers, classifiers).
// Submit* checks and admits a request on the caller's thread (a gRPC
// callback thread) and returns; the engine's prep worker(s) run the input
// processor (tokenization) and queue the request in the PrefillScheduler,
// so while the replicas run batch N the next requests are being
// tokenized. R replica loops, each with its own model runner, pull batches
// from the scheduler and run them; the runner pools on the device (one row
// per sequence). A request is one PrefillRequest record from admission to
// its answer: its sequences, its output plan (the output processor: one
// row per sequence; the workflow's token heads (token_heads.h); then its
// output stages on device ops over the request's rows) and its result
// sink. The components come from the registry by the workflow's names.
// While one replica runs its batch, another assembles the next.
// Thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_PREFILL_ENGINE_H_
#define INFERD_RUNTIME_ENGINE_PREFILL_ENGINE_H_

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "device/device.h"
#include "runtime/engine/admission_front.h"
#include "runtime/engine/components.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/input_processor.h"
#include "runtime/engine/output_processor.h"
#include "runtime/engine/output_stages.h"
#include "runtime/engine/prefill_scheduler.h"
#include "runtime/engine/step_runner.h"
#include "runtime/engine/token_heads.h"
#include "runtime/engine/workflow.h"

namespace inferd {

struct PrefillEngineOptions {
  std::string workflow;     // the recipe's name, for error messages
  std::vector<Task> tasks;  // what the workflow serves
  int replicas = 1;
  // Input-processing workers (tokenization off the callers' threads); 0 =
  // tokenize on the submitting thread (errors then return from Submit*).
  int prep_threads = 1;
  // Admission: requests waiting for tokenization or in the scheduler's
  // queue; one more is RESOURCE_EXHAUSTED at Submit.
  int max_queue_requests = 1024;
  // Embedders.
  bool default_normalize = true;
  int64_t embedding_dims = 0;
};

// Replicas and kernel threads per replica of a prefill-only model.
struct PrefillParallelism {
  int replicas = 1;
  int threads = 1;
};
// Small encoders (hidden_size <= 512) default to one single-threaded
// replica per core (faster than one replica splitting small GEMMs across
// cores, bench/README.md), larger models to one replica with every core.
// threads / replicas > 0 are the user's choices; a default never makes
// replicas x threads exceed the cores (threads=2 on 2 cores: one replica).
PrefillParallelism ChoosePrefillParallelism(int64_t hidden_size, int cores,
                                            int threads, int replicas);

// The workflow's components, built from the registry (engine_factory.cc).
struct PrefillComponents {
  std::unique_ptr<InputProcessor> input;
  std::unique_ptr<PrefillScheduler> scheduler;
  std::unique_ptr<OutputProcessor> output;
  // Embedders: the pooling processors a request may choose instead of the
  // workflow's, by pooling name ("cls" for pooling_cls, ...).
  std::map<std::string, std::unique_ptr<OutputProcessor>> poolings;
  // The workflow's output stages after the output processor, in order
  // (empty: the built-in tail of its tasks, without Dense modules).
  std::vector<std::unique_ptr<OutputStage>> stages;
  // Embedders: the workflow's token heads (outputs from every token's
  // hidden state, e.g. BGE-M3's sparse and multi-vector ones).
  std::vector<std::unique_ptr<TokenHead>> token_heads;
};

class PrefillEngine : public Engine {
 public:
  // `make_runner(i)` builds replica i's runner (called on the constructing
  // thread, before any loop starts).
  static absl::StatusOr<std::unique_ptr<PrefillEngine>> Create(
      PrefillEngineOptions options, PrefillComponents components,
      const std::function<absl::StatusOr<std::unique_ptr<StepRunner>>(int)>&
          make_runner);
  ~PrefillEngine() override;

  absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitEmbed(
      EmbedParams params, ResultCallback<EmbedResult> done) override;
  absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitClassify(
      ClassifyParams params, ResultCallback<ClassifyResult> done) override;
  absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitRerank(
      RerankParams params, ResultCallback<RerankResult> done) override;

  EngineStats Stats() const override;
  std::vector<std::string> EmbedOutputs() const override;
  void Stop() override;

 private:
  // What a request's answer carries besides its rows.
  struct PrefillOutcome {
    RequestTimings timings;
    int64_t total_tokens = 0;
    std::vector<int32_t> lengths;  // tokens per sequence, input order
  };
  // One embed / rerank / classify request from admission to its answer.
  struct PrefillRequest {
    std::shared_ptr<RequestHandle> handle;
    absl::Time arrival;
    absl::Time deadline = absl::InfiniteFuture();
    // Input: the input processor's step for this request (a prep worker
    // runs it).
    std::function<absl::StatusOr<std::vector<PrefillSequence>>()> tokenize;
    // The output plan. `head` turns each sequence's step result into one
    // row; `step_output` is what the runner returns per sequence (the
    // head's, unless token_heads need every token's hidden state).
    const OutputProcessor* head = nullptr;
    StepOutput step_output = StepOutput::kHiddenStates;
    bool raw_scores = false;  // the head's OutputRequest
    // When set, sees each sequence's step result (and its tokens) before
    // the head does (the request's token head runs); an error fails the
    // request.
    std::function<absl::Status(size_t index, const PrefillSequence& seq,
                               const SequenceResult& result)>
        token_heads;
    // The stages over the request's rows, in order, and what they read.
    std::vector<const OutputStage*> stages;
    StageRequest stage_request;
    // The result sink: the rows after the stages (one per sequence, input
    // order), or the first error.
    std::function<void(absl::StatusOr<OutputRows>, const PrefillOutcome&)> sink;
    // Set by preparation: the tokenized request, as the scheduler takes it.
    std::shared_ptr<PrefillWork> work;
  };

  PrefillEngine(PrefillEngineOptions options, PrefillComponents components);
  void Loop(StepRunner* runner);
  // The admission front's stages for this engine's requests.
  AdmissionFront<PrefillRequest>::Stages FrontStages();
  // FAILED_PRECONDITION unless the workflow serves `task`.
  absl::Status CheckTask(Task task) const;
  // The output processor of an embed request's pooling (empty: the
  // workflow's); INVALID_ARGUMENT naming the registered ones otherwise.
  absl::StatusOr<const OutputProcessor*> ResolvePooling(
      const std::string& pooling) const;
  // A request for `task` whose input step runs `process` of the input
  // processor on `params` (kept alive with the request).
  template <typename Params>
  PrefillRequest NewRequest(std::shared_ptr<const Params> params,
                            absl::StatusOr<std::vector<PrefillSequence>> (
                                InputProcessor::*process)(const Params&) const);
  // Classify and Rerank: the workflow's head and stages; `fill` moves the
  // per-sequence scores into the result (an error fails the request).
  template <typename Params, typename Result>
  absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitScores(
      Task kind, Params params, ResultCallback<Result> done,
      absl::StatusOr<std::vector<PrefillSequence>> (InputProcessor::*process)(
          const Params&) const,
      absl::Status (*fill)(const OutputRows& scores, Result* result));
  // Admits the request through the front (RESOURCE_EXHAUSTED when the
  // queue is full, UNAVAILABLE once stopped); a prep worker tokenizes it and
  // queues it in the scheduler; when its last sequence is done, Complete
  // runs its output plan and calls its sink.
  absl::StatusOr<std::shared_ptr<RequestHandle>> Admit(PrefillRequest request);
  // Tokenizes `request` and builds its scheduler work.
  absl::StatusOr<std::shared_ptr<PrefillWork>> BuildWork(
      const PrefillRequest& request);
  // The output plan of a request whose sequences all ran: token heads, the
  // head per sequence, the stages over the rows.
  absl::StatusOr<OutputRows> RunOutputPlan(
      const PrefillRequest& request, const PrefillWork& work,
      const std::vector<SequenceResult>& results) const;
  std::vector<const OutputStage*> stages() const;

  const PrefillEngineOptions options_;
  const PrefillComponents components_;
  PrefillScheduler& scheduler_;

  // The output stages' device: one kernel thread (a request's rows are
  // few), not the replicas' pools.
  std::unique_ptr<Device> stage_device_;
  ExecutionContext stage_ctx_;
  std::unique_ptr<AdmissionFront<PrefillRequest>> front_;
  std::vector<std::unique_ptr<StepRunner>> runners_;
  std::vector<std::thread> loops_;
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> running_{0};
  std::atomic<int64_t> model_calls_{0};
  std::atomic<int64_t> batched_tokens_{0};
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_PREFILL_ENGINE_H_
