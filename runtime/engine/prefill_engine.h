// PrefillEngine: the engine of the prefill-only workflows (encoder and
// decoder embedders, cross-encoder rerankers, classifiers). Input processing
// runs on the submitting thread; R replica loops, each with its own model
// runner, pull batches from one PrefillOnlyScheduler, run them and answer
// through the output processors. While one replica runs its batch, another
// assembles the next (and with one replica, callers tokenize the next
// requests meanwhile). Thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_PREFILL_ENGINE_H_
#define INFERD_RUNTIME_ENGINE_PREFILL_ENGINE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/engine/input_processor.h"
#include "runtime/engine/output_processor.h"
#include "runtime/engine/prefill_scheduler.h"
#include "runtime/engine/workflow.h"

namespace inferd {

// What a replica loop calls to run one step. Not thread-safe; one per
// replica.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual absl::StatusOr<BatchResult> Execute(const BatchPlan& plan) = 0;
};

struct PrefillEngineOptions {
  WorkflowKind workflow = WorkflowKind::kEncoderEmbed;
  int replicas = 1;
  PrefillSchedulerOptions scheduler;
  // Embedders.
  Pooling default_pooling = Pooling::kCls;
  bool default_normalize = true;
  int64_t embedding_dims = 0;
  // sentence-transformers Dense modules applied after pooling.
  std::vector<DenseLayer> dense;
  // Classifiers: softmax (single-label) or sigmoid (multi-label).
  ScoreFunction classify_scores = ScoreFunction::kSoftmax;
};

class PrefillEngine : public Engine {
 public:
  // `make_runner(i)` builds replica i's runner (called on the constructing
  // thread, before any loop starts).
  static absl::StatusOr<std::unique_ptr<PrefillEngine>> Create(
      PrefillEngineOptions options, InputProcessor input,
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
  void Stop() override;

 private:
  PrefillEngine(PrefillEngineOptions options, InputProcessor input);
  void Loop(StepRunner* runner);
  // Queues `seqs` with `output`; `finish` converts the per-sequence results.
  // `tokenization_seconds` is reported in the request's timings.
  absl::StatusOr<std::shared_ptr<RequestHandle>> Enqueue(
      std::vector<PrefillSequence> seqs, StepOutput output, absl::Time deadline,
      double tokenization_seconds,
      std::function<void(absl::StatusOr<std::vector<SequenceResult>>,
                         const RequestTimings&, int64_t tokens)>
          finish);
  // Enqueue for classification heads: `finish` gets each sequence's
  // logits scored with `fn`.
  absl::StatusOr<std::shared_ptr<RequestHandle>> EnqueueHead(
      std::vector<PrefillSequence> seqs, absl::Time deadline,
      double tokenization_seconds, ScoreFunction fn,
      std::function<void(absl::StatusOr<std::vector<std::vector<float>>>,
                         const RequestTimings&, int64_t tokens)>
          finish);

  const PrefillEngineOptions options_;
  const InputProcessor input_;
  PrefillOnlyScheduler scheduler_;
  std::vector<std::unique_ptr<StepRunner>> runners_;
  std::vector<std::thread> loops_;
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> running_{0};
  std::atomic<int64_t> model_calls_{0};
  std::atomic<int64_t> batched_tokens_{0};
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_PREFILL_ENGINE_H_
