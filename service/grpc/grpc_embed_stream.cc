// The gRPC front end's Embed: a bidirectional stream of EmbedRequests, each
// answered (in completion order) through the request layer, with flow
// control and backpressure.
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "service/grpc/grpc_calls.h"
#include "service/request/outbox.h"
#include "service/grpc/request_parse.h"
#include "service/grpc/status.h"

namespace inferd {
namespace {

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

  // A call that is not admitted ends at once.
  EmbedStreamCall(InferenceService* svc, const grpc::CallbackServerContext& ctx)
      : svc_(svc), scope_(svc->requests(), "Embed"), link_(Link::Create(this)) {
    outbox_.SetWriter(
        [this](const grpc::ByteBuffer& bytes) { StartWrite(&bytes); },
        [this](const absl::Status& status) {
          scope_.set_status(status);
          Finish(ToGrpcStatus(status));
        });
    absl::Status admit = svc_->Admit(ctx, &scope_);
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
    if (draining_) MaybeEndLocked();
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
    MaybeEndLocked();
  }

  // reading_ stays true until this reaction is done with raw_request_ and
  // request_, so no other thread starts the next read into them meanwhile.
  void OnReadDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        reading_ = false;
        reads_done_ = true;
        MaybeEndLocked();
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
    if (parsed.ok() && svc_->requests()->models()->WouldWait(request_.model())) {
      // An on-demand model loads first, on another thread (no gRPC thread
      // waits for it); reading stays paused until this message is in.
      svc_->requests()->WhenModelReady(request_.model(), [link = link_] {
        link->Enter([](EmbedStreamCall& call) {
          call.ContinueRead(absl::OkStatus());
        });
      });
      return;
    }
    ContinueRead(parsed);
  }

  // The rest of a read: the message parsed (or why not) is submitted.
  void ContinueRead(const absl::Status& parsed) {
    int64_t key = 0;
    int64_t answers_before = 0;
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
    if (!model_name.empty()) scope_.set_model(model_name);
    if (!AfterSubmitLocked(handle, key, request_, answers_before)) return;
    // Refused while the others were answered meanwhile: nothing of ours is
    // left to wake the parked request, so submit it again now.
    if (pending_ == 0) RetryParkedLocked();
    MaybeReadLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    outbox_.WriteDone(ok);
    if (!ok) {
      FailLocked(grpc::Status(grpc::StatusCode::CANCELLED,
                              "the stream was closed"));
      return;
    }
    MaybeReadLocked();
    MaybeEndLocked();
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
    outbox_.AwaitCallbacks();
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
  void OnResult(int64_t key, const std::string& id,
                absl::StatusOr<v1::EmbedResponse> result) {
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
    if (failed_) return;
    if (refused && sent.has_value() &&
        (pending_ > 0 || answers_ != sent->answers_at_submit)) {
      // Refused for room after it was accepted for tokenization: park it
      // like a refused submit. With nothing of ours left in flight but an
      // answer since it was sent, room was freed: retry now.
      parked_.emplace_back(key, std::move(sent->req));
      if (pending_ == 0) RetryParkedLocked();
      MaybeEndLocked();
      return;
    }
    // One of ours left the engine's queue: room for the parked requests.
    if (!refused) RetryParkedLocked();
    if (failed_) return;
    if (!result.ok()) {
      FailLocked(ToGrpcStatus(absl::Status(
          result.status().code(),
          absl::StrCat("request id '", id, "': ",
                       result.status().message()))));
      return;
    }
    grpc::ByteBuffer bytes;
    absl::Status written = SerializeResponse(*result, &bytes);
    if (!written.ok()) {
      FailLocked(ToGrpcStatus(written));
      return;
    }
    outbox_.Push(std::move(bytes));
    MaybeEndLocked();
  }

  // Converts and submits one request; the caller records the outcome
  // (AfterSubmitLocked). Thread-compatible: the reader reaction calls it
  // without mu_, a parked retry with it.
  absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitOne(
      const v1::EmbedRequest& req, int64_t key, std::string* model_name) {
    if (absl::Status s = svc_->requests()->CheckAccepting(); !s.ok()) return s;
    std::shared_ptr<Link> link = link_;
    auto handle = SubmitEmbed(
        svc_->requests(), req, absl::InfiniteFuture(),
        [link, key, id = req.id()](absl::StatusOr<v1::EmbedResponse> result) {
          link->Visit([&](EmbedStreamCall& call) {
            call.OnResult(key, id, std::move(result));
          });
        },
        model_name);
    if (!handle.ok()) {
      return absl::Status(handle.status().code(),
                          absl::StrCat("request id '", req.id(), "': ",
                                       handle.status().message()));
    }
    return handle;
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
    if (pending_ + static_cast<int64_t>(outbox_.queued()) >= kMaxInFlight) {
      return;
    }
    reading_ = true;
    StartRead(&raw_request_);
  }

  // Ends the stream with `status` at once (the first failure wins): pending
  // engine requests are aborted, their answers and what is queued dropped.
  void FailLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (failed_) return;
    failed_ = true;
    for (auto& [k, h] : handles_) h->Abort();
    handles_.clear();
    answered_.clear();
    sent_.clear();
    parked_.clear();
    outbox_.End(FromGrpcStatus(status), /*abandon=*/true);
  }

  // Ends the stream (after what is queued is written) once the client is
  // done and every request it sent was answered, or once the server drains
  // and nothing of this stream is in flight.
  void MaybeEndLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (failed_ || pending_ > 0 || !parked_.empty()) return;
    if (reads_done_) {
      outbox_.End(absl::OkStatus());
    } else if (draining_) {
      outbox_.End(absl::UnavailableError(
          "the server is shutting down; every request sent on this stream "
          "was answered"));
    }
  }

  InferenceService* svc_;
  // Under mu_, or in the outbox's finish (which runs under mu_ too: every
  // outbox call of this stream is made holding it).
  CallScope scope_;
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
  // Responses to write (serialized), in completion order.
  Outbox<grpc::ByteBuffer> outbox_;
  int64_t pending_ ABSL_GUARDED_BY(mu_) = 0;
  // Engine answers received so far (a refused submit that overlapped one
  // may be retried).
  int64_t answers_ ABSL_GUARDED_BY(mu_) = 0;
  // A read is in flight, or its reaction still uses request_.
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
InferenceService::Embed(grpc::CallbackServerContext* ctx) {
  return new EmbedStreamCall(this, *ctx);
}

}  // namespace inferd
