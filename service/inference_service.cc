#include "service/inference_service.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "runtime/engine/engine.h"
#include "runtime/tokenizer/tokenizer.h"
#include "service/logging.h"
#include "service/reactor_link.h"
#include "service/request_parse.h"
#include "service/status.h"

namespace inferd {
namespace {

absl::Time DeadlineOf(const grpc::CallbackServerContext* ctx) {
  auto tp = ctx->deadline();
  if (tp >= std::chrono::system_clock::time_point::max() -
                std::chrono::hours(24 * 365)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(tp);
}

// Counts a call as active from construction to OnDone and reports its
// outcome to the observer.
class CallStats {
 public:
  CallStats(InferenceService* svc, absl::string_view rpc)
      : svc_(svc), rpc_(rpc), start_(absl::Now()) {
    svc_->active_counter().fetch_add(1);
  }
  ~CallStats() {
    svc_->active_counter().fetch_sub(1);
    if (svc_->observer() != nullptr) {
      svc_->observer()->OnRpcDone(rpc_, model_, status_,
                                  absl::ToDoubleSeconds(absl::Now() - start_));
    }
  }
  void set_model(absl::string_view m) { model_ = std::string(m); }
  void set_status(const grpc::Status& s) { status_ = s; }

 private:
  InferenceService* svc_;
  std::string rpc_;
  std::string model_;
  grpc::Status status_;
  absl::Time start_;
};

// Unary call whose work finishes on an engine thread. Engine callbacks
// reach it only through its ReactorLink (see reactor_link.h). A cancel or an
// expired deadline aborts the engine request and ends the call at once; the
// engine's late answer is then dropped. The call owns its parsed request and
// its response message, which it serializes into gRPC's buffer when it ends
// OK (the methods are raw: see inference_service.h).
class UnaryCall : public grpc::ServerUnaryReactor {
 public:
  using Link = ReactorLink<UnaryCall>;

  // `out` is gRPC's response buffer, `response` the message for it.
  UnaryCall(InferenceService* svc, absl::string_view rpc, grpc::ByteBuffer* out,
            std::unique_ptr<google::protobuf::Message> response)
      : svc_(svc),
        stats_(svc, rpc),
        link_(Link::Create(this)),
        out_(out),
        response_(std::move(response)) {}

  // Admits the call (API key, not draining) and parses its request, which
  // the call keeps until it ends. Null when either failed: the call was
  // ended with the error.
  template <typename Request>
  const Request* Begin(const grpc::CallbackServerContext& ctx,
                       const grpc::ByteBuffer& raw) {
    absl::Status admit = svc_->Admit(ctx);
    if (!admit.ok()) {
      Done(admit);
      return nullptr;
    }
    auto request = std::make_unique<Request>();
    absl::Status parsed = ParseRequest(raw, request.get());
    if (!parsed.ok()) {
      Done(parsed);
      return nullptr;
    }
    const Request* out = request.get();
    request_ = std::move(request);
    return out;
  }

  // The response message (written before Done, or by Done's `fill`).
  template <typename Response>
  Response* response() {
    return static_cast<Response*>(response_.get());
  }

  // A copy for engine callbacks.
  std::shared_ptr<Link> link() const { return link_; }

  void SetModel(absl::string_view m) { stats_.set_model(m); }
  void SetHandle(std::shared_ptr<RequestHandle> handle) {
    absl::MutexLock lock(&mu_);
    handle_ = std::move(handle);
    if (finished_) handle_->Abort();
  }

  // Ends the call with `status` unless it has ended already; when `status`
  // is OK, `fill` (if set) writes the response first. The response belongs
  // to gRPC: it is only touched here, before Finish, under mu_.
  void Done(const grpc::Status& status,
            const std::function<void()>& fill = nullptr) {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
    grpc::Status end = status;
    if (status.ok()) {
      if (fill) fill();
      absl::Status written = SerializeResponse(*response_, out_);
      if (!written.ok()) end = ToGrpcStatus(written);
    }
    stats_.set_status(end);
    Finish(end);
  }
  void Done(const absl::Status& status) { Done(ToGrpcStatus(status)); }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      if (handle_) handle_->Abort();
    }
    Done(grpc::Status(grpc::StatusCode::CANCELLED,
                      "the client cancelled the call or its deadline passed"));
  }
  void OnDone() override {
    link_->Detach();  // waits for an engine callback inside the call
    AwaitReactions(&mu_);
    delete this;
  }

