#include "service/grpc/health.h"

#include "absl/strings/str_cat.h"
#include "service/grpc/reactor_link.h"

namespace inferd {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Watch stream: sends the current status, then every change, until the
// client cancels or the server shuts down. Writes are serialized: at most
// one in flight; only the latest pending status is kept.
class HealthService::Watcher
    : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  Watcher(HealthService* svc, std::string service)
      : svc_(svc), service_(std::move(service)) {}

  const std::string& service() const { return service_; }

  // Called with svc_->mu_ held.
  void Send(ServingStatus status) {
    absl::MutexLock lock(&mu_);
    if (done_) return;
    pending_ = status;
    has_pending_ = true;
    PumpLocked();
  }

  void End() {
    absl::MutexLock lock(&mu_);
    ending_ = true;
    PumpLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) ending_ = true;
    PumpLocked();
  }

  void OnCancel() override { End(); }

  void OnDone() override {
    svc_->Unregister(this);
    AwaitReactions(&mu_);
    delete this;
  }

 private:
  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || done_) return;
    if (has_pending_ && !ending_) {
      has_pending_ = false;
      response_.set_status(pending_);
      writing_ = true;
      StartWrite(&response_);
      return;
    }
    if (ending_) {
      done_ = true;
      Finish(grpc::Status::OK);
    }
  }

  HealthService* svc_;
  const std::string service_;
  absl::Mutex mu_;
  HealthCheckResponse response_ ABSL_GUARDED_BY(mu_);
  ServingStatus pending_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;
  bool has_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

HealthService::HealthService(std::vector<std::string> services) {
  absl::MutexLock lock(&mu_);
  status_[""] = HealthCheckResponse::NOT_SERVING;
  for (const std::string& s : services) {
    status_[s] = HealthCheckResponse::NOT_SERVING;
  }
}

HealthService::~HealthService() { Shutdown(); }

void HealthService::SetServing(bool serving) {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return;
  ServingStatus s =
      serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  for (auto& [name, status] : status_) status = s;
  for (Watcher* w : watchers_) {
    if (status_.count(w->service())) w->Send(s);
  }
}

void HealthService::SetStatus(const std::string& service, bool serving) {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return;
  auto it = status_.find(service);
  if (it == status_.end()) return;
  ServingStatus s =
      serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  if (it->second == s) return;
  it->second = s;
  for (Watcher* w : watchers_) {
    if (w->service() == service) w->Send(s);
  }
}

void HealthService::AddService(const std::string& service) {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return;
  status_.emplace(service, HealthCheckResponse::NOT_SERVING);
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return;
  shutdown_ = true;
  for (auto& [name, status] : status_) status = HealthCheckResponse::NOT_SERVING;
  for (Watcher* w : watchers_) {
    w->Send(HealthCheckResponse::NOT_SERVING);
    w->End();
  }
}

void HealthService::Unregister(Watcher* w) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(w);
}

grpc::ServerUnaryReactor* HealthService::Check(
    grpc::CallbackServerContext* ctx, const HealthCheckRequest* request,
    HealthCheckResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  absl::MutexLock lock(&mu_);
  auto it = status_.find(request->service());
  if (it == status_.end()) {
    reactor->Finish(grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("unknown service '", request->service(), "'")));
    return reactor;
  }
  response->set_status(it->second);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* ctx, const HealthCheckRequest* request) {
  auto* w = new Watcher(this, request->service());
  absl::MutexLock lock(&mu_);
  auto it = status_.find(request->service());
  // Per the health protocol, an unknown service is reported as
  // SERVICE_UNKNOWN on Watch rather than failing the call.
  w->Send(it == status_.end() ? HealthCheckResponse::SERVICE_UNKNOWN
                              : it->second);
  if (shutdown_) {
    w->End();
  }
  watchers_.insert(w);
  return w;
}

}  // namespace inferd
