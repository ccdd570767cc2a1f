// Server: the inferd gRPC server (Inference, Models, grpc.health.v1 and
// reflection) over a ModelManager, with load-then-serve readiness, API key
// auth, TLS/mTLS, Prometheus metrics (--metrics-listen), an optional
// plaintext health port (--health-listen) and a graceful drain.
// Thread-safe.
#ifndef INFERD_SERVICE_SERVER_H_
#define INFERD_SERVICE_SERVER_H_

#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/server.h"
#include "runtime/engine/model_manager.h"
#include "service/request/auth.h"
#include "service/flags.h"
#include "service/grpc/health.h"
#include "service/http/http_api.h"
#include "service/grpc/inference_service.h"
#include "service/metrics.h"

namespace inferd {

class Server {
 public:
  // Checks the model directories, binds the listen address and starts
  // serving (health NOT_SERVING). Models load on a background thread; each
  // model's health service turns SERVING when it is ready, the overall
  // status when every model is (or, with --allow-partial-start, when
  // loading ended with at least one ready). Errors say what to fix.
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      const ServerOptions& options);
  ~Server();

  // The port actually bound (useful with --listen 127.0.0.1:0).
  int port() const { return port_; }
  // The bound ports of --metrics-listen and --health-listen; 0 when off.
  int metrics_port() const;
  int health_port() const { return health_port_; }
  // The bound port of --http-listen; 0 when off.
  int http_port() const;

  // Blocks until every model finished loading.
  void WaitForModels();

  // Graceful stop: health NOT_SERVING, new calls refused, in-flight calls
  // get up to `drain_timeout` to finish, then are cancelled (UNAVAILABLE),
  // engines stop. Idempotent.
  void Shutdown(absl::Duration drain_timeout);

  ModelManager& models() { return *models_; }
  // Null without --metrics-listen.
  Metrics* metrics() { return metrics_.get(); }

 private:
  // Start's phases: plug-ins and the model manager (models not loaded yet);
  // the API key, metrics, request layer and gRPC services (returns the
  // health service names); the gRPC listener; the health-only, HTTP and
  // metrics listeners; then LoadModels on the loader thread.
  absl::Status OpenModels();
  absl::StatusOr<std::vector<std::string>> BuildServices();
  absl::Status StartGrpc();
  static void LogHostResources();
  absl::Status StartSideListeners(const std::vector<std::string>& services);
  void LoadModels();
  // `m` may be null (a model that could not be opened); `count` e.g.
  // " (2/3)" at start.
  static void LogModelReady(const ServedModelInfo& info, const ServedModel* m,
                            const std::string& count);
  // A load or unload while serving ended: health, metrics, the log.
  void OnModelChange(const ServedModelInfo& info);
  // A Hub download's progress, logged by tenths.
  void LogDownload(const std::string& model, int64_t done, int64_t total);
  Server() = default;
  // Serving: the overall status and the API services SERVING; not serving:
  // every service NOT_SERVING (drain).
  void SetServing(bool serving);
  void SetModelServing(const std::string& model, bool serving);

  ServerOptions options_;
  std::unique_ptr<ModelManager> models_;
  std::unique_ptr<ApiKeyAuth> auth_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<HealthService> health_;
  std::unique_ptr<HealthService> plain_health_;  // --health-listen
  // The front ends' request layer; outlives them.
  std::unique_ptr<RequestLayer> requests_;
  std::unique_ptr<InferenceService> inference_;
  std::unique_ptr<ModelsService> models_service_;
  std::unique_ptr<HttpApi> http_;  // --http-listen
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> health_server_;
  std::thread loader_;
  absl::Mutex download_log_mu_;
  std::map<std::string, int64_t> download_logged_
      ABSL_GUARDED_BY(download_log_mu_);
  int port_ = 0;
  int health_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace inferd

#endif  // INFERD_SERVICE_SERVER_H_