 private:
  InferenceService* const svc_;
  CallStats stats_;
  const std::shared_ptr<Link> link_;
  grpc::ByteBuffer* const out_;  // gRPC's; written by Done only
  // Set by Begin, before any engine callback; read-only afterwards.
  std::unique_ptr<google::protobuf::Message> request_;
  const std::unique_ptr<google::protobuf::Message> response_;
  absl::Mutex mu_;
  std::shared_ptr<RequestHandle> handle_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

absl::Status NotAccepting() {
  return absl::UnavailableError(
      "the server is shutting down and takes no new requests");
}

int64_t NumOutputs(const EmbedResult& r) {
  return static_cast<int64_t>(r.embeddings.size());
}
int64_t NumOutputs(const RerankResult& r) {
  return static_cast<int64_t>(r.scores.size());
}
int64_t NumOutputs(const ClassifyResult& r) {
  return static_cast<int64_t>(r.scores.size());
}

void ReportPrefill(const InferenceService* svc, absl::string_view task,
                   absl::string_view model, int64_t inputs, int64_t tokens,
                   const RequestTimings& timings) {
  if (svc->observer() != nullptr) {
    svc->observer()->OnPrefillDone(task, model, inputs, tokens, timings);
  }
}

// The model for Tokenize/Detokenize: any task.
absl::StatusOr<const ServedModel*> ResolveAnyModel(const ModelManager& models,
                                                   const std::string& name) {
  const ServedModel* model = nullptr;
  if (name.empty()) {
    if (models.models().size() != 1) {
      return absl::InvalidArgumentError(
          "model: this server has several models; set the request's model "
          "field (see ListModels)");
    }
    model = models.models()[0].get();
  } else {
    auto found = models.Find(name);
    if (!found.ok()) return found.status();
    model = *found;
  }
  if (model->state() == ModelState::kLoading) {
    return absl::UnavailableError(
        absl::StrCat("model '", model->name(), "' is still loading"));
  }
  if (model->state() == ModelState::kFailed) {
    return absl::UnavailableError(absl::StrCat(
        "model '", model->name(), "' failed to load: ", model->info().error));
  }
  return model;
}

// ------------------------------------------------------------- Generate

// Streams one generation. The engine delivers chunks on its thread through
// the call's ReactorLink; writes are serialized (one in flight, the rest
// queued). The call ends after the final chunk (of the last sample, with
// SamplingParams.n > 1) is written, at once on a
// cancel or a failed write (the engine request is aborted and its late
// chunks are dropped), or with the engine's error (input errors found by
// the engine's prep worker, such as a prompt too long, arrive that way;
// gRPC holds a Finish that comes before the reactor is bound).
class GenerateCall : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  using Link = ReactorLink<GenerateCall>;

  GenerateCall(InferenceService* svc, std::string request_id)
      : svc_(svc),
        stats_(svc, "Generate"),
        request_id_(std::move(request_id)),
        link_(Link::Create(this)) {}

