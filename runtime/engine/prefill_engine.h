// PrefillEngine: the "prefill_loop" executor of the prefill-only workflows
// (encoder and decoder embedders, cross-encoder rerankers, classifiers).
// Submit* checks and admits a request on the caller's thread (a gRPC
// callback thread) and returns; the engine's prep worker(s) run the input
// processor (tokenization) and queue the request in the PrefillScheduler,
// so while the replicas run batch N the next requests are being
// tokenized. R replica loops, each with its own model runner, pull batches
// from the scheduler, run them and answer through the output processor
// (all three components come from the registry by the workflow's names).
// While one replica runs its batch, another assembles the next.
// Thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_PREFILL_ENGINE_H_
#define INFERD_RUNTIME_ENGINE_PREFILL_ENGINE_H_

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "runtime/engine/admission_front.h"
#include "runtime/engine/components.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/input_processor.h"
#include "runtime/engine/m3_output.h"
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
  // KV cache bytes committed so far (0 without a cache); callable from any
  // thread.
  virtual int64_t kv_cache_resident_bytes() const { return 0; }
};

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
  // sentence-transformers Dense modules applied after pooling.
  std::vector<DenseLayer> dense;
  // BGE-M3 heads for the sparse and multi-vector outputs (absent on most
  // models: requests for them are then FAILED_PRECONDITION).
  M3Heads m3;
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
  using Finish =
      std::function<void(absl::StatusOr<std::vector<std::vector<float>>>,
                         const RequestTimings&, int64_t tokens)>;
  // A request admitted but not yet tokenized.
  struct PrepTask {
    std::shared_ptr<RequestHandle> handle;
    absl::Time arrival;
    absl::Time deadline;
    // Runs the input processor.
    std::function<absl::StatusOr<std::vector<PrefillSequence>>()> tokenize;
    const OutputProcessor* output = nullptr;
    // Overrides output->step_output() (the sparse / multi-vector outputs
    // need every token's hidden state whatever the pooling).
    std::optional<StepOutput> step_output;
    // When set, sees each sequence's step result (and its tokens) before
    // `output` does; an error fails the request.
    std::function<absl::Status(size_t index, const PrefillSequence& seq,
                               const SequenceResult& result)>
        inspect;
    bool raw_scores = false;
    Finish finish;
    // Set by preparation: the tokenized request, as the scheduler takes it.
    std::shared_ptr<PrefillWork> work;
  };

  PrefillEngine(PrefillEngineOptions options, PrefillComponents components);
  void Loop(StepRunner* runner);
  // The admission front's stages for this engine's requests.
  AdmissionFront<PrepTask>::Stages FrontStages();
  // FAILED_PRECONDITION unless the workflow serves `task`.
  absl::Status CheckTask(Task task) const;
  // The output processor of an embed request's pooling (empty: the
  // workflow's); INVALID_ARGUMENT naming the registered ones otherwise.
  absl::StatusOr<const OutputProcessor*> ResolvePooling(
      const std::string& pooling) const;
  // Classify and Rerank: the request's params shared with its tokenize
  // step (`process` of the input processor); `fill` moves the
  // per-sequence scores into the result (an error fails the request).
  template <typename Params, typename Result>
  absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitScores(
      Task kind, Params params, ResultCallback<Result> done,
      absl::StatusOr<std::vector<PrefillSequence>> (InputProcessor::*process)(
          const Params&) const,
      absl::Status (*fill)(std::vector<std::vector<float>> scores,
                           Result* result));
  // Admits the request through the front (RESOURCE_EXHAUSTED when the
  // queue is full, UNAVAILABLE once stopped); a prep worker tokenizes it and
  // queues it in the scheduler; each finished sequence then goes through
  // `output`, and `finish` gets the per-sequence vectors in input order, or
  // the first error.
  absl::StatusOr<std::shared_ptr<RequestHandle>> Admit(PrepTask task);
  // Tokenizes `task` and builds its scheduler work.
  absl::StatusOr<std::shared_ptr<PrefillWork>> BuildWork(const PrepTask& task);

  const PrefillEngineOptions options_;
  const PrefillComponents components_;
  PrefillScheduler& scheduler_;

  std::unique_ptr<AdmissionFront<PrepTask>> front_;
  std::vector<std::unique_ptr<StepRunner>> runners_;
  std::vector<std::thread> loops_;
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> running_{0};
  std::atomic<int64_t> model_calls_{0};
  std::atomic<int64_t> batched_tokens_{0};
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_PREFILL_ENGINE_H_
