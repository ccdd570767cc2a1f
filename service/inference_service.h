// gRPC handlers of inferd.v1.Inference and inferd.v1.Models (callback API).
// They validate and convert requests, submit them to the model's Engine and
// stream the results back; no engine logic lives here. Thread-safe: gRPC
// calls the handlers concurrently.
//
// Every method is registered raw (grpc::ByteBuffer in and out): the
// handlers parse requests themselves (service/request_parse.h), so bytes
// protobuf rejects (a string that is not UTF-8, a truncated message) are
// answered INVALID_ARGUMENT naming the field, where gRPC's typed callback
// handlers would answer UNIMPLEMENTED with no message (or end a bidi
// stream's reads as if the client had closed it).
#ifndef INFERD_SERVICE_INFERENCE_SERVICE_H_
#define INFERD_SERVICE_INFERENCE_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "grpcpp/support/byte_buffer.h"

#include "inferd/v1/inference.grpc.pb.h"
#include "inferd/v1/models.grpc.pb.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/model_manager.h"
#include "service/auth.h"
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
                         const grpc::Status& status, double seconds) {}
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

// The Inference service with every method raw (see the file comment).
using RawInferenceBase = v1::Inference::WithRawCallbackMethod_Generate<
    v1::Inference::WithRawCallbackMethod_Embed<
        v1::Inference::WithRawCallbackMethod_EmbedBatch<
            v1::Inference::WithRawCallbackMethod_Rerank<
                v1::Inference::WithRawCallbackMethod_Classify<
                    v1::Inference::WithRawCallbackMethod_Tokenize<
                        v1::Inference::WithRawCallbackMethod_Detokenize<
                            v1::Inference::Service>>>>>>>;
using RawModelsBase = v1::Models::WithRawCallbackMethod_ListModels<
    v1::Models::WithRawCallbackMethod_GetModel<v1::Models::Service>>;

class InferenceService final : public RawInferenceBase {
 public:
  // `auth` and `observer` are not owned and may be null (no API key, no
  // metrics); they must outlive the service.
  InferenceService(ModelManager* models, ApiLimits limits,
                   RpcObserver* observer, const ApiKeyAuth* auth = nullptr);

  // Requests are v1::GenerateRequest, v1::EmbedRequest, ... as in
  // inference.proto; answers the matching responses.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Embed(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* EmbedBatch(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Rerank(grpc::CallbackServerContext* ctx,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Classify(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;

  // Draining: new calls get UNAVAILABLE, and open Embed streams end as soon
  // as nothing they submitted is in flight (at once when idle), so a drain
  // waits only for work, not for clients that keep a stream open.
  void StopAccepting();
  int64_t active_calls() const { return active_.load(); }
  // End of a drain: every open Embed stream ends with UNAVAILABLE (their
  // pending engine requests are aborted). Generate and unary calls end
  // through their engines (Engine::Stop answers UNAVAILABLE).
  void CancelStreams();

  // A client-streaming call that CancelStreams can end.
  class OpenStream {
   public:
    virtual ~OpenStream() = default;
    virtual void EndWith(const grpc::Status& status) = 0;
    // The server started draining: end once nothing is in flight.
    virtual void OnDrain() = 0;
  };
  void RegisterStream(OpenStream* s);
  void UnregisterStream(OpenStream* s);

  // OK when the call may proceed: its API key checks out (UNAUTHENTICATED)
  // and the server is not draining (UNAVAILABLE).
  absl::Status Admit(const grpc::CallbackServerContext& ctx) const;

  ModelManager* models() const { return models_; }
  const ApiLimits& limits() const { return limits_; }
  RpcObserver* observer() const { return observer_; }
  bool accepting() const { return accepting_.load(); }
  std::atomic<int64_t>& active_counter() { return active_; }

 private:
  ModelManager* models_;
  ApiLimits limits_;
  RpcObserver* observer_;
  const ApiKeyAuth* auth_;
  std::atomic<bool> accepting_{true};
  std::atomic<int64_t> active_{0};
  absl::Mutex streams_mu_;
  // Open client-streaming calls; a call unregisters itself in OnDone, under
  // streams_mu_, before it is deleted.
  absl::flat_hash_set<OpenStream*> streams_ ABSL_GUARDED_BY(streams_mu_);
};

class ModelsService final : public RawModelsBase {
 public:
  // `auth` and `observer` as for InferenceService.
  explicit ModelsService(ModelManager* models, RpcObserver* observer = nullptr,
                         const ApiKeyAuth* auth = nullptr)
      : models_(models), observer_(observer), auth_(auth) {}
  // v1::ListModelsRequest -> v1::ListModelsResponse.
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  // v1::GetModelRequest -> v1::ModelInfo.
  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;

 private:
  // Checks the API key and reports the outcome; true when the call may
  // proceed (else it was finished on `reactor`).
  bool Admit(grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor,
             absl::string_view rpc);
  void Report(absl::string_view rpc, absl::string_view model,
              const grpc::Status& status, absl::Time start);

  ModelManager* models_;
  RpcObserver* observer_;
  const ApiKeyAuth* auth_;
};

}  // namespace inferd

#endif  // INFERD_SERVICE_INFERENCE_SERVICE_H_