  // Runs inside the Generate handler, before gRPC binds the reactor, so no
  // reaction (and no OnDone) can run meanwhile.
  void Start(ServedModel* model, const v1::GenerateRequest& req,
             absl::Time deadline) {
    stats_.set_model(model->name());
    model_ = model->name();
    tokenizer_ = &model->tokenizer();
    auto params = ToGenerateParams(req, model->info(), deadline);
    if (!params.ok()) {
      FinishNow(ToGrpcStatus(params.status()));
      return;
    }
    if (params->request_id.empty()) params->request_id = request_id_;
    std::shared_ptr<Link> link = link_;
    auto handle = model->engine().SubmitGenerate(
        std::move(params).value(),
        [link](const absl::StatusOr<GenerateChunk>& chunk) {
          link->Visit([&chunk](GenerateCall& call) { call.OnChunk(chunk); });
        });
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
  void OnChunk(const absl::StatusOr<GenerateChunk>& chunk) {
    absl::MutexLock lock(&mu_);
    if (end_.has_value()) return;  // the call is ending: drop late chunks
    if (!chunk.ok()) {
      EndLocked(ToGrpcStatus(chunk.status()), /*abandon=*/false);
      return;
    }
    const GenerateChunk& c = *chunk;
    const bool last_message =
        c.finish != FinishReason::kNone && !c.more_samples;
    // Inter-token gaps are per sample (n > 1 interleaves them).
    const size_t sample = static_cast<size_t>(std::max(c.sample_index, 0));
    if (sample >= last_token_.size()) {
      last_token_.resize(sample + 1, absl::InfinitePast());
    }
    absl::Time& last_token = last_token_[sample];
    if (!c.token_ids.empty() && svc_->observer() != nullptr) {
      const absl::Time now = absl::Now();
      if (last_token != absl::InfinitePast()) {
        const double gap = absl::ToDoubleSeconds(now - last_token) /
                           static_cast<double>(c.token_ids.size());
        for (size_t i = 0; i < c.token_ids.size(); ++i) {
          inter_token_seconds_.push_back(gap);
        }
      } else if (c.token_ids.size() > 1) {
        inter_token_seconds_.insert(inter_token_seconds_.end(),
                                    c.token_ids.size() - 1, 0.0);
      }
      last_token = now;
    }
    if (c.finish != FinishReason::kNone) {
      completion_tokens_ += c.completion_tokens;
    }
    if (last_message && svc_->observer() != nullptr) {
      // One generation per call: with n > 1, the prompt once and every
      // sample's tokens.
      GenerateChunk done = c;
      done.completion_tokens = completion_tokens_;
      svc_->observer()->OnGenerateDone(model_, done, inter_token_seconds_);
    }
    v1::GenerateResponse resp;
    resp.set_request_id(request_id_);
    resp.set_sample_index(static_cast<uint32_t>(sample));
    for (const TokenLogprobs& lp : c.prompt_logprobs) {
      FillLogprobs(lp, resp.add_prompt_logprobs());
    }
    resp.set_text(c.text);
    for (int32_t id : c.token_ids) resp.add_token_ids(id);
    for (const TokenLogprobs& lp : c.logprobs) {
      FillLogprobs(lp, resp.add_logprobs());
    }
    if (c.finish != FinishReason::kNone) {
      resp.set_finish_reason(ToProtoFinishReason(c.finish));
      resp.set_stop_reason(c.stop_reason);
      v1::Usage* u = resp.mutable_usage();
      u->set_prompt_tokens(static_cast<uint32_t>(c.prompt_tokens));
      u->set_completion_tokens(static_cast<uint32_t>(c.completion_tokens));
      u->set_cached_prompt_tokens(static_cast<uint32_t>(c.cached_prompt_tokens));
      u->set_draft_tokens(static_cast<uint32_t>(c.draft_tokens));
      u->set_accepted_draft_tokens(
          static_cast<uint32_t>(c.accepted_draft_tokens));
      u->set_total_tokens(
          static_cast<uint32_t>(c.prompt_tokens + c.completion_tokens));
      v1::Timings* t = resp.mutable_timings();
      t->set_queue_seconds(c.timings.queue_seconds);
      t->set_time_to_first_token_seconds(c.timings.time_to_first_token_seconds);
      t->set_total_seconds(c.timings.total_seconds);
    }
    grpc::ByteBuffer bytes;
    absl::Status written = SerializeResponse(resp, &bytes);
    if (!written.ok()) {
      if (handle_) handle_->Abort();
      EndLocked(ToGrpcStatus(written), /*abandon=*/false);
      return;
    }
    queue_.push_back(std::move(bytes));
    if (last_message) {
      EndLocked(grpc::Status::OK, /*abandon=*/false);
      return;
    }
    PumpLocked();
  }

  void FillLogprobs(const TokenLogprobs& lp, v1::SampledLogprobs* out) const {
    out->mutable_sampled()->set_token_id(lp.sampled.token_id);
    out->mutable_sampled()->set_token(tokenizer_->IdToToken(lp.sampled.token_id));
    out->mutable_sampled()->set_logprob(lp.sampled.logprob);
    for (const TokenLogprobValue& t : lp.top) {
      v1::TokenLogprob* o = out->add_top();
      o->set_token_id(t.token_id);
      o->set_token(tokenizer_->IdToToken(t.token_id));
      o->set_logprob(t.logprob);
    }
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
  const std::string request_id_;
  const std::shared_ptr<Link> link_;
  std::string model_;  // set by Start, before any chunk
  // The model's tokenizer (it outlives every call); set by Start.
  const Tokenizer* tokenizer_ = nullptr;
  absl::Mutex mu_;
  std::shared_ptr<RequestHandle> handle_ ABSL_GUARDED_BY(mu_);
  // Per sample: when its last token arrived.
  std::vector<absl::Time> last_token_ ABSL_GUARDED_BY(mu_);
  // Completion tokens of the samples that finished.
  int64_t completion_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<double> inter_token_seconds_ ABSL_GUARDED_BY(mu_);
  // Responses to write (serialized); the front one is in flight while
  // writing_.
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// ------------------------------------------------------------ Embed (bidi)

class EmbedStreamCall
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public InferenceService::OpenStream {
 public:
  using Link = ReactorLink<EmbedStreamCall>;

  // Requests of one stream that may be submitted but not yet written back;
  // beyond it the stream stops reading until answers drain (flow control:
  // a client that does not read cannot grow the server's memory).
  static constexpr int64_t kMaxInFlight = 64;

  // `admit` not OK: the call ends at once with it.
  EmbedStreamCall(InferenceService* svc, const absl::Status& admit)
      : svc_(svc), stats_(svc, "Embed"), link_(Link::Create(this)) {
    if (!admit.ok()) {
      absl::MutexLock lock(&mu_);
      FailLocked(ToGrpcStatus(admit));
      return;
    }
    // Before taking mu_: the service's streams mutex is taken first
    // (CancelStreams holds it while it ends each stream).
    svc_->RegisterStream(this);
    registered_ = true;
    absl::MutexLock lock(&mu_);
    // A drain that began before the registration did not see this stream.
    draining_ = !svc_->accepting();
    reading_ = true;
    StartRead(&raw_request_);
    if (draining_) PumpLocked();
  }

  // Drain timeout (InferenceService::CancelStreams, under its streams
  // mutex, which OnDone also takes before the call is deleted).
  void EndWith(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    FailLocked(status);
  }

  // Drain start (InferenceService::StopAccepting, under its streams mutex).
  void OnDrain() override {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    PumpLocked();
  }

  // reading_ stays true until this reaction is done with raw_request_ and
  // request_, so no other thread starts the next read into them meanwhile.
  void OnReadDone(bool ok) override {
    int64_t key = 0;
    int64_t answers_before = 0;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        reading_ = false;
        reads_done_ = true;
        PumpLocked();
        return;
      }
      if (failed_) {
        reading_ = false;
        return;
      }
    }
    // Outside mu_ (a large message takes a while).
    ++messages_read_;
    absl::Status parsed = ParseRequest(raw_request_, &request_);
    raw_request_.Clear();
    {
      absl::MutexLock lock(&mu_);
      if (failed_) {
        reading_ = false;
        return;
      }
      if (!parsed.ok()) {
        // The bytes are not an EmbedRequest (its id is unknown): the
        // stream fails naming the message by its place in the stream.
        reading_ = false;
        FailLocked(ToGrpcStatus(absl::Status(
            parsed.code(), absl::StrCat("message ", messages_read_,
                                        " of the stream: ", parsed.message()))));
        return;
      }
      key = next_key_++;
      ++pending_;  // the engine may answer before SubmitOne returns
      answers_before = answers_;
      // Kept until answered: a queue refusal found after tokenization
      // (through the callback) parks it for a retry.
      sent_[key] = Sent{request_, answers_};
    }
    // Outside mu_: with --tokenization-workers 0 tokenization runs here,
    // and engine answers for this stream's other requests must not wait
    // for it.
    std::string model_name;
    auto handle = SubmitOne(request_, key, &model_name);
    absl::MutexLock lock(&mu_);
    reading_ = false;
    if (!model_name.empty()) stats_.set_model(model_name);
    if (!AfterSubmitLocked(handle, key, request_, answers_before)) return;
    // Refused while the others were answered meanwhile: nothing of ours is
    // left to wake the parked request, so submit it again now.
    if (pending_ == 0) RetryParkedLocked();
    MaybeReadLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!queue_.empty()) queue_.pop_front();
    if (!ok) {
      FailLocked(grpc::Status(grpc::StatusCode::CANCELLED,
                              "the stream was closed"));
      return;
    }
    MaybeReadLocked();
    PumpLocked();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FailLocked(grpc::Status(grpc::StatusCode::CANCELLED,
                            "the client cancelled the call"));
  }

