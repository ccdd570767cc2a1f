// GenerateEngine: the "continuous_batching_loop" executor of the
// causal_generate workflow. One engine loop owns a
// ContinuousBatchingScheduler (paged KV cache with prefix caching, chunked
// prefill, preemption by recompute), the model runner and the sampler; each
// step it schedules, runs the forward pass and samples. The sampled ids go
// to the output worker, which detokenizes incrementally, checks stop
// strings and streams a chunk to every sequence that produced a token while
// the loop runs the next forward pass (the engine needs only the ids, and
// decides EOS, stop ids and length itself). With speculative decoding
// (prompt lookup), a decoding sequence also feeds n-gram drafts, gets
// logits for every one of them from the same forward pass and keeps the
// verified prefix plus one more token (Sampler::VerifyRow): several tokens
// per step, streamed one chunk each, each through the same stop checks as
// without drafts. A stop string the worker finds
// ends the sequence: the worker sends the final chunk at once and drops
// tokens the loop produced for it since (at most the step already under
// way); the loop frees the sequence before its next step.
// SubmitGenerate checks and admits a request on the caller's thread (a gRPC
// callback thread) and returns; the engine's prep worker(s) run the input
// processor (chat template, tokenization) and the checks on its result, then
// hand the request to the loop. Errors found there (prompt too long, ids
// outside the vocabulary, template errors) are the callback's final answer.
// Threads: the loop (which also drives the kernel thread pool as its
// caller thread), the output worker (light: detokenizing and gRPC writes)
// and the prep worker(s). Thread-safe (Submit/Abort/Stop from any thread).
#ifndef INFERD_RUNTIME_ENGINE_GENERATE_ENGINE_H_
#define INFERD_RUNTIME_ENGINE_GENERATE_ENGINE_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/engine/admission_front.h"
#include "runtime/engine/components.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/step_runner.h"
#include "runtime/gen/sampler.h"
#include "runtime/gen/scheduler.h"
#include "runtime/gen/step_sampling.h"
#include "runtime/gen/stop_checker.h"
#include "runtime/gen/structured_output.h"
#include "runtime/tokenizer/incremental_decoder.h"
#include "runtime/tokenizer/tokenizer.h"

namespace inferd {

struct GenerateEngineOptions {
  SchedulerConfig scheduler;  // kv_cache.num_blocks must be set
  int32_t vocab_size = 0;     // logits width
  std::vector<int32_t> eos_token_ids;
  // Admission: requests waiting for prompt preparation, for the loop or in
  // the scheduler's queue; one more is RESOURCE_EXHAUSTED at Submit.
  int max_queue_requests = 1024;
  // Prompt-preparation workers; 0 = prepare on the submitting thread
  // (errors then return from SubmitGenerate).
  int prep_threads = 1;
  // Detokenize, check stop strings and write chunks on an output worker
  // while the next forward pass runs; false does it on the loop thread,
  // after each step (same output).
  bool overlap_output = true;
  // Prompt-lookup draft tokens per decoding step for requests that do not
  // say (GenerateRequest.speculative); 0 = no speculation.
  int32_t speculative_draft_tokens = 0;
  // Every token's bytes for structured output's vocabulary, when the
  // caller has them already (ServedModel::token_bytes); unset: computed
  // from the tokenizer on first use.
  std::function<std::vector<std::string>()> token_bytes;
};

// The workflow's components, built from the registry (engine_factory.cc):
// prompt_tokenizer, continuous_batching, sample_detokenize.
struct GenerateComponents {
  std::unique_ptr<InputProcessor> input;
  std::unique_ptr<GenerationScheduler> scheduler;
  std::unique_ptr<TokenSampler> sampler;
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
  struct SampleGroup;
  // A token to stream, or the end of the loop's hold on a request.
  struct OutputEvent;
  // The tokens a step sampled for one request: samples_[begin, end).
  struct Emitted {
    Request* request;
    size_t begin;
    size_t end;
    int64_t id;  // request->id (the request may be released meanwhile)
  };

