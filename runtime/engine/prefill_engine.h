// PrefillEngine: the "prefill_loop" executor of the prefill-only workflows
// (encoder and decoder embedders, cross-encoder rerankers, classifiers).
// Its input processor runs on the submitting thread; R replica loops, each
// with its own model runner, pull batches from one PrefillScheduler, run
// them and answer through the output processor (all three components come
// from the registry by the workflow's names). While one replica runs its batch, another
// assembles the next (and with one replica, callers tokenize the next
// requests meanwhile). Thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_PREFILL_ENGINE_H_
#define INFERD_RUNTIME_ENGINE_PREFILL_ENGINE_H_

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/engine/components.h"
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
  std::string workflow;     // the recipe's name, for error messages
  std::vector<Task> tasks;  // what the workflow serves
  int replicas = 1;
  // Embedders.
  bool default_normalize = true;
  int64_t embedding_dims = 0;
  // sentence-transformers Dense modules applied after pooling.
  std::vector<DenseLayer> dense;
};

// The workflow's components, built from the registry (engine_factory.cc).
struct PrefillComponents {
  std::unique_ptr<InputProcessor> input;
  std::unique_ptr<PrefillScheduler> scheduler;
  std::unique_ptr<OutputProcessor> output;
  // Embedders: the pooling processors a request may choose instead of the
  // workflow's, by pooling name ("cls" for pooling_cls, ...).
  std::map<std::string, std::unique_ptr<OutputProcessor>> poolings;
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
  void Stop() override;

 private:
  PrefillEngine(PrefillEngineOptions options, PrefillComponents components);
  void Loop(StepRunner* runner);
  // FAILED_PRECONDITION unless the workflow serves `task`.
  absl::Status CheckTask(Task task) const;
  // Queues `seqs`; each finished sequence goes through `output` (with its
  // OutputRequest), and `finish` gets the per-sequence vectors in input
  // order. `tokenization_seconds` is reported in the request's timings.
  absl::StatusOr<std::shared_ptr<RequestHandle>> Enqueue(
      std::vector<PrefillSequence> seqs, const OutputProcessor* output,
      bool raw_scores, absl::Time deadline, double tokenization_seconds,
      std::function<void(absl::StatusOr<std::vector<std::vector<float>>>,
                         const RequestTimings&, int64_t tokens)>
          finish);

  const PrefillEngineOptions options_;
  const PrefillComponents components_;
  PrefillScheduler& scheduler_;
  std::vector<std::unique_ptr<StepRunner>> runners_;
  std::vector<std::thread> loops_;
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> running_{0};
  std::atomic<int64_t> model_calls_{0};
  std::atomic<int64_t> batched_tokens_{0};
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_PREFILL_ENGINE_H_