  void OnDone() override {
    if (registered_) svc_->UnregisterStream(this);
    link_->Detach();  // waits for an engine callback inside the call
    AwaitReactions(&mu_);
    delete this;
  }

 private:
  // Records the outcome of submitting `req` as `key` (pending_ already
  // counts it). A full engine queue while this stream has other requests
  // in flight parks the request instead of failing the stream: reading
  // stops, and the request is submitted again when one of the others is
  // answered (backpressure). `answers_before` is answers_ when the submit
  // began: an answer since then also freed room in the queue. False when
  // the stream failed. The engine may also refuse later, through the
  // callback (a token budget is only checked after tokenization); OnResult
  // parks those the same way.
  bool AfterSubmitLocked(
      const absl::StatusOr<std::shared_ptr<RequestHandle>>& handle,
      int64_t key, const v1::EmbedRequest& req, int64_t answers_before)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!handle.ok()) {
      --pending_;
      sent_.erase(key);
      if (handle.status().code() == absl::StatusCode::kResourceExhausted &&
          (pending_ > 0 || answers_ != answers_before) && !failed_) {
        parked_.emplace_back(key, req);
        return true;
      }
      FailLocked(ToGrpcStatus(absl::Status(
          handle.status().code(),
          absl::StrCat("request id '", req.id(), "': ",
                       handle.status().message()))));
      return false;
    }
    if (failed_) {
      (*handle)->Abort();
    } else if (answered_.erase(key) == 0) {
      handles_[key] = *handle;  // still running: a failure can abort it
    }
    return true;
  }

  // Engine thread, through the link.
  void OnResult(int64_t key, const v1::EmbedRequest& shape,
                absl::StatusOr<EmbedResult> result) {
    absl::MutexLock lock(&mu_);
    --pending_;
    const bool refused =
        !result.ok() &&
        result.status().code() == absl::StatusCode::kResourceExhausted;
    std::optional<Sent> sent;
    if (auto it = sent_.find(key); it != sent_.end()) {
      sent = std::move(it->second);
      sent_.erase(it);
    }
    if (!refused) ++answers_;
    if (handles_.erase(key) == 0 && !failed_) answered_.insert(key);
    if (failed_) {
      PumpLocked();
      return;
    }
    if (refused && sent.has_value() &&
        (pending_ > 0 || answers_ != sent->answers_at_submit)) {
      // Refused for room after it was accepted for tokenization: park it
      // like a refused submit. With nothing of ours left in flight but an
      // answer since it was sent, room was freed: retry now.
      parked_.emplace_back(key, std::move(sent->req));
      if (pending_ == 0) RetryParkedLocked();
      PumpLocked();
      return;
    }
    // One of ours left the engine's queue: room for the parked requests.
    if (!refused) RetryParkedLocked();
    if (failed_) return;
    if (!result.ok()) {
      FailLocked(ToGrpcStatus(absl::Status(
          result.status().code(),
          absl::StrCat("request id '", shape.id(), "': ",
                       result.status().message()))));
      return;
    }
    v1::EmbedResponse resp;
    FillEmbedResponse(*result, shape, &resp);
    grpc::ByteBuffer bytes;
    absl::Status written = SerializeResponse(resp, &bytes);
    if (!written.ok()) {
      FailLocked(ToGrpcStatus(written));
      return;
    }
    queue_.push_back(std::move(bytes));
    PumpLocked();
  }

  // Converts and submits one request; the caller records the outcome
  // (AfterSubmitLocked). Thread-compatible: the reader reaction calls it
  // without mu_, a parked retry with it.
  absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitOne(
      const v1::EmbedRequest& req, int64_t key, std::string* model_name) {
    if (!svc_->accepting()) return NotAccepting();
    auto model = svc_->models()->Resolve(req.model(), Task::kEmbed);
    if (!model.ok()) {
      return absl::Status(model.status().code(),
                          absl::StrCat("request id '", req.id(), "': ",
                                       model.status().message()));
    }
    *model_name = (*model)->name();
    ServedModelInfo info = (*model)->info();
    auto params = ToEmbedParams(req, info, svc_->limits(),
                                absl::InfiniteFuture());
    if (!params.ok()) {
      return absl::Status(params.status().code(),
                          absl::StrCat("request id '", req.id(), "': ",
                                       params.status().message()));
    }
    // Only id and encoding are needed to build the answer.
    auto shape = std::make_shared<v1::EmbedRequest>();
    shape->set_id(req.id());
    shape->set_encoding(req.encoding());
    InferenceService* svc = svc_;
    std::shared_ptr<Link> link = link_;
    return (*model)->engine().SubmitEmbed(
        std::move(params).value(),
        [svc, link, shape, key, model_name = (*model)->name()](
            absl::StatusOr<EmbedResult> result) {
          if (result.ok()) {
            ReportPrefill(svc, "embed", model_name,
                          static_cast<int64_t>(result->embeddings.size()),
                          result->total_tokens, result->timings);
          }
          link->Visit([&](EmbedStreamCall& call) {
            call.OnResult(key, *shape, std::move(result));
          });
        });
  }

  // Submits the parked requests again, oldest first (engine Submit never
  // calls back inside, so mu_ may be held), until one is refused again: it
  // stays parked while others of this stream are in flight; with none, the
  // stream fails. Reading resumes once none is parked.
  void RetryParkedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!parked_.empty() && !failed_) {
      auto [key, req] = std::move(parked_.front());
      parked_.pop_front();
      ++pending_;
      sent_[key] = Sent{req, answers_};
      std::string model_name;
      auto handle = SubmitOne(req, key, &model_name);
      if (!AfterSubmitLocked(handle, key, req, answers_)) return;
      if (!handle.ok()) break;  // parked again: wait for an answer
    }
    if (parked_.empty()) MaybeReadLocked();
  }

  void MaybeReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reading_ || reads_done_ || failed_ || !parked_.empty()) return;
    if (pending_ + static_cast<int64_t>(queue_.size()) >= kMaxInFlight) return;
    reading_ = true;
    StartRead(&raw_request_);
  }

  // Ends the stream with `status` at once (the first failure wins): pending
  // engine requests are aborted and their answers dropped.
  void FailLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!failed_) {
      failed_ = true;
      final_status_ = status;
      // The front response stays while its write is in flight.
      while (queue_.size() > (writing_ ? 1u : 0u)) queue_.pop_back();
      for (auto& [k, h] : handles_) h->Abort();
      handles_.clear();
      answered_.clear();
      sent_.clear();
      parked_.clear();
    }
    PumpLocked();
  }

  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (!queue_.empty() && !failed_) {
      writing_ = true;
      StartWrite(&queue_.front());
      return;
    }
    // Ends once the stream failed, or the client is done and every request
    // it sent was answered.
    if (failed_ || (reads_done_ && pending_ == 0 && parked_.empty())) {
      finished_ = true;
      stats_.set_status(final_status_);
      Finish(final_status_);
    } else if (draining_ && pending_ == 0 && parked_.empty()) {
      // Every request of the stream was answered and written; the server
      // takes no new ones.
      finished_ = true;
      final_status_ = grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          "the server is shutting down; every request sent on this stream "
          "was answered");
      stats_.set_status(final_status_);
      Finish(final_status_);
    }
  }

  InferenceService* svc_;
  CallStats stats_;
  const std::shared_ptr<Link> link_;
  bool registered_ = false;  // set in the constructor only
  absl::Mutex mu_;
  // The read reaction's only: the bytes read, and the request parsed from
  // them.
  grpc::ByteBuffer raw_request_;
  v1::EmbedRequest request_;
  int64_t messages_read_ = 0;
  int64_t next_key_ ABSL_GUARDED_BY(mu_) = 0;
  // Engine requests not answered yet, by key.
  std::map<int64_t, std::shared_ptr<RequestHandle>> handles_ ABSL_GUARDED_BY(mu_);
  // Requests answered before SubmitOne stored their handle.
  std::set<int64_t> answered_ ABSL_GUARDED_BY(mu_);
  // Requests the engine's full queue refused while others of this stream
  // were in flight, by key, oldest first; submitted again when one of them
  // is answered.
  std::deque<std::pair<int64_t, v1::EmbedRequest>> parked_
      ABSL_GUARDED_BY(mu_);
  // Requests submitted and not answered yet, with answers_ at their submit
  // (a refusal through the callback parks the request again).
  struct Sent {
    v1::EmbedRequest req;
    int64_t answers_at_submit = 0;
  };
  std::map<int64_t, Sent> sent_ ABSL_GUARDED_BY(mu_);
  // Responses to write (serialized); the front one is in flight while
  // writing_.
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  int64_t pending_ ABSL_GUARDED_BY(mu_) = 0;
  // Engine answers received so far (a refused submit that overlapped one
  // may be retried).
  int64_t answers_ ABSL_GUARDED_BY(mu_) = 0;
  // A read is in flight, or its reaction still uses request_.
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

