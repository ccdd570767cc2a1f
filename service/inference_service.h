// gRPC handlers of inferd.v1.Inference and inferd.v1.Models (callback API).
// They validate and convert requests, submit them to the model's Engine and
// stream the results back; no engine logic lives here. Thread-safe: gRPC
// calls the handlers concurrently.
#ifndef INFERD_SERVICE_INFERENCE_SERVICE_H_
#define INFERD_SERVICE_INFERENCE_SERVICE_H_

#include <atomic>

#include "inferd/v1/inference.grpc.pb.h"
#include "inferd/v1/models.grpc.pb.h"
#include "runtime/engine/model_manager.h"
#include "service/convert.h"

namespace inferd {

// Observes RPC outcomes (the metrics hook). Thread-safe implementations.
class RpcObserver {
 public:
  virtual ~RpcObserver() = default;
  virtual void OnRpcDone(absl::string_view rpc, absl::string_view model,
                         const grpc::Status& status, double seconds) {}
};

class InferenceService final : public v1::Inference::CallbackService {
 public:
  InferenceService(ModelManager* models, ApiLimits limits,
                   RpcObserver* observer);

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* ctx,
      const v1::GenerateRequest* request) override;
  grpc::ServerBidiReactor<v1::EmbedRequest, v1::EmbedResponse>* Embed(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* EmbedBatch(grpc::CallbackServerContext* ctx,
                                       const v1::EmbedRequest* request,
                                       v1::EmbedResponse* response) override;
  grpc::ServerUnaryReactor* Rerank(grpc::CallbackServerContext* ctx,
                                   const v1::RerankRequest* request,
                                   v1::RerankResponse* response) override;
  grpc::ServerUnaryReactor* Classify(grpc::CallbackServerContext* ctx,
                                     const v1::ClassifyRequest* request,
                                     v1::ClassifyResponse* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* ctx,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(
      grpc::CallbackServerContext* ctx, const v1::DetokenizeRequest* request,
      v1::DetokenizeResponse* response) override;

  // Draining: new calls get UNAVAILABLE.
  void StopAccepting() { accepting_.store(false); }
  int64_t active_calls() const { return active_.load(); }

  ModelManager* models() const { return models_; }
  const ApiLimits& limits() const { return limits_; }
  RpcObserver* observer() const { return observer_; }
  bool accepting() const { return accepting_.load(); }
  std::atomic<int64_t>& active_counter() { return active_; }

 private:
  ModelManager* models_;
  ApiLimits limits_;
  RpcObserver* observer_;
  std::atomic<bool> accepting_{true};
  std::atomic<int64_t> active_{0};
};

class ModelsService final : public v1::Models::CallbackService {
 public:
  explicit ModelsService(ModelManager* models) : models_(models) {}
  grpc::ServerUnaryReactor* ListModels(
      grpc::CallbackServerContext* ctx, const v1::ListModelsRequest* request,
      v1::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* ctx,
                                     const v1::GetModelRequest* request,
                                     v1::ModelInfo* response) override;

 private:
  ModelManager* models_;
};

}  // namespace inferd

#endif  // INFERD_SERVICE_INFERENCE_SERVICE_H_
