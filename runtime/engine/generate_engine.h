// GenerateEngine: the "continuous_batching_loop" executor of the
// causal_generate workflow. One engine loop owns a
// ContinuousBatchingScheduler (paged KV cache with prefix caching, chunked
// prefill, preemption by recompute), the model runner and the sampler; each
// step it schedules, runs, samples, detokenizes incrementally, checks stops
// and streams a chunk to every sequence that produced a token. Prompts go
// through the workflow's input processor on the submitting thread. Thread-safe (Submit/Abort/Stop from
// any thread).
#ifndef INFERD_RUNTIME_ENGINE_GENERATE_ENGINE_H_
#define INFERD_RUNTIME_ENGINE_GENERATE_ENGINE_H_

#include <atomic>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/engine/components.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/prefill_engine.h"
#include "runtime/gen/sampler.h"
#include "runtime/gen/scheduler.h"
#include "runtime/gen/stop_checker.h"
#include "runtime/tokenizer/incremental_decoder.h"
#include "runtime/tokenizer/tokenizer.h"

namespace inferd {

struct GenerateEngineOptions {
  SchedulerConfig scheduler;  // kv_cache.num_blocks must be set
  int32_t vocab_size = 0;     // logits width
  std::vector<int32_t> eos_token_ids;
  int max_queue_requests = 1024;
};

// The workflow's components, built from the registry (engine_factory.cc):
// prompt_tokenizer, continuous_batching, sample_detokenize.
struct GenerateComponents {
  std::unique_ptr<InputProcessor> input;
  std::unique_ptr<ContinuousBatchingScheduler> scheduler;
  std::unique_ptr<Sampler> sampler;
};

class GenerateEngine : public Engine {
 public:
  // `runner` must have its KV cache allocated with
  // options.scheduler.kv_cache.{num_blocks, block_size}; `components` must
  // all be set, the scheduler built with options.scheduler. `tokenizer`
  // detokenizes the output.
  GenerateEngine(GenerateEngineOptions options, const Tokenizer* tokenizer,
                 GenerateComponents components,
                 std::unique_ptr<StepRunner> runner);
  ~GenerateEngine() override;

  absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitGenerate(
      GenerateParams params, GenerateCallback on_chunk) override;

  EngineStats Stats() const override;
  int64_t max_input_tokens() const override {
    return options_.scheduler.max_model_len;
  }
  void Stop() override;

 private:
  struct Request;

  void Loop();
  // Admits queued requests into the scheduler (engine thread).
  void AdmitIncoming();
  // Drops aborted/expired requests, answering them (engine thread).
  void ReapAborted();
  void RunStep();
  void FinishRequest(Request* r, FinishReason reason,
                     const absl::Status& error = absl::OkStatus());
  void UpdateStats();

  const GenerateEngineOptions options_;
  const Tokenizer* tokenizer_;
  const std::unique_ptr<InputProcessor> input_;
  std::unique_ptr<StepRunner> runner_;
  const std::unique_ptr<ContinuousBatchingScheduler> scheduler_owner_;
  const std::unique_ptr<Sampler> sampler_owner_;
  ContinuousBatchingScheduler& scheduler_;  // engine thread only
  Sampler& sampler_;                        // engine thread only
  absl::flat_hash_map<int64_t, std::unique_ptr<Request>> active_;  // engine thread

  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<Request>> incoming_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  EngineStats stats_ ABSL_GUARDED_BY(mu_);

  std::thread loop_;
  std::atomic<bool> stopped_{false};

  // Step scratch (engine thread).
  std::vector<float> logits_;
  std::vector<SamplingState*> states_;
  std::vector<SampleResult> samples_;
  std::vector<SampledToken> sampled_;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_GENERATE_ENGINE_H_
