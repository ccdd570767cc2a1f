#include "service/server.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "service/logging.h"

namespace inferd {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path, ": cannot read the file"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeCredentials(
    const ServerOptions& o) {
  if (o.tls_cert.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      o.tls_client_ca.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  auto cert = ReadFile(o.tls_cert, "tls-cert");
  if (!cert.ok()) return cert.status();
  auto key = ReadFile(o.tls_key, "tls-key");
  if (!key.ok()) return key.status();
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!o.tls_client_ca.empty()) {
    auto ca = ReadFile(o.tls_client_ca, "tls-client-ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(
    const ServerOptions& options) {
  std::unique_ptr<Server> s(new Server());
  s->options_ = options;
  auto models = ModelManager::Create(options.models);
  if (!models.ok()) return models.status();
  s->models_ = std::move(models).value();
  for (const auto& m : s->models_->models()) {
    LOG_INFO("model '{}': {} from {} -> workflow {}", m->name(),
             m->config().architectures[0], m->spec().path, m->workflow().name);
  }

  auto creds = MakeCredentials(options);
  if (!creds.ok()) return creds.status();

  ApiLimits limits;
  limits.max_inputs_per_request = options.max_inputs_per_request;
  s->inference_ =
      std::make_unique<InferenceService>(s->models_.get(), limits, nullptr);
  s->models_service_ = std::make_unique<ModelsService>(s->models_.get());
  s->health_ = std::make_unique<HealthService>(std::vector<std::string>{
      "inferd.v1.Inference", "inferd.v1.Models"});

  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *creds, &s->port_);
  builder.RegisterService(s->inference_.get());
  builder.RegisterService(s->models_service_.get());
  builder.RegisterService(s->health_.get());
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(64 << 20);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             options.max_concurrent_streams);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "--listen=", options.listen,
        ": cannot bind (address in use or not local?)"));
  }
  LOG_INFO("inferd listening on {} (port {}), {} model(s) loading",
           options.listen, s->port_, s->models_->models().size());

  Server* raw = s.get();
  s->loader_ = std::thread([raw] {
    absl::Time start = absl::Now();
    raw->models_->LoadAll();
    int ready = 0;
    for (const auto& m : raw->models_->models()) {
      ServedModelInfo info = m->info();
      if (info.state == ModelState::kReady) {
        ++ready;
        LOG_INFO("model '{}' ready", info.name);
      } else {
        LOG_ERROR("model '{}' failed to load: {}", info.name, info.error);
      }
    }
    LOG_INFO("{} of {} model(s) ready after {:.2f}s; serving", ready,
             raw->models_->models().size(),
             absl::ToDoubleSeconds(absl::Now() - start));
    raw->health_->SetServing(true);
  });
  return s;
}

void Server::WaitForModels() {
  while (!models_->AllLoaded()) absl::SleepFor(absl::Milliseconds(20));
}

void Server::Shutdown(absl::Duration drain_timeout) {
  if (shut_down_) return;
  shut_down_ = true;
  if (loader_.joinable()) loader_.join();
  if (server_ == nullptr) return;  // Start() failed before serving
  health_->SetServing(false);
  health_->Shutdown();
  inference_->StopAccepting();
  LOG_INFO("draining: {} call(s) in flight, up to {:.1f}s",
           inference_->active_calls(), absl::ToDoubleSeconds(drain_timeout));
  // Wait for in-flight calls, then let gRPC cancel whatever is left.
  absl::Time deadline = absl::Now() + drain_timeout;
  while (inference_->active_calls() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (inference_->active_calls() > 0) {
    LOG_WARN("drain timeout: cancelling {} call(s)", inference_->active_calls());
  }
  // Engines answer their pending requests with UNAVAILABLE, which ends the
  // remaining calls; then gRPC stops.
  models_->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::seconds(2));
  server_->Wait();
  LOG_INFO("inferd stopped");
}

Server::~Server() { Shutdown(absl::ZeroDuration()); }

}  // namespace inferd
