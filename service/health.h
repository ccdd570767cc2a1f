// grpc.health.v1.Health for inferd: Check and Watch, overall ("") and per
// service. Everything starts NOT_SERVING; the server flips it to SERVING when
// every model finished loading and back to NOT_SERVING when it drains.
// Thread-safe.
#ifndef INFERD_SERVICE_HEALTH_H_
#define INFERD_SERVICE_HEALTH_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace inferd {

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  // `services` are the names Check/Watch know besides "".
  explicit HealthService(std::vector<std::string> services);
  ~HealthService() override;

  // Sets every known service (and "") to SERVING or NOT_SERVING.
  void SetServing(bool serving);
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

#endif  // INFERD_SERVICE_HEALTH_H_
