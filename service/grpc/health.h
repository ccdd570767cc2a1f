// grpc.health.v1.Health for inferd: Check and Watch, overall ("") and per
// service. Everything starts NOT_SERVING. The server sets each model's own
// service (ModelHealthService) SERVING when that model is ready, the overall
// status ("") and the API services SERVING when every model is (or, with
// --allow-partial-start, when loading ended with one ready), and everything
// NOT_SERVING when it drains.
// Thread-safe.
#ifndef INFERD_SERVICE_GRPC_HEALTH_H_
#define INFERD_SERVICE_GRPC_HEALTH_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace inferd {

// The health service name of one model: "inferd.v1.Model/NAME".
inline std::string ModelHealthService(const std::string& model) {
  return "inferd.v1.Model/" + model;
}

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  // `services` are the names Check/Watch know besides "".
  explicit HealthService(std::vector<std::string> services);
  ~HealthService() override;

  // Sets every known service (and "") to SERVING or NOT_SERVING.
  void SetServing(bool serving);
  // Sets one known service (a no-op for an unknown name).
  void SetStatus(const std::string& service, bool serving);
  // Makes `service` known (NOT_SERVING) unless it is (a model loaded while
  // serving).
  void AddService(const std::string& service);
  // Ends every Watch stream (server shutdown).
  void Shutdown();

  grpc::ServerUnaryReactor* Check(
      grpc::CallbackServerContext* ctx,
      const grpc::health::v1::HealthCheckRequest* request,
      grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* ctx,
      const grpc::health::v1::HealthCheckRequest* request) override;

  class Watcher;

 private:
  friend class Watcher;
  void Unregister(Watcher* w);

  absl::Mutex mu_;
  std::map<std::string, ServingStatus> status_ ABSL_GUARDED_BY(mu_);
  std::set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace inferd

#endif  // INFERD_SERVICE_GRPC_HEALTH_H_
