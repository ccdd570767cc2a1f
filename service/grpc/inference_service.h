// gRPC handlers of inferd.v1.Inference and inferd.v1.Models (callback API):
// the gRPC front end. They check the API key, parse the request, hand it to
// the request layer (request_layer.h: validation, conversion, the engines)
// and write its answers; no validation or engine logic lives here. The
// calls are split by kind: grpc_generate.cc (Generate), grpc_embed_stream.cc
// (the Embed stream), inference_service.cc (the unary calls). Thread-safe:
// gRPC calls the handlers concurrently.
//
// Every method is registered raw (grpc::ByteBuffer in and out): the
// handlers parse requests themselves (service/grpc/request_parse.h), so bytes
// protobuf rejects (a string that is not UTF-8, a truncated message) are
// answered INVALID_ARGUMENT naming the field, where gRPC's typed callback
// handlers would answer UNIMPLEMENTED with no message (or end a bidi
// stream's reads as if the client had closed it).
#ifndef INFERD_SERVICE_GRPC_INFERENCE_SERVICE_H_
#define INFERD_SERVICE_GRPC_INFERENCE_SERVICE_H_

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
#include "service/request/auth.h"
#include "service/request/call_scope.h"
#include "service/request/request_layer.h"

namespace inferd {

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
    v1::Models::WithRawCallbackMethod_GetModel<
        v1::Models::WithRawCallbackMethod_LoadModel<
            v1::Models::WithRawCallbackMethod_UnloadModel<
                v1::Models::Service>>>>;

class InferenceService final : public RawInferenceBase {
 public:
  // `auth` is not owned and may be null (no API key); it and `requests`
  // must outlive the service.
  InferenceService(RequestLayer* requests, const ApiKeyAuth* auth = nullptr);

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
  int64_t active_calls() const { return requests_->active_calls(); }
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
  // and the server is not draining (UNAVAILABLE); a refusal is recorded on
  // `scope`.
  absl::Status Admit(const grpc::CallbackServerContext& ctx,
                     CallScope* scope) const;

  RequestLayer* requests() const { return requests_; }
  RpcObserver* observer() const { return requests_->observer(); }
  bool accepting() const { return requests_->accepting(); }

 private:
  RequestLayer* const requests_;
  const ApiKeyAuth* auth_;
  absl::Mutex streams_mu_;
  // Open client-streaming calls; a call unregisters itself in OnDone, under
  // streams_mu_, before it is deleted.
  absl::flat_hash_set<OpenStream*> streams_ ABSL_GUARDED_BY(streams_mu_);
};

class ModelsService final : public RawModelsBase {
 public:
  // `auth` as for InferenceService.
  explicit ModelsService(RequestLayer* requests,
                         const ApiKeyAuth* auth = nullptr)
      : requests_(requests), auth_(auth) {}
  // v1::ListModelsRequest -> v1::ListModelsResponse.
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  // v1::GetModelRequest -> v1::ModelInfo.
  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  // v1::LoadModelRequest -> v1::ModelInfo; v1::UnloadModelRequest ->
  // v1::ModelInfo. Both run on a thread of their own (a load may download
  // for minutes) and count as work (refused while draining).
  grpc::ServerUnaryReactor* LoadModel(grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* UnloadModel(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;

 private:
  // A unary query answered at once: admitted and parsed into `request`,
  // then `answer` fills `out` (returning the model the call was about).
  template <typename Request>
  grpc::ServerUnaryReactor* Query(
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
      grpc::ByteBuffer* out, absl::string_view rpc,
      const std::function<absl::Status(const Request&, grpc::ByteBuffer*,
                                       std::string*)>& answer);

  // A model change: admitted and parsed here, then `run` on a thread of its
  // own, whose ModelInfo answers the call.
  template <typename Request>
  grpc::ServerUnaryReactor* Change(
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
      grpc::ByteBuffer* out, absl::string_view rpc,
      std::function<absl::StatusOr<ServedModelInfo>(const Request&)> run);

  RequestLayer* const requests_;
  const ApiKeyAuth* auth_;
};

}  // namespace inferd

#endif  // INFERD_SERVICE_GRPC_INFERENCE_SERVICE_H_
