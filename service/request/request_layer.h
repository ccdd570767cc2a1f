// The request layer: what every front end (the gRPC handlers, the HTTP
// routes) calls to serve a request. A front end reads its wire format
// straight into the request types of requests.h; the request layer resolves
// the model, validates the request (validation.h: errors name the field by
// its inferd.v1 path in the status payload, which each front end renames),
// submits it to the model's engine, and hands back the engine's answers
// with their tokens named and tool calls / reasoning parsed; the front end
// writes them in its wire format. Every error is an absl::Status whose code
// is the gRPC one (INVALID_ARGUMENT, NOT_FOUND, UNAVAILABLE,
// RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED ...). The request layer also reports
// to the RpcObserver what the engines did (generations and prefill
// requests; each front end reports its own calls through its CallScope).
//
// Thread-safe: front ends call it concurrently. Sinks run on engine threads
// (or inside the call, for errors found before submission only through the
// returned status), once per answer, never after the final one.
#ifndef INFERD_SERVICE_REQUEST_REQUEST_LAYER_H_
#define INFERD_SERVICE_REQUEST_REQUEST_LAYER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/model_manager.h"
#include "service/request/requests.h"

namespace inferd {

// Observes RPC outcomes (the metrics hook). Implementations must be
// thread-safe and quick: OnGenerateDone and OnPrefillDone run on engine
// threads.
class RpcObserver {
 public:
  virtual ~RpcObserver() = default;
  // Every inferd.v1 call when it ends; `model` is empty when the call ended
  // before a model was resolved (auth, unknown model, ...).
  virtual void OnRpcDone(absl::string_view rpc, absl::string_view model,
                         const absl::Status& status, double seconds) {}
  // A generation that reached its final chunk. `inter_token_seconds` holds
  // the time between consecutive output tokens.
  virtual void OnGenerateDone(absl::string_view model,
                              const GenerateChunk& final_chunk,
                              absl::Span<const double> inter_token_seconds) {}
  // A prefill request (task "embed", "rerank" or "classify") that the engine
  // answered successfully.
  virtual void OnPrefillDone(absl::string_view task, absl::string_view model,
                             int64_t inputs, int64_t tokens,
                             const RequestTimings& timings) {}
};

class RequestLayer {
 public:
  // `observer` is not owned and may be null; it must outlive the layer.
  RequestLayer(ModelManager* models, ApiLimits limits, RpcObserver* observer);

  // Draining: from StopAccepting on, every new request is UNAVAILABLE.
  void StopAccepting() { accepting_.store(false); }
  bool accepting() const { return accepting_.load(); }
  // UNAVAILABLE once draining.
  absl::Status CheckAccepting() const;

  // Generate. `sink` gets each output in order; the final one has `last`,
  // after which it is not called again; an error status ends the call. The
  // returned handle aborts the generation (the engine may still deliver an
  // output already in flight: front ends drop outputs after they ended).
  // `model_name` (may be null) gets the resolved model's name as soon as it
  // is known, also on errors after resolution.
  using GenerateSink = std::function<void(absl::StatusOr<GenerateOutput>)>;
  absl::StatusOr<std::shared_ptr<RequestHandle>> Generate(
      GenerateInput in, GenerateSink sink, std::string* model_name = nullptr);

  // The prefill tasks: one answer each, through `done`.
  template <typename Answer>
  using Sink = std::function<void(absl::StatusOr<Answer>)>;
  absl::StatusOr<std::shared_ptr<RequestHandle>> Embed(
      EmbedInput in, Sink<EmbedResult> done, std::string* model_name = nullptr);
  absl::StatusOr<std::shared_ptr<RequestHandle>> Rerank(
      RerankInput in, Sink<RerankAnswer> done,
      std::string* model_name = nullptr);
  absl::StatusOr<std::shared_ptr<RequestHandle>> Classify(
      ClassifyInput in, Sink<ClassifyAnswer> done,
      std::string* model_name = nullptr);

  // Synchronous calls (no engine queue).
  absl::StatusOr<TokenizeAnswer> Tokenize(
      const TokenizeInput& in, std::string* model_name = nullptr) const;
  absl::StatusOr<std::string> Detokenize(
      const DetokenizeInput& in, std::string* model_name = nullptr) const;
  std::vector<ServedModelInfo> ListModels() const;
  // NOT_FOUND (field `name`) for a model the server does not have.
  absl::StatusOr<ServedModelInfo> GetModel(const std::string& name) const;

  // Models while serving (ModelManager::LoadModel / UnloadModel); they
  // block until the load (unless !in.wait) or unload ends. The builder
  // turns a LoadModelInput with a path into a ModelSpec (the server's
  // defaults plus its options); INVALID_ARGUMENT naming a bad option.
  using ModelSpecBuilder =
      std::function<absl::StatusOr<ModelSpec>(const LoadModelInput&)>;
  void set_model_spec_builder(ModelSpecBuilder builder) {
    spec_builder_ = std::move(builder);
  }
  absl::StatusOr<ServedModelInfo> LoadModel(const LoadModelInput& in);

  // Runs `then` now, or, when `model` is an on-demand model that must load
  // first, on a thread of its own once that load ended (READY or not): the
  // request then finds it loaded (or its error) without a front end's
  // thread (gRPC runs reactions on a few) waiting for the load. `then` must
  // reach its call through a ReactorLink (the call may have ended).
  void WhenModelReady(const std::string& model, std::function<void()> then);
  // Waits until no `then` of WhenModelReady is pending or running (after
  // the models shut down, which ends their waits).
  void AwaitDeferred();
  absl::StatusOr<ServedModelInfo> UnloadModel(const UnloadModelInput& in);

  // Calls in flight across every front end (a front end counts a call
  // from its start to its end); the drain waits for them.
  std::atomic<int64_t>& active_counter() { return active_; }
  int64_t active_calls() const { return active_.load(); }

  ModelManager* models() const { return models_; }
  const ApiLimits& limits() const { return limits_; }
  RpcObserver* observer() const { return observer_; }

 private:
  ModelManager* const models_;
  const ApiLimits limits_;
  RpcObserver* const observer_;
  std::atomic<bool> accepting_{true};
  std::atomic<int64_t> active_{0};
  ModelSpecBuilder spec_builder_;
  absl::Mutex deferred_mu_;
  int deferred_ ABSL_GUARDED_BY(deferred_mu_) = 0;
};

}  // namespace inferd

#endif  // INFERD_SERVICE_REQUEST_REQUEST_LAYER_H_
