// The gRPC front end's Generate: a server-streaming call fed by the request
// layer's generation messages.
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "service/grpc_calls.h"
#include "service/request_parse.h"
#include "service/status.h"

namespace inferd {
namespace {

// Streams one generation. The engine delivers messages on its thread
// through the call's ReactorLink; writes are serialized (one in flight, the
// rest queued). The call ends after the final message (of the last sample,
// with SamplingParams.n > 1) is written, at once on a cancel or a failed
// write (the engine request is aborted and its late messages are dropped),
// or with the engine's error (input errors found by the engine's prep
// worker, such as a prompt too long, arrive that way; gRPC holds a Finish
// that comes before the reactor is bound).
class GenerateCall : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  using Link = ReactorLink<GenerateCall>;

  explicit GenerateCall(InferenceService* svc)
      : svc_(svc), stats_(svc, "Generate"), link_(Link::Create(this)) {}

  // Runs inside the Generate handler, before gRPC binds the reactor, so no
  // reaction (and no OnDone) can run meanwhile.
  void Start(const v1::GenerateRequest& req, absl::Time deadline) {
    std::shared_ptr<Link> link = link_;
    std::string model;
    auto handle = svc_->requests()->Generate(
        req, deadline,
        [link](absl::StatusOr<v1::GenerateResponse> message, bool last) {
          link->Visit([&](GenerateCall& call) {
            call.OnMessage(std::move(message), last);
          });
        },
        &model);
    if (!model.empty()) stats_.set_model(model);
    if (!handle.ok()) {
      FinishNow(ToGrpcStatus(handle.status()));
      return;
    }
    absl::MutexLock lock(&mu_);
    handle_ = std::move(handle).value();
    if (end_.has_value()) handle_->Abort();
  }

  void FinishNow(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    EndLocked(status, /*abandon=*/true);
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    if (handle_) handle_->Abort();
    EndLocked(grpc::Status(grpc::StatusCode::CANCELLED,
                           "the client cancelled the call or its deadline "
                           "passed"),
              /*abandon=*/true);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!queue_.empty()) queue_.pop_front();
    if (!ok) {
      // The client is gone: stop generating, drop what is queued.
      if (handle_) handle_->Abort();
      EndLocked(grpc::Status(grpc::StatusCode::CANCELLED,
                             "the stream was closed"),
                /*abandon=*/true);
      return;
    }
    PumpLocked();
  }

  void OnDone() override {
    link_->Detach();  // waits for an engine callback inside the call
    AwaitReactions(&mu_);
    delete this;
  }

 private:
  // Engine thread, through the link.
  void OnMessage(absl::StatusOr<v1::GenerateResponse> message, bool last) {
    absl::MutexLock lock(&mu_);
    if (end_.has_value()) return;  // the call is ending: drop late messages
    if (!message.ok()) {
      EndLocked(ToGrpcStatus(message.status()), /*abandon=*/false);
      return;
    }
    grpc::ByteBuffer bytes;
    absl::Status written = SerializeResponse(*message, &bytes);
    if (!written.ok()) {
      if (handle_) handle_->Abort();
      EndLocked(ToGrpcStatus(written), /*abandon=*/false);
      return;
    }
    queue_.push_back(std::move(bytes));
    if (last) {
      EndLocked(grpc::Status::OK, /*abandon=*/false);
      return;
    }
    PumpLocked();
  }

  // Marks the call as ending with `status` (the first end wins). `abandon`
  // drops responses not yet being written; otherwise they are written
  // first.
  void EndLocked(const grpc::Status& status, bool abandon)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!end_.has_value()) end_ = status;
    if (abandon) {
      abandoned_ = true;
      // The front response stays while its write is in flight.
      while (queue_.size() > (writing_ ? 1u : 0u)) queue_.pop_back();
    }
    PumpLocked();
  }

  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (!queue_.empty() && !abandoned_) {
      writing_ = true;
      StartWrite(&queue_.front());
      return;
    }
    if (end_.has_value()) {
      finished_ = true;
      stats_.set_status(*end_);
      Finish(*end_);
    }
  }

  InferenceService* svc_;
  CallStats stats_;
  const std::shared_ptr<Link> link_;
  absl::Mutex mu_;
  std::shared_ptr<RequestHandle> handle_ ABSL_GUARDED_BY(mu_);
  // Responses to write (serialized); the front one is in flight while
  // writing_.
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* InferenceService::Generate(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw) {
  // GenerateCall::Start copies what it needs from the request.
  v1::GenerateRequest request;
  absl::Status admit = Admit(*ctx);
  absl::Status parsed = admit.ok() ? ParseRequest(*raw, &request) : admit;
  auto* call = new GenerateCall(this);
  if (!parsed.ok()) {
    call->FinishNow(ToGrpcStatus(parsed));
    return call;
  }
  call->Start(request, DeadlineOf(ctx));
  return call;
}

}  // namespace inferd
