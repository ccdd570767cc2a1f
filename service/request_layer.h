// The request layer: what every front end (the gRPC handlers; the
// OpenAI-compatible HTTP API) calls to serve an inferd.v1 request. It
// resolves the model, validates and converts the request (convert.h),
// submits it to the model's engine, and hands the engine's answers back as
// inferd.v1 messages; every error is an absl::Status whose code is the
// gRPC one (INVALID_ARGUMENT naming the field, NOT_FOUND, UNAVAILABLE,
// RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED ...). Front ends only parse and
// write their wire format, and map the status to theirs. The request layer
// also reports to the RpcObserver what the engines did (generations and
// prefill requests; each front end reports its own calls).
//
// Thread-safe: front ends call it concurrently. Sinks run on engine threads
// (or inside the call, for errors found before submission only through the
// returned status), once per message, never after the final one.
#ifndef INFERD_SERVICE_REQUEST_LAYER_H_
#define INFERD_SERVICE_REQUEST_LAYER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "inferd/v1/inference.pb.h"
#include "inferd/v1/models.pb.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/model_manager.h"
#include "service/convert.h"

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

  // Generate. `sink` gets each response message in order; `last` marks the
  // final message of the call (the last sample's final chunk with n > 1),
  // after which it is not called again; an error status ends the call. The
  // returned handle aborts the generation (its later messages are not
  // delivered... the engine may still deliver one already in flight: front
  // ends drop messages after they ended). `model_name` (may be null) gets
  // the resolved model's name as soon as it is known, also on errors after
  // resolution.
  using GenerateSink =
      std::function<void(absl::StatusOr<v1::GenerateResponse> message,
                         bool last)>;
  absl::StatusOr<std::shared_ptr<RequestHandle>> Generate(
      const v1::GenerateRequest& req, absl::Time deadline, GenerateSink sink,
      std::string* model_name = nullptr);

  // The prefill tasks: one answer each, through `done`.
  template <typename Response>
  using Sink = std::function<void(absl::StatusOr<Response>)>;
  absl::StatusOr<std::shared_ptr<RequestHandle>> Embed(
      const v1::EmbedRequest& req, absl::Time deadline,
      Sink<v1::EmbedResponse> done, std::string* model_name = nullptr);
  absl::StatusOr<std::shared_ptr<RequestHandle>> Rerank(
      const v1::RerankRequest& req, absl::Time deadline,
      Sink<v1::RerankResponse> done, std::string* model_name = nullptr);
  absl::StatusOr<std::shared_ptr<RequestHandle>> Classify(
      const v1::ClassifyRequest& req, absl::Time deadline,
      Sink<v1::ClassifyResponse> done, std::string* model_name = nullptr);

  // Synchronous calls (no engine queue).
  absl::StatusOr<v1::TokenizeResponse> Tokenize(
      const v1::TokenizeRequest& req, std::string* model_name = nullptr) const;
  absl::StatusOr<v1::DetokenizeResponse> Detokenize(
      const v1::DetokenizeRequest& req,
      std::string* model_name = nullptr) const;
  v1::ListModelsResponse ListModels() const;
  absl::StatusOr<v1::ModelInfo> GetModel(const v1::GetModelRequest& req) const;

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
};

}  // namespace inferd

#endif  // INFERD_SERVICE_REQUEST_LAYER_H_