  void Loop();
  // The admission front's stages for generate requests.
  AdmissionFront<std::unique_ptr<Request>>::Stages FrontStages();
  // Runs the input processor and the checks on its result; fills the
  // request's prompt and per-request decoding state.
  absl::Status PreparePrompt(Request* r) const;
  // The request's sampling state, constraint, decoder and stop checkers.
  absl::Status InitDecoding(Request* r) const;
  static ForcedTokenSource ForcedTokens(const Request& r);
  // Aborted by its caller, or its deadline passed.
  static bool Dropped(const Request& r, absl::Time now);
  // OK, or why `r` must not go on: CANCELLED (its caller aborted it) or
  // DEADLINE_EXCEEDED with `deadline_message`.
  static absl::Status DropReason(const Request& r, absl::Time now,
                                 const char* deadline_message);
  // The final answer of a request that ends with `why`: CANCELLED is a
  // final chunk with finish reason cancelled, anything else an error.
  void AnswerEnded(Request* r, const absl::Status& why);
  // Admits queued requests into the scheduler (engine thread).
  void AdmitIncoming();
  // Drops aborted/expired requests, answering them (engine thread).
  void ReapAborted();
  // One step: ScheduleStep -> the runner -> SampleStep -> UpdateStep.
  void RunStep();
  // What SampleStep produced for UpdateStep.
  struct StepSamples {
    std::vector<Emitted> emitted;
    std::vector<std::pair<int64_t, absl::Status>> errors;
    // Samples of n > 1 requests whose first token ended them.
    std::vector<std::pair<std::unique_ptr<Request>, FinishReason>> done_forks;
  };
  SchedulerOutput ScheduleStep(absl::Time step_start);
  StepSamples SampleStep(const SchedulerOutput& out, BatchResult& result);
  void UpdateStep(const SchedulerOutput& out, StepSamples& step,
                  absl::Time step_start);
  void NotifyStepDone(const SchedulerOutput& out, absl::Time step_start);
  // Ends active request `id` with `error` (the scheduler's hold first).
  void FailRequest(int64_t id, const absl::Status& error);
  // Sends the final chunk (or `error`) unless one was sent. Output side
  // for admitted requests; any thread before admission.
  void FinishRequest(Request* r, FinishReason reason,
                     const absl::Status& error = absl::OkStatus());
  // FinishRequest of `r` alone (not its unforked samples).
  void FinishOwnSample(Request* r, FinishReason reason,
                       const absl::Status& error);
  // Hands a chunk (or `error`, with chunk null) of sample `r` to the
  // request's callback: marks the sample, and which final chunk is the
  // last; drops everything after the call's end.
  static void Deliver(Request* r, const absl::Status& error,
                      GenerateChunk* chunk);
  void UpdateStats();
  // Engine thread: the loop is done with `r`; the output side finishes it
  // with `reason` / `error` unless it has already, then frees it.
  void Release(std::unique_ptr<Request> r, FinishReason reason,
               absl::Status error = absl::OkStatus());
  // Hands an event to the output worker (or runs it inline without
  // overlap).
  void PostOutput(OutputEvent event);
  void OutputLoop();
  // Output side: streams one sampled token (stop strings, detokenizing).
  void EmitToken(Request* r, OutputEvent& event);
  // The sampling stages' view of `r` (engine thread).
  static SequenceDecoding Decoding(Request* r);
  void HandleOutput(OutputEvent& event);
  // Engine thread: prompt logprobs from a prompt chunk's rows (every row
  // of kAllLogits) into r->prompt_logprobs.
  absl::Status CollectPromptLogprobs(Request* r, const ScheduledSequence& sched,
                                     const LogitRows& rows);
  // Engine thread: `parent` sampled its first token from the last row of
  // `rows`; samples the first token of each of its other samples from
  // the same row and forks them off it in the scheduler (shared prompt
  // blocks). Their tokens go to `emitted`; those the first token ended go
  // to `done`, to be released after the step's tokens are posted.
  void ForkSamples(
      Request* parent, const LogitRows& rows,
      std::vector<Emitted>* emitted,
      std::vector<std::pair<std::unique_ptr<Request>, FinishReason>>* done);

  const GenerateEngineOptions options_;
  const Tokenizer* tokenizer_;
  const std::unique_ptr<InputProcessor> input_;
  std::unique_ptr<StepRunner> runner_;
  const std::unique_ptr<GenerationScheduler> scheduler_owner_;
  const std::unique_ptr<TokenSampler> sampler_owner_;
  GenerationScheduler& scheduler_;  // engine thread only
  // The sampling stages over the workflow's sampler: prompt logprobs,
  // tokens (speculative verification, forced tokens), forks' first tokens
  // (engine thread only).
  StepSampling step_sampling_;
  // Structured output: response formats compiled by llguidance against the
  // model's vocabulary, recent ones cached (prep workers; thread-safe).
  const std::unique_ptr<ConstraintCompiler> grammars_;
  absl::flat_hash_map<int64_t, std::unique_ptr<Request>> active_;  // engine thread

  // The loop's inbox: requests prepared by the admission front.
  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<Request>> incoming_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  EngineStats stats_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> next_id_{1};
  std::unique_ptr<AdmissionFront<std::unique_ptr<Request>>> front_;

  std::thread loop_;

  // The output worker's queue (FIFO: a request's tokens, then its release).
  absl::Mutex out_mu_;
  std::vector<OutputEvent> out_queue_ ABSL_GUARDED_BY(out_mu_);
  bool out_stop_ ABSL_GUARDED_BY(out_mu_) = false;
  std::thread output_thread_;
  std::vector<OutputEvent> out_batch_;  // output worker scratch
  std::atomic<bool> stopped_{false};

  // Step scratch (engine thread).
  SequenceTokens sequence_tokens_;
  std::vector<SampleResult> samples_;
  std::vector<SampledToken> sampled_;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_GENERATE_ENGINE_H_