InferenceService::InferenceService(ModelManager* models, ApiLimits limits,
                                   RpcObserver* observer,
                                   const ApiKeyAuth* auth)
    : models_(models), limits_(limits), observer_(observer), auth_(auth) {}

absl::Status InferenceService::Admit(
    const grpc::CallbackServerContext& ctx) const {
  if (auth_ != nullptr) {
    absl::Status s = auth_->Check(ctx);
    if (!s.ok()) return s;
  }
  if (!accepting()) return NotAccepting();
  return absl::OkStatus();
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
  accepting_.store(false);
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

grpc::ServerWriteReactor<grpc::ByteBuffer>* InferenceService::Generate(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw) {
  // GenerateCall::Start copies what it needs from the request.
  v1::GenerateRequest request;
  absl::Status admit = Admit(*ctx);
  absl::Status parsed = admit.ok() ? ParseRequest(*raw, &request) : admit;
  auto* call = new GenerateCall(this, request.request_id().empty()
                                          ? absl::StrCat("gen-", absl::ToUnixNanos(absl::Now()))
                                          : request.request_id());
  if (!parsed.ok()) {
    call->FinishNow(ToGrpcStatus(parsed));
    return call;
  }
  auto model = models_->Resolve(request.model(), Task::kGenerate);
  if (!model.ok()) {
    call->FinishNow(ToGrpcStatus(model.status()));
    return call;
  }
  call->Start(*model, request, DeadlineOf(ctx));
  return call;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
InferenceService::Embed(grpc::CallbackServerContext* ctx) {
  return new EmbedStreamCall(this, Admit(*ctx));
}

namespace {

// The unary prefill RPCs (EmbedBatch, Rerank, Classify) share one flow
// after admission and parsing (UnaryCall::Begin): model resolution,
// conversion, submission, and the answer on the engine's thread. `submit`
// converts the request and calls the engine with the callback it is given;
// `fill` writes the response from the result.
template <typename Result>
grpc::ServerUnaryReactor* RunPrefillCall(
    InferenceService* svc, UnaryCall* call, grpc::CallbackServerContext* ctx,
    absl::string_view task_name, const std::string& model_name, Task task,
    const std::function<absl::StatusOr<std::shared_ptr<RequestHandle>>(
        ServedModel&, absl::Time, ResultCallback<Result>)>& submit,
    std::function<void(const ServedModelInfo&, const Result&)> fill) {
  auto model = svc->models()->Resolve(model_name, task);
  if (!model.ok()) {
    call->Done(model.status());
    return call;
  }
  call->SetModel((*model)->name());
  ServedModelInfo info = (*model)->info();
  std::string task_label(task_name);
  // The engine answers on its thread through the call's link: a call that
  // was cancelled (and maybe freed) meanwhile is never entered.
  auto handle = submit(
      **model, DeadlineOf(ctx),
      [svc, link = call->link(), info, task_label,
       fill = std::move(fill)](absl::StatusOr<Result> result) {
        if (result.ok()) {
          ReportPrefill(svc, task_label, info.name, NumOutputs(*result),
                        result->total_tokens, result->timings);
        }
        link->Visit([&](UnaryCall& c) {
          if (!result.ok()) {
            c.Done(result.status());
            return;
          }
          c.Done(grpc::Status::OK, [&] { fill(info, *result); });
        });
      });
  if (!handle.ok()) {
    call->Done(handle.status());
    return call;
  }
  call->SetHandle(*handle);
  return call;
}

}  // namespace

grpc::ServerUnaryReactor* InferenceService::EmbedBatch(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  auto* call = new UnaryCall(this, "EmbedBatch", out,
                             std::make_unique<v1::EmbedResponse>());
  const auto* request = call->Begin<v1::EmbedRequest>(*ctx, *raw);
  if (request == nullptr) return call;
  auto* response = call->response<v1::EmbedResponse>();
  return RunPrefillCall<EmbedResult>(
      this, call, ctx, "embed", request->model(), Task::kEmbed,
      [this, request](ServedModel& model, absl::Time deadline,
                      ResultCallback<EmbedResult> done)
          -> absl::StatusOr<std::shared_ptr<RequestHandle>> {
        auto params = ToEmbedParams(*request, model.info(), limits_, deadline);
        if (!params.ok()) return params.status();
        return model.engine().SubmitEmbed(std::move(params).value(),
                                          std::move(done));
      },
      [request, response](const ServedModelInfo&, const EmbedResult& r) {
        FillEmbedResponse(r, *request, response);
      });
}

grpc::ServerUnaryReactor* InferenceService::Rerank(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  auto* call = new UnaryCall(this, "Rerank", out,
                             std::make_unique<v1::RerankResponse>());
  const auto* request = call->Begin<v1::RerankRequest>(*ctx, *raw);
  if (request == nullptr) return call;
  auto* response = call->response<v1::RerankResponse>();
  return RunPrefillCall<RerankResult>(
      this, call, ctx, "rerank", request->model(), Task::kRerank,
      [this, request](ServedModel& model, absl::Time deadline,
                      ResultCallback<RerankResult> done)
          -> absl::StatusOr<std::shared_ptr<RequestHandle>> {
        auto params = ToRerankParams(*request, limits_, deadline);
        if (!params.ok()) return params.status();
        return model.engine().SubmitRerank(std::move(params).value(),
                                           std::move(done));
      },
      [request, response](const ServedModelInfo&, const RerankResult& r) {
        FillRerankResponse(r, *request, response);
      });
}

grpc::ServerUnaryReactor* InferenceService::Classify(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  auto* call = new UnaryCall(this, "Classify", out,
                             std::make_unique<v1::ClassifyResponse>());
  const auto* request = call->Begin<v1::ClassifyRequest>(*ctx, *raw);
  if (request == nullptr) return call;
  auto* response = call->response<v1::ClassifyResponse>();
  return RunPrefillCall<ClassifyResult>(
      this, call, ctx, "classify", request->model(), Task::kClassify,
      [this, request](ServedModel& model, absl::Time deadline,
                      ResultCallback<ClassifyResult> done)
          -> absl::StatusOr<std::shared_ptr<RequestHandle>> {
        auto params = ToClassifyParams(*request, limits_, deadline);
        if (!params.ok()) return params.status();
        return model.engine().SubmitClassify(std::move(params).value(),
                                             std::move(done));
      },
      [response](const ServedModelInfo& info, const ClassifyResult& r) {
        FillClassifyResponse(r, info, response);
      });
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  auto* call = new UnaryCall(this, "Tokenize", out,
                             std::make_unique<v1::TokenizeResponse>());
  const auto* request = call->Begin<v1::TokenizeRequest>(*ctx, *raw);
  if (request == nullptr) return call;
  auto* response = call->response<v1::TokenizeResponse>();
  auto model = ResolveAnyModel(*models_, request->model());
  if (!model.ok()) {
    call->Done(model.status());
    return call;
  }
  call->SetModel((*model)->name());
  const bool chat = request->messages_size() > 0;
  if (chat && !request->text().empty()) {
    call->Done(absl::InvalidArgumentError(
        "messages: give text or messages, not both"));
    return call;
  }
  // A chat template writes its own special tokens.
  const bool add_special = request->has_add_special_tokens()
                               ? request->add_special_tokens()
                               : !chat;
  std::string rendered;
  if (chat) {
    std::vector<ChatMessage> messages;
    absl::Status valid = ToChatMessages(request->messages(), &messages);
    if (!valid.ok()) {
      call->Done(valid);
      return call;
    }
    auto text = (*model)->RenderChat(
        messages, request->has_add_generation_prompt()
                      ? request->add_generation_prompt()
                      : true);
    if (!text.ok()) {
      call->Done(text.status());
      return call;
    }
    rendered = std::move(text).value();
  }
  auto enc = (*model)->tokenizer().Encode(chat ? rendered : request->text(),
                                          add_special);
  if (chat) response->set_rendered_prompt(rendered);
  if (!enc.ok()) {
    call->Done(enc.status());
    return call;
  }
  for (size_t i = 0; i < enc->ids.size(); ++i) {
    response->add_token_ids(static_cast<uint32_t>(enc->ids[i]));
    if (i < enc->tokens.size()) response->add_tokens(enc->tokens[i]);
    if (request->return_offsets() && i < enc->offsets.size()) {
      v1::Offset* o = response->add_offsets();
      o->set_start(enc->offsets[i].first);
      o->set_end(enc->offsets[i].second);
    }
  }
  call->Done(grpc::Status::OK);
  return call;
}

grpc::ServerUnaryReactor* InferenceService::Detokenize(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  auto* call = new UnaryCall(this, "Detokenize", out,
                             std::make_unique<v1::DetokenizeResponse>());
  const auto* request = call->Begin<v1::DetokenizeRequest>(*ctx, *raw);
  if (request == nullptr) return call;
  auto* response = call->response<v1::DetokenizeResponse>();
  auto model = ResolveAnyModel(*models_, request->model());
  if (!model.ok()) {
    call->Done(model.status());
    return call;
  }
  call->SetModel((*model)->name());
  const Tokenizer& tok = (*model)->tokenizer();
  std::vector<int32_t> ids;
  ids.reserve(request->token_ids_size());
  for (uint32_t id : request->token_ids()) {
    if (id >= tok.vocab_size()) {
      call->Done(absl::InvalidArgumentError(
          absl::StrCat("token_ids: id ", id, " is outside the vocabulary [0, ",
                       tok.vocab_size(), ")")));
      return call;
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  const bool skip = request->has_skip_special_tokens()
                        ? request->skip_special_tokens()
                        : true;
  auto text = tok.Decode(ids, skip);
  if (!text.ok()) {
    call->Done(text.status());
    return call;
  }
  response->set_text(*text);
  call->Done(grpc::Status::OK);
  return call;
}

bool ModelsService::Admit(grpc::CallbackServerContext* ctx,
                          grpc::ServerUnaryReactor* reactor,
                          absl::string_view rpc) {
  if (auth_ == nullptr) return true;
  absl::Status s = auth_->Check(*ctx);
  if (s.ok()) return true;
  grpc::Status status = ToGrpcStatus(s);
  Report(rpc, "", status, absl::Now());
  reactor->Finish(status);
  return false;
}

void ModelsService::Report(absl::string_view rpc, absl::string_view model,
                           const grpc::Status& status, absl::Time start) {
  if (observer_ != nullptr) {
    observer_->OnRpcDone(rpc, model, status,
                         absl::ToDoubleSeconds(absl::Now() - start));
  }
}

grpc::ServerUnaryReactor* ModelsService::ListModels(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  const absl::Time start = absl::Now();
  auto* reactor = ctx->DefaultReactor();
  if (!Admit(ctx, reactor, "ListModels")) return reactor;
  v1::ListModelsRequest request;
  grpc::Status status = ToGrpcStatus(ParseRequest(*raw, &request));
  if (status.ok()) {
    v1::ListModelsResponse response;
    for (const ServedModelInfo& info : models_->List()) {
      FillModelInfo(info, response.add_models());
    }
    status = ToGrpcStatus(SerializeResponse(response, out));
  }
  Report("ListModels", "", status, start);
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* ModelsService::GetModel(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
    grpc::ByteBuffer* out) {
  const absl::Time start = absl::Now();
  auto* reactor = ctx->DefaultReactor();
  if (!Admit(ctx, reactor, "GetModel")) return reactor;
  v1::GetModelRequest parsed;
  v1::ModelInfo info;
  const v1::GetModelRequest* request = &parsed;
  v1::ModelInfo* response = &info;
  grpc::Status status = ToGrpcStatus(ParseRequest(*raw, &parsed));
  std::string model_name;
  if (!status.ok()) {
    // Reported below.
  } else if (request->name().empty()) {
    status = ToGrpcStatus(absl::InvalidArgumentError(
        "name: set the model name (see ListModels)"));
  } else {
    auto model = models_->Find(request->name());
    if (!model.ok()) {
      status = ToGrpcStatus(model.status());
    } else {
      model_name = (*model)->name();
      FillModelInfo((*model)->info(), response);
      status = ToGrpcStatus(SerializeResponse(info, out));
    }
  }
  Report("GetModel", model_name, status, start);
  reactor->Finish(status);
  return reactor;
}

}  // namespace inferd
