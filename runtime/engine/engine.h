// Engine: runs one model's workflow. Requests enter through Submit*, are
// queued (bounded: overflow is RESOURCE_EXHAUSTED at once), scheduled,
// executed by the model runner on the engine's own loop thread(s), and
// answered through their callback. Each Submit returns a RequestHandle whose
// Abort() drops the request (before it costs compute when still queued).
// Thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_ENGINE_H_
#define INFERD_RUNTIME_ENGINE_ENGINE_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "runtime/engine/requests.h"

namespace inferd {

class ServedModel;
class WeightStore;

// The handle of one submitted request, shared by the caller and the engine.
//
// The contract between an engine and its callers (service/'s reactors):
// - Every Submit* that returns OK fires the request's callback with a final
//   answer exactly once: a result, an error, or (Generate) the chunk whose
//   finish reason is set, after zero or more partial chunks. This holds for
//   cancels, deadlines, failed steps and Stop (UNAVAILABLE). A Submit* that
//   returns an error never fires the callback.
// - Callbacks run on an engine thread, in order per request, never inside
//   Submit* and never while the engine holds a lock the caller can take.
//   After the final call the engine destroys the callback (and whatever it
//   captured) without calling it again.
// - Abort() is idempotent, thread-safe, callable at any time (also after
//   the final answer) and never calls the callback itself. After it, the
//   final answer comes at the engine's next step (CANCELLED) unless the
//   request finished already; work not yet done is skipped (queued parts,
//   remaining sequences, further decode steps), and its KV blocks are freed.
// - The engine keeps the callback for as long as the request lives in it,
//   which can be longer than the caller's interest in it. So a callback
//   must not hold a raw pointer to an object the caller may destroy: a gRPC
//   reactor is deleted by gRPC after a cancel, at any moment. service/
//   therefore captures a shared ReactorLink (service/grpc/reactor_link.h), which
//   the reactor detaches in OnDone before it is deleted; a late callback
//   finds it detached and is dropped.
class RequestHandle {
 public:
  virtual ~RequestHandle() = default;
  void Abort() { aborted_.store(true, std::memory_order_release); }
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> aborted_{false};
};

// Counters a test or the metrics endpoint can read. Snapshot values.
struct EngineStats {
  int64_t waiting_requests = 0;
  int64_t running_requests = 0;
  int64_t model_calls = 0;        // forward passes run
  int64_t batched_tokens = 0;     // tokens across every forward pass
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_free = 0;
  // KV cache bytes reserved, and committed so far (pages of blocks that
  // sequences have written).
  int64_t kv_cache_bytes = 0;
  int64_t kv_cache_resident_bytes = 0;
  int64_t prefix_cache_queries = 0;  // prompt tokens looked up
  int64_t prefix_cache_hits = 0;     // prompt tokens found
  int64_t preemptions = 0;
  // Speculative decoding: draft tokens verified, and accepted.
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
};

// One engine step (one forward pass), as reported to a StepObserver.
struct StepInfo {
  int64_t num_seqs = 0;    // sequences in the batch
  int64_t num_tokens = 0;  // tokens the forward pass ran
  // Generation steps: num_tokens split into prompt (prefill, including
  // recomputation after a preemption) and decode tokens (one per decoding
  // sequence). Both 0 for engines that do not tell them apart.
  int64_t num_prefill_tokens = 0;
  int64_t num_decode_tokens = 0;
  // Wall time of the step on the engine loop: scheduling, the forward pass
  // and sampling; 0 when not measured.
  double seconds = 0;
};

// Told about every engine step (the metrics hook for batch sizes). Called on
// an engine loop thread, so it must be quick and thread-safe.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void OnStep(const StepInfo& step) = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;

  // Each Submit* returns FAILED_PRECONDITION unless the workflow serves the
  // task; INVALID_ARGUMENT for bad input; RESOURCE_EXHAUSTED when the queue
  // is full; UNAVAILABLE once stopped.
  virtual absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitEmbed(
      EmbedParams params, ResultCallback<EmbedResult> done);
  virtual absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitClassify(
      ClassifyParams params, ResultCallback<ClassifyResult> done);
  virtual absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitRerank(
      RerankParams params, ResultCallback<RerankResult> done);
  virtual absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitGenerate(
      GenerateParams params, GenerateCallback on_chunk);

  virtual EngineStats Stats() const = 0;
  // Embedders: the outputs an embed request may ask for besides "dense"
  // (the token heads that are present: "sparse", "multi_vector").
  virtual std::vector<std::string> EmbedOutputs() const { return {}; }

  // The longest input (prompt + output for generation) the engine accepts,
  // when it is tighter than the model's own limit (e.g. a KV cache smaller
  // than the full context); 0 = the model's limit.
  virtual int64_t max_input_tokens() const { return 0; }

  // Stops the loop threads; requests not finished get UNAVAILABLE.
  // Idempotent.
  virtual void Stop() = 0;

  // Sets the observer told about every step; null for none. Not owned; it
  // must outlive the engine. Thread-safe.
  void set_step_observer(StepObserver* observer) {
    step_observer_.store(observer, std::memory_order_release);
  }

  // How the engine's KV cache was sized; zeros for engines without one. Set
  // once by the executor that builds the engine, before it is shared.
  struct KvCacheSummary {
    int64_t blocks = 0;
    int block_size = 0;
    int64_t bytes = 0;
    // The budget and what it was computed from, one line.
    std::string note;
  };
  const KvCacheSummary& kv_cache_summary() const { return kv_summary_; }
  void set_kv_cache_summary(KvCacheSummary summary) {
    kv_summary_ = std::move(summary);
  }

 protected:
  void NotifyStep(const StepInfo& step) const {
    StepObserver* o = step_observer_.load(std::memory_order_acquire);
    if (o != nullptr) o->OnStep(step);
  }

 private:
  std::atomic<StepObserver*> step_observer_{nullptr};
  KvCacheSummary kv_summary_;
};

// Builds the engine the model's workflow names (model runner, scheduler,
// input/output processors). Called by ServedModel::Load. `weights`, when
// not null, is the model's opened weight store, shared by every replica.
absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(
    const ServedModel& model, std::shared_ptr<const WeightStore> weights);

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_ENGINE_H_
