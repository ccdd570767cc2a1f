// What the gRPC front end's calls share (inference_service.cc,
// grpc_generate.cc, grpc_embed_stream.cc): the call deadline, admission
// through the call kit (call_scope.h), and the unary reactor whose answer
// arrives on an engine thread. Internal to service/.
#ifndef INFERD_SERVICE_GRPC_GRPC_CALLS_H_
#define INFERD_SERVICE_GRPC_GRPC_CALLS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "runtime/engine/engine.h"
#include "service/request/call_scope.h"
#include "service/grpc/inference_service.h"
#include "service/grpc/reactor_link.h"

namespace inferd {

// The call's deadline (InfiniteFuture when the client set none).
absl::Time DeadlineOf(const grpc::CallbackServerContext* ctx);

// An EmbedRequest through the request layer, answered as an EmbedResponse
// (EmbedBatch and the Embed stream).
absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitEmbed(
    RequestLayer* requests, const v1::EmbedRequest& req, absl::Time deadline,
    std::function<void(absl::StatusOr<v1::EmbedResponse>)> done,
    std::string* model);

// Unary call whose work finishes on an engine thread. Engine callbacks
// reach it only through its ReactorLink (see reactor_link.h). A cancel or an
// expired deadline aborts the engine request and ends the call at once; the
// engine's late answer is then dropped. The call owns its parsed request
// and serializes the response into gRPC's buffer when it ends OK (the
// methods are raw: see inference_service.h).
class UnaryCall : public grpc::ServerUnaryReactor {
 public:
  using Link = ReactorLink<UnaryCall>;

  // `out` is gRPC's response buffer.
  UnaryCall(InferenceService* svc, absl::string_view rpc,
            grpc::ByteBuffer* out);

  // Admits the call (API key, not draining) and parses its request, which
  // the call keeps until it ends. Null when either failed: the call was
  // ended with the error.
  template <typename Request>
  const Request* Begin(const grpc::CallbackServerContext& ctx,
                       const grpc::ByteBuffer& raw) {
    auto request = std::make_unique<Request>();
    if (!BeginInto(ctx, raw, request.get())) return nullptr;
    const Request* out = request.get();
    request_ = std::move(request);
    return out;
  }

  // A copy for engine callbacks.
  std::shared_ptr<Link> link() const { return link_; }

  void SetModel(absl::string_view m) {
    absl::MutexLock lock(&mu_);
    scope_.set_model(m);
  }
  void SetHandle(std::shared_ptr<RequestHandle> handle);

  // Ends the call with `status` unless it has ended already.
  void Done(const absl::Status& status);
  // Ends the call OK with `response` (serialized into gRPC's buffer) unless
  // it has ended already.
  void Done(const google::protobuf::Message& response);
  // The answer of an engine request or a synchronous call.
  template <typename Response>
  void Done(const absl::StatusOr<Response>& response) {
    if (response.ok()) {
      Done(static_cast<const google::protobuf::Message&>(*response));
    } else {
      Done(response.status());
    }
  }

  void OnCancel() override;
  void OnDone() override;

 private:
  bool BeginInto(const grpc::CallbackServerContext& ctx,
                 const grpc::ByteBuffer& raw,
                 google::protobuf::Message* request);
  void FinishLocked(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  InferenceService* const svc_;
  absl::Mutex mu_;
  CallScope scope_ ABSL_GUARDED_BY(mu_);
  const std::shared_ptr<Link> link_;
  grpc::ByteBuffer* const out_;  // gRPC's; written by Done only
  // Set by Begin, before any engine callback; read-only afterwards.
  std::unique_ptr<google::protobuf::Message> request_;
  std::shared_ptr<RequestHandle> handle_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace inferd

#endif  // INFERD_SERVICE_GRPC_GRPC_CALLS_H_
