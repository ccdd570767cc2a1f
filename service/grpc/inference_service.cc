#include "service/grpc/inference_service.h"

#include <map>
#include <thread>

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "service/grpc/convert.h"
#include "service/grpc/grpc_auth.h"
#include "service/grpc/grpc_calls.h"
#include "service/grpc/request_parse.h"
#include "service/grpc/status.h"

namespace inferd {

absl::Time DeadlineOf(const grpc::CallbackServerContext* ctx) {
  auto tp = ctx->deadline();
  if (tp >= std::chrono::system_clock::time_point::max() -
                std::chrono::hours(24 * 365)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(tp);
}

// ------------------------------------------------------------- UnaryCall

UnaryCall::UnaryCall(InferenceService* svc, absl::string_view rpc,
                     grpc::ByteBuffer* out)
    : svc_(svc),
      scope_(svc->requests(), std::string(rpc)),
      link_(Link::Create(this)),
      out_(out) {}

bool UnaryCall::BeginInto(const grpc::CallbackServerContext& ctx,
                          const grpc::ByteBuffer& raw,
                          google::protobuf::Message* request) {
  absl::Status admit;
  {
    absl::MutexLock lock(&mu_);
    admit = svc_->Admit(ctx, &scope_);
  }
  if (!admit.ok()) {
    Done(admit);
    return false;
  }
  absl::Status parsed = ParseRequest(raw, request);
  if (!parsed.ok()) {
    Done(parsed);
    return false;
  }
  return true;
}

void UnaryCall::SetHandle(std::shared_ptr<RequestHandle> handle) {
  absl::MutexLock lock(&mu_);
  handle_ = std::move(handle);
  if (finished_) handle_->Abort();
}

void UnaryCall::Done(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  FinishLocked(ToGrpcStatus(status));
}

void UnaryCall::Done(const google::protobuf::Message& response) {
  absl::MutexLock lock(&mu_);
  if (finished_) return;
  // The response buffer belongs to gRPC: only touched here, before Finish.
  FinishLocked(ToGrpcStatus(SerializeResponse(response, out_)));
}

void UnaryCall::FinishLocked(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  scope_.set_status(FromGrpcStatus(status));
  Finish(status);
}

void UnaryCall::OnCancel() {
  {
    absl::MutexLock lock(&mu_);
    if (handle_) handle_->Abort();
  }
  Done(absl::CancelledError(
      "the client cancelled the call or its deadline passed"));
}

void UnaryCall::OnDone() {
  link_->Detach();  // waits for an engine callback inside the call
  AwaitReactions(&mu_);
  delete this;
}

// ------------------------------------------------------ InferenceService

InferenceService::InferenceService(RequestLayer* requests,
                                   const ApiKeyAuth* auth)
    : requests_(requests), auth_(auth) {}

absl::Status InferenceService::Admit(const grpc::CallbackServerContext& ctx,
                                     CallScope* scope) const {
  return scope->Admit(auth_, PresentedKey(ctx), kGrpcKeyHint);
}

void InferenceService::RegisterStream(OpenStream* s) {
  absl::MutexLock lock(&streams_mu_);
  streams_.insert(s);
}

void InferenceService::UnregisterStream(OpenStream* s) {
  absl::MutexLock lock(&streams_mu_);
  streams_.erase(s);
}

void InferenceService::StopAccepting() {
  requests_->StopAccepting();
  absl::MutexLock lock(&streams_mu_);
  for (OpenStream* s : streams_) s->OnDrain();
}

void InferenceService::CancelStreams() {
  // Held while ending each stream: a stream cannot be deleted meanwhile
  // (OnDone unregisters under this mutex first).
  absl::MutexLock lock(&streams_mu_);
  for (OpenStream* s : streams_) {
    s->EndWith(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "the server is shutting down (drain timeout)"));
  }
}

namespace {

// The unary engine calls (EmbedBatch, Rerank, Classify): admitted and
// parsed by UnaryCall::Begin, handed to the request layer by `submit`
// (Request, deadline, done, &model) -> handle, answered on the engine's
// thread through the call's link (a call that was cancelled, and maybe
// freed, meanwhile is never entered).
template <typename Request, typename Response, typename Submit>
grpc::ServerUnaryReactor* RunEngineCall(InferenceService* svc,
                                        grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* raw,
                                        grpc::ByteBuffer* out,
                                        absl::string_view rpc, Submit submit) {
  auto* call = new UnaryCall(svc, rpc, out);
  const Request* request = call->Begin<Request>(*ctx, *raw);
  if (request == nullptr) return call;
  // Through the link: an on-demand model's load may come first, on
  // another thread (RequestLayer::WhenModelReady).
  svc->requests()->WhenModelReady(
      request->model(),
      [link = call->link(), request, deadline = DeadlineOf(ctx), submit] {
        link->Enter([&](UnaryCall& c) {
          std::string model;
          absl::StatusOr<std::shared_ptr<RequestHandle>> handle = submit(
              *request, deadline,
              [link](absl::StatusOr<Response> response) {
                link->Visit([&](UnaryCall& c) { c.Done(response); });
              },
              &model);
          if (!model.empty()) c.SetModel(model);
          if (!handle.ok()) {
            c.Done(handle.status());
            return;
          }
          c.SetHandle(*handle);
        });
      });
  return call;
}

// The synchronous calls (Tokenize, Detokenize): `run` (Request, &model) ->
// StatusOr<Response>.
template <typename Request, typename Run>
grpc::ServerUnaryReactor* RunSyncCall(InferenceService* svc,
                                      grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* raw,
                                      grpc::ByteBuffer* out,
                                      absl::string_view rpc, Run run) {
  auto* call = new UnaryCall(svc, rpc, out);
  const Request* request = call->Begin<Request>(*ctx, *raw);
  if (request == nullptr) return call;
  svc->requests()->WhenModelReady(
      request->model(), [link = call->link(), request, run] {
        link->Enter([&](UnaryCall& c) {
          std::string model;
          auto response = run(*request, &model);
          if (!model.empty()) c.SetModel(model);
          c.Done(response);
        });
      });
  return call;
}

// An answer of the request layer converted to its inferd.v1 response.
template <typename Answer, typename Response, typename Fill>
std::function<void(absl::StatusOr<Answer>)> Converting(
    std::function<void(absl::StatusOr<Response>)> done, Fill fill) {
  return [done = std::move(done), fill = std::move(fill)](
             absl::StatusOr<Answer> answer) {
    if (!answer.ok()) {
      done(answer.status());
      return;
    }
    Response response;
    fill(*answer, &response);
    done(std::move(response));
  };
}

}  // namespace

absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitEmbed(
    RequestLayer* requests, const v1::EmbedRequest& req, absl::Time deadline,
    std::function<void(absl::StatusOr<v1::EmbedResponse>)> done,
    std::string* model) {
  // Only id and encoding are needed to build the answer.
  v1::EmbedRequest shape;
  shape.set_id(req.id());
  shape.set_encoding(req.encoding());
  return requests->Embed(
      ToEmbedInput(req, deadline),
      Converting<EmbedResult, v1::EmbedResponse>(
          std::move(done),
          [shape](const EmbedResult& r, v1::EmbedResponse* resp) {
            FillEmbedResponse(r, shape, resp);
          }),
      model);
}

grpc::ServerUnaryReactor* InferenceService::EmbedBatch(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  return RunEngineCall<v1::EmbedRequest, v1::EmbedResponse>(
      this, ctx, raw, out, "EmbedBatch",
      [this](const v1::EmbedRequest& req, absl::Time deadline,
             std::function<void(absl::StatusOr<v1::EmbedResponse>)> done,
             std::string* model) {
        return SubmitEmbed(requests_, req, deadline, std::move(done), model);
      });
}

grpc::ServerUnaryReactor* InferenceService::Rerank(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  return RunEngineCall<v1::RerankRequest, v1::RerankResponse>(
      this, ctx, raw, out, "Rerank",
      [this](const v1::RerankRequest& req, absl::Time deadline,
             std::function<void(absl::StatusOr<v1::RerankResponse>)> done,
             std::string* model) {
        return requests_->Rerank(
            ToRerankInput(req, deadline),
            Converting<RerankAnswer, v1::RerankResponse>(std::move(done),
                                                        &FillRerankResponse),
            model);
      });
}

grpc::ServerUnaryReactor* InferenceService::Classify(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  return RunEngineCall<v1::ClassifyRequest, v1::ClassifyResponse>(
      this, ctx, raw, out, "Classify",
      [this](const v1::ClassifyRequest& req, absl::Time deadline,
             std::function<void(absl::StatusOr<v1::ClassifyResponse>)> done,
             std::string* model) {
        return requests_->Classify(
            ToClassifyInput(req, deadline),
            Converting<ClassifyAnswer, v1::ClassifyResponse>(
                std::move(done), &FillClassifyResponse),
            model);
      });
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  return RunSyncCall<v1::TokenizeRequest>(
      this, ctx, raw, out, "Tokenize",
      [this](const v1::TokenizeRequest& req,
             std::string* model) -> absl::StatusOr<v1::TokenizeResponse> {
        absl::StatusOr<TokenizeAnswer> answer =
            requests_->Tokenize(ToTokenizeInput(req), model);
        if (!answer.ok()) return answer.status();
        v1::TokenizeResponse resp;
        FillTokenizeResponse(*answer, &resp);
        return resp;
      });
}

grpc::ServerUnaryReactor* InferenceService::Detokenize(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  return RunSyncCall<v1::DetokenizeRequest>(
      this, ctx, raw, out, "Detokenize",
      [this](const v1::DetokenizeRequest& req,
             std::string* model) -> absl::StatusOr<v1::DetokenizeResponse> {
        absl::StatusOr<std::string> text =
            requests_->Detokenize(ToDetokenizeInput(req), model);
        if (!text.ok()) return text.status();
        v1::DetokenizeResponse resp;
        resp.set_text(*std::move(text));
        return resp;
      });
}

// --------------------------------------------------------- ModelsService

template <typename Request>
grpc::ServerUnaryReactor* ModelsService::Query(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out, absl::string_view rpc,
    const std::function<absl::Status(const Request&, grpc::ByteBuffer*,
                                     std::string*)>& answer) {
  CallScope scope(requests_, std::string(rpc), CallScope::Kind::kQuery);
  auto* reactor = ctx->DefaultReactor();
  absl::Status status =
      scope.Admit(auth_, PresentedKey(*ctx), kGrpcKeyHint);
  Request request;
  if (status.ok()) status = ParseRequest(*raw, &request);
  std::string model;
  if (status.ok()) status = answer(request, out, &model);
  scope.set_model(model);
  scope.set_status(status);
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* ModelsService::ListModels(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  return Query<v1::ListModelsRequest>(
      ctx, raw, out, "ListModels",
      [this](const v1::ListModelsRequest&, grpc::ByteBuffer* bytes,
             std::string*) {
        v1::ListModelsResponse list;
        for (const ServedModelInfo& info : requests_->ListModels()) {
          FillModelInfo(info, list.add_models());
        }
        return SerializeResponse(list, bytes);
      });
}

grpc::ServerUnaryReactor* ModelsService::GetModel(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  return Query<v1::GetModelRequest>(
      ctx, raw, out, "GetModel",
      [this](const v1::GetModelRequest& request, grpc::ByteBuffer* bytes,
             std::string* model) -> absl::Status {
        absl::StatusOr<ServedModelInfo> info =
            requests_->GetModel(request.name());
        if (!info.ok()) return info.status();
        *model = info->name;
        v1::ModelInfo out;
        FillModelInfo(*info, &out);
        return SerializeResponse(out, bytes);
      });
}

template <typename Request>
grpc::ServerUnaryReactor* ModelsService::Change(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out, absl::string_view rpc,
    std::function<absl::StatusOr<ServedModelInfo>(const Request&)> run) {
  auto scope = std::make_shared<CallScope>(requests_, std::string(rpc));
  auto* reactor = ctx->DefaultReactor();
  absl::Status status = scope->Admit(auth_, PresentedKey(*ctx), kGrpcKeyHint);
  auto request = std::make_shared<Request>();
  if (status.ok()) status = ParseRequest(*raw, request.get());
  if (!status.ok()) {
    scope->set_status(status);
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  scope->set_model(request->name());
  std::thread([scope, request, reactor, out, run = std::move(run)] {
    absl::StatusOr<ServedModelInfo> info = run(*request);
    absl::Status s = info.status();
    if (s.ok()) {
      v1::ModelInfo answer;
      FillModelInfo(*info, &answer);
      s = SerializeResponse(answer, out);
    }
    scope->set_status(s);
    reactor->Finish(ToGrpcStatus(s));
  }).detach();
  return reactor;
}

grpc::ServerUnaryReactor* ModelsService::LoadModel(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  return Change<v1::LoadModelRequest>(
      ctx, raw, out, "LoadModel", [this](const v1::LoadModelRequest& r) {
        LoadModelInput in;
        in.name = r.name();
        in.path = r.path();
        // Sorted: a map's order is not the request's.
        std::map<std::string, std::string> sorted(r.options().begin(),
                                                  r.options().end());
        in.options.assign(sorted.begin(), sorted.end());
        in.replace = r.replace();
        in.wait = !r.no_wait();
        return requests_->LoadModel(in);
      });
}

grpc::ServerUnaryReactor* ModelsService::UnloadModel(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  return Change<v1::UnloadModelRequest>(
      ctx, raw, out, "UnloadModel", [this](const v1::UnloadModelRequest& r) {
        UnloadModelInput in;
        in.name = r.name();
        if (r.has_grace_seconds()) in.grace_seconds = r.grace_seconds();
        return requests_->UnloadModel(in);
      });
}

}  // namespace inferd
