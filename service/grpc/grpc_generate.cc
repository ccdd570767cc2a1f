// The gRPC front end's Generate: a server-streaming call fed by the request
// layer's generation messages.
#include <memory>
#include <string>

#include "service/grpc/convert.h"
#include "service/grpc/grpc_calls.h"
#include "service/request/outbox.h"
#include "service/grpc/request_parse.h"
#include "service/grpc/status.h"

namespace inferd {
namespace {

// Streams one generation. The engine delivers messages on its thread
// through the call's ReactorLink into the call's outbox (outbox.h), which
// writes them in order, one in flight. The call ends after the final
// message (of the last sample, with SamplingParams.n > 1) is written, at
// once on a cancel or a failed write (the outbox aborts the engine request
// and drops its late messages), or with the engine's error (input errors
// found by the engine's prep worker, such as a prompt too long, arrive that
// way; gRPC holds a Finish that comes before the reactor is bound).
class GenerateCall : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  using Link = ReactorLink<GenerateCall>;

  explicit GenerateCall(InferenceService* svc)
      : svc_(svc),
        scope_(svc->requests(), "Generate"),
        link_(Link::Create(this)) {
    outbox_.SetWriter(
        [this](const grpc::ByteBuffer& bytes) { StartWrite(&bytes); },
        [this](const absl::Status& status) {
          scope_.set_status(status);
          Finish(ToGrpcStatus(status));
        });
  }

  // Runs inside the Generate handler, before gRPC binds the reactor, so no
  // reaction (and no OnDone) can run meanwhile.
  void Start(const grpc::CallbackServerContext& ctx,
             const grpc::ByteBuffer& raw) {
    // The request is parsed here and copied by the request layer.
    v1::GenerateRequest req;
    absl::Status admitted = svc_->Admit(ctx, &scope_);
    if (admitted.ok()) admitted = ParseRequest(raw, &req);
    if (!admitted.ok()) {
      outbox_.End(admitted);
      return;
    }
    absl::StatusOr<GenerateInput> input = ToGenerateInput(req, DeadlineOf(&ctx));
    if (!input.ok()) {
      outbox_.End(input.status());
      return;
    }
    // An on-demand model that must load first: the submission waits for it
    // on another thread, reaching this call through its link.
    const std::string model = input->model;
    auto in = std::make_shared<GenerateInput>(*std::move(input));
    std::shared_ptr<Link> link = link_;
    svc_->requests()->WhenModelReady(model, [link, in] {
      link->Enter([&](GenerateCall& call) { call.Submit(std::move(*in)); });
    });
  }

  // Hands the request to the request layer (through the link, or inside
  // Start).
  void Submit(GenerateInput input) {
    std::shared_ptr<Link> link = link_;
    std::string model;
    auto handle = svc_->requests()->Generate(
        std::move(input),
        [link](absl::StatusOr<GenerateOutput> output) {
          link->Visit([&](GenerateCall& call) {
            call.OnOutput(std::move(output));
          });
        },
        &model);
    scope_.set_model(model);
    if (!handle.ok()) {
      outbox_.End(handle.status(), /*abandon=*/true);
      return;
    }
    outbox_.SetCancel([h = *std::move(handle)] { h->Abort(); });
  }

  void OnCancel() override {
    outbox_.Cancel(absl::CancelledError(
        "the client cancelled the call or its deadline passed"));
  }

  void OnWriteDone(bool ok) override { outbox_.WriteDone(ok); }

  void OnDone() override {
    link_->Detach();  // waits for an engine callback inside the call
    outbox_.AwaitCallbacks();
    delete this;
  }

 private:
  // Engine thread, through the link.
  void OnOutput(absl::StatusOr<GenerateOutput> output) {
    if (!output.ok()) {
      outbox_.End(output.status());
      return;
    }
    const bool last = output->last;
    v1::GenerateResponse message;
    FillGenerateResponse(*output, &message);
    grpc::ByteBuffer bytes;
    absl::Status written = SerializeResponse(message, &bytes);
    if (!written.ok()) {
      outbox_.Cancel(written);
      return;
    }
    outbox_.Push(std::move(bytes));
    if (last) outbox_.End(absl::OkStatus());
  }

  InferenceService* const svc_;
  // Set before the reactor is bound; then only by the outbox's finish.
  CallScope scope_;
  const std::shared_ptr<Link> link_;
  Outbox<grpc::ByteBuffer> outbox_;
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* InferenceService::Generate(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw) {
  auto* call = new GenerateCall(this);
  call->Start(*ctx, *raw);
  return call;
}

}  // namespace inferd
