#include "service/server.h"

#include "service/model_flags.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "device/cpu/host_resources.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "runtime/common/status_macros.h"
#include "runtime/engine/builtins.h"
#include "runtime/engine/plugin.h"
#include "runtime/loader/safetensors.h"
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
  RETURN_IF_ERROR(s->OpenModels());
  ASSIGN_OR_RETURN(std::vector<std::string> services, s->BuildServices());
  RETURN_IF_ERROR(s->StartGrpc());
  LogHostResources();
  LOG_INFO("inferd listening on {} (port {}), {}{}; {} model(s) loading",
           options.listen, s->port_,
           options.tls_cert.empty()
               ? "plaintext"
               : (options.tls_client_ca.empty() ? "TLS" : "mTLS"),
           s->auth_->enabled() ? ", API key required" : "",
           s->models_->size());
  RETURN_IF_ERROR(s->StartSideListeners(services));
  Server* raw = s.get();
  s->loader_ = std::thread([raw] { raw->LoadModels(); });
  return s;
}

absl::Status Server::OpenModels() {
  // Built-ins and plug-ins first: a model may need what they register
  // (main has registered the built-ins already; tests that start a Server
  // in process rely on this call).
  RegisterBuiltins();
  RETURN_IF_ERROR(LoadPlugins(options_.plugins));
  for (const std::string& p : options_.plugins) LOG_INFO("loaded plug-in {}", p);
  SetWeightFileMode(options_.mmap_weights ? WeightFileMode::kMap
                                          : WeightFileMode::kCopy);
  ModelManager::Options mo;
  mo.max_loaded_models = options_.max_loaded_models;
  mo.step_observer = [this](const std::string& model) -> StepObserver* {
    return metrics_ != nullptr ? metrics_->StepObserverFor(model) : nullptr;
  };
  mo.on_change = [this](const ServedModelInfo& info) { OnModelChange(info); };
  mo.on_download = [this](const std::string& model, int64_t done,
                          int64_t total) { LogDownload(model, done, total); };
  ASSIGN_OR_RETURN(models_,
                   ModelManager::Create(options_.models, std::move(mo)));
  for (const auto& m : models_->models()) {
    // A model whose file could not be opened is reported (FAILED, its
    // error) by the loader, like one that fails to load.
    if (!m->open_error().ok()) continue;
    const Workflow& w = m->workflow();
    LOG_INFO("model '{}': {} from {} -> workflow {} (input {}, scheduler {}, "
             "attention {}, output {}, executor {})",
             m->name(), m->config().architectures[0], m->spec().path, w.name,
             w.input_processor, w.scheduler, w.attention_backend,
             m->output_processor(), w.executor);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Server::BuildServices() {
  ASSIGN_OR_RETURN(std::string key,
                   ApiKeyAuth::LoadKey(options_.api_key, options_.api_key_file));
  auth_ = std::make_unique<ApiKeyAuth>(std::move(key));
  ApiLimits limits;
  limits.max_inputs_per_request = options_.max_inputs_per_request;
  if (!options_.metrics_listen.empty()) {
    metrics_ = std::make_unique<Metrics>(
        models_.get(), [this] { return inference_->active_calls(); });
  }
  requests_ =
      std::make_unique<RequestLayer>(models_.get(), limits, metrics_.get());
  requests_->set_model_spec_builder(
      [this](const LoadModelInput& in) -> absl::StatusOr<ModelSpec> {
        ModelSpec spec;
        RETURN_IF_ERROR(flags_internal::BuildModel(
            in.name, in.path, in.options, options_.engine, "LoadModel",
            &spec));
        return spec;
      });
  inference_ = std::make_unique<InferenceService>(requests_.get(), auth_.get());
  models_service_ =
      std::make_unique<ModelsService>(requests_.get(), auth_.get());
  std::vector<std::string> services = {"inferd.v1.Inference",
                                       "inferd.v1.Models"};
  for (const ServedModelInfo& m : models_->List()) {
    services.push_back(ModelHealthService(m.name));
  }
  health_ = std::make_unique<HealthService>(services);
  return services;
}

absl::Status Server::StartGrpc() {
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds,
                   MakeCredentials(options_));
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, creds, &port_);
  builder.RegisterService(inference_.get());
  builder.RegisterService(models_service_.get());
  builder.RegisterService(health_.get());
  builder.SetMaxReceiveMessageSize(options_.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(64 << 20);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             options_.max_concurrent_streams);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT,
                             options_.reuse_port ? 1 : 0);
  if (options_.max_connection_age_seconds > 0) {
    // Connections are closed (GOAWAY, then the grace for calls in flight)
    // at this age, so clients re-resolve and reach pods added since.
    builder.AddChannelArgument(
        GRPC_ARG_MAX_CONNECTION_AGE_MS,
        static_cast<int>(options_.max_connection_age_seconds * 1000));
    // Without a grace (0), calls in flight run to their end (gRPC's
    // default is no limit).
    if (options_.max_connection_age_grace_seconds > 0) {
      builder.AddChannelArgument(
          GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
          static_cast<int>(options_.max_connection_age_grace_seconds * 1000));
    }
  }
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "--listen=", options_.listen, ": cannot listen there: the address is "
        "in use (another inferd?) or not an address of this machine",
        options_.reuse_port ? "" : " (--reuse-port shares a port on purpose)"));
  }
  return absl::OkStatus();
}

void Server::LogHostResources() {
  // What the process may use (a pod's limits, not the node's).
  const HostCpus cpus = ReadHostCpus();
  LOG_INFO("CPUs: {} for kernel threads ({} in the affinity mask{})",
           cpus.usable(), cpus.affinity_cpus,
           cpus.quota_cpus > 0
               ? fmt::format(", quota {:.2f} from {}", cpus.quota_cpus,
                             cpus.quota_source)
               : std::string(", no CPU quota"));
  absl::StatusOr<HostMemory> mem = ReadHostMemory();
  if (mem.ok()) {
    LOG_INFO("memory: limit {:.0f} MiB from {}, {:.0f} MiB available",
             static_cast<double>(mem->limit_bytes()) / (1 << 20),
             mem->limit_source,
             static_cast<double>(mem->available_bytes()) / (1 << 20));
  }
}

absl::Status Server::StartSideListeners(
    const std::vector<std::string>& services) {
  if (!options_.health_listen.empty()) {
    // Health only, plaintext: probes need no client certificate or key,
    // and nothing else is reachable on this port.
    plain_health_ = std::make_unique<HealthService>(services);
    grpc::ServerBuilder hb;
    hb.AddListeningPort(options_.health_listen,
                        grpc::InsecureServerCredentials(), &health_port_);
    hb.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT,
                          options_.reuse_port ? 1 : 0);
    hb.RegisterService(plain_health_.get());
    health_server_ = hb.BuildAndStart();
    if (health_server_ == nullptr || health_port_ == 0) {
      return absl::UnavailableError(absl::StrCat(
          "--health-listen=", options_.health_listen,
          ": cannot listen there: the address is in use or not an address "
          "of this machine"));
    }
    LOG_INFO("health (plaintext) on {} (health port {})",
             options_.health_listen, health_port_);
  }
  if (!options_.http_listen.empty()) {
    HttpApiOptions http;
    http.listen = options_.http_listen;
    http.max_concurrent_requests = options_.http_max_concurrent_requests;
    http.responses_store_size =
        static_cast<size_t>(options_.responses_store_size);
    http.responses_store_bytes =
        static_cast<size_t>(options_.responses_store_bytes);
    http.responses_store_ttl =
        absl::Seconds(options_.responses_store_ttl_seconds);
    http.max_body_bytes =
        static_cast<size_t>(options_.max_receive_message_bytes);
    http.tls_cert = options_.tls_cert;
    http.tls_key = options_.tls_key;
    http.tls_client_ca = options_.tls_client_ca;
    if (metrics_ != nullptr) {
      http.metrics = [m = metrics_.get()] { return m->Render(); };
    }
    ASSIGN_OR_RETURN(http_, HttpApi::Start(requests_.get(), auth_.get(), http));
    LOG_INFO("OpenAI-compatible HTTP API on {}://{}/v1 (http port {})",
             options_.tls_cert.empty() ? "http" : "https",
             options_.http_listen, http_->port());
  }
  if (metrics_ != nullptr) {
    RETURN_IF_ERROR(metrics_->Serve(options_.metrics_listen));
    LOG_INFO("metrics on http://{}/metrics (metrics port {})",
             options_.metrics_listen, metrics_->port());
  }
  return absl::OkStatus();
}

void Server::LogModelReady(const ServedModelInfo& info, const ServedModel* m,
                           const std::string& count) {
  if (info.state != ModelState::kReady) {
    LOG_ERROR("model '{}' failed to load{}: {}", info.name, count, info.error);
    return;
  }
  LOG_INFO(
      "model '{}' ready{}: {} tensors, {:.1f} MiB of weights, "
      "loaded in {:.2f}s; inputs up to {} tokens",
      info.name, count, info.weight_tensors,
      static_cast<double>(info.weight_bytes) / (1 << 20), info.load_seconds,
      info.max_input_tokens);
  if (info.kv_cache_tokens > 0) {
    LOG_INFO("model '{}': KV cache {:.1f} MiB for {} tokens, committed "
             "as blocks are first used; {}",
             info.name, static_cast<double>(info.kv_cache_bytes) / (1 << 20),
             info.kv_cache_tokens, info.kv_cache_note);
  }
  if (m != nullptr && !m->chat_format()->parse_error().empty()) {
    LOG_WARN(
        "model '{}': its chat template cannot be used ({}); Generate "
        "with messages answers FAILED_PRECONDITION, prompts work",
        info.name, m->chat_format()->parse_error());
  }
}

void Server::OnModelChange(const ServedModelInfo& info) {
  for (HealthService* h : {health_.get(), plain_health_.get()}) {
    if (h != nullptr) h->AddService(ModelHealthService(info.name));
  }
  switch (info.state) {
    case ModelState::kReady:
    case ModelState::kFailed: {
      std::shared_ptr<ServedModel> model;
      for (const auto& m : models_->Loaded()) {
        if (m->name() == info.name) model = m;
      }
      LogModelReady(info, model.get(), "");
      break;
    }
    case ModelState::kUnloading:
      LOG_INFO("model '{}' unloading: {} request(s) running", info.name,
               info.active_requests);
      break;
    case ModelState::kUnloaded:
      LOG_INFO("model '{}' unloaded", info.name);
      break;
    default:
      break;
  }
  if (metrics_ != nullptr) metrics_->OnModelChange(info);
  SetModelServing(info.name, info.state == ModelState::kReady);
}

void Server::LogDownload(const std::string& model, int64_t done,
                         int64_t total) {
  // One line per tenth of the download, and its end.
  absl::MutexLock lock(&download_log_mu_);
  const int64_t tenth = total > 0 ? done * 10 / total : 0;
  auto [it, added] = download_logged_.emplace(model, -1);
  if (tenth == it->second) return;
  it->second = tenth;
  LOG_INFO("model '{}': downloaded {:.1f} of {:.1f} MiB", model,
           static_cast<double>(done) / (1 << 20),
           static_cast<double>(total) / (1 << 20));
  if (done >= total) download_logged_.erase(it);
}

void Server::LoadModels() {
  const absl::Time start = absl::Now();
  size_t total = 0;
  for (const ServedModelInfo& m : models_->List()) total += !m.on_demand;
  size_t done = 0;
  models_->LoadAll([&](const ServedModelInfo& info, const ServedModel* m) {
    ++done;
    LogModelReady(info, m, absl::StrCat(" (", done, "/", total, ")"));
    if (metrics_ != nullptr) metrics_->OnModelChange(info);
    if (info.state == ModelState::kReady) SetModelServing(info.name, true);
  });
  int ready = 0;
  std::vector<std::string> failed;
  for (const ServedModelInfo& m : models_->List()) {
    if (m.on_demand) continue;
    if (m.state == ModelState::kReady) {
      ++ready;
    } else {
      failed.push_back(m.name);
    }
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (models_->loading_cancelled()) {
    LOG_INFO("loading stopped after {:.2f}s ({} of {} model(s) ready): "
             "shutting down",
             seconds, ready, total);
    return;
  }
  if (failed.empty()) {
    LOG_INFO("{} of {} model(s) ready after {:.2f}s; serving", ready, total,
             seconds);
    SetServing(true);
  } else if (options_.allow_partial_start && ready > 0) {
    LOG_WARN("{} of {} model(s) ready after {:.2f}s; serving without the "
             "failed: {} (--allow-partial-start; ListModels shows them "
             "FAILED with their error)",
             ready, total, seconds, absl::StrJoin(failed, ", "));
    SetServing(true);
  } else {
    LOG_ERROR("{} of {} model(s) ready after {:.2f}s; health stays "
              "NOT_SERVING because these failed: {} (ListModels shows "
              "why). Fix them, or pass --allow-partial-start to serve the "
              "others",
              ready, total, seconds, absl::StrJoin(failed, ", "));
  }
}

int Server::metrics_port() const {
  return metrics_ == nullptr ? 0 : metrics_->port();
}

int Server::http_port() const { return http_ == nullptr ? 0 : http_->port(); }

void Server::SetServing(bool serving) {
  for (HealthService* h : {health_.get(), plain_health_.get()}) {
    if (h == nullptr) continue;
    if (!serving) {
      h->SetServing(false);
      continue;
    }
    // Overall and the API services; each model keeps its own status.
    for (const char* service : {"", "inferd.v1.Inference", "inferd.v1.Models"}) {
      h->SetStatus(service, true);
    }
  }
}

void Server::SetModelServing(const std::string& model, bool serving) {
  for (HealthService* h : {health_.get(), plain_health_.get()}) {
    if (h != nullptr) h->SetStatus(ModelHealthService(model), serving);
  }
}

void Server::WaitForModels() {
  while (!models_->AllLoaded()) absl::SleepFor(absl::Milliseconds(20));
}

void Server::Shutdown(absl::Duration drain_timeout) {
  if (shut_down_) return;
  shut_down_ = true;
  // A shutdown during startup does not wait for the remaining models: the
  // loader stops at the current model's next phase.
  if (models_ != nullptr) models_->CancelLoading();
  if (loader_.joinable()) loader_.join();
  if (server_ == nullptr) return;  // Start() failed before serving
  // Readiness first, so load balancers stop sending; then refuse new calls.
  SetServing(false);
  health_->Shutdown();
  if (plain_health_ != nullptr) plain_health_->Shutdown();
  inference_->StopAccepting();
  LOG_INFO("draining: {} call(s) in flight, up to {:.1f}s",
           inference_->active_calls(), absl::ToDoubleSeconds(drain_timeout));
  absl::Time deadline = absl::Now() + drain_timeout;
  while (inference_->active_calls() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const int64_t left = inference_->active_calls();
  if (left > 0) {
    LOG_WARN("drain timeout: cancelling {} call(s) with UNAVAILABLE", left);
  } else {
    LOG_INFO("drained: every call finished");
  }
  // Open Embed streams end with UNAVAILABLE; the engines answer their
  // pending requests with UNAVAILABLE, which ends the remaining Generate
  // and unary calls; then gRPC stops. Its deadline bounds the wait for
  // clients to close their connections after GOAWAY and cancels anything
  // still open (a stream whose client stopped reading).
  inference_->CancelStreams();
  models_->Shutdown();
  // Requests that waited for an on-demand load end now (UNAVAILABLE).
  requests_->AwaitDeferred();
  // The engines answered everything (UNAVAILABLE past the drain): the HTTP
  // workers waiting for them are free; stop listening.
  if (http_ != nullptr) http_->Stop();
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::seconds(2));
  server_->Wait();
  if (health_server_ != nullptr) {
    health_server_->Shutdown(std::chrono::system_clock::now());
    health_server_->Wait();
  }
  if (metrics_ != nullptr) metrics_->StopServing();
  LOG_INFO("inferd stopped");
}

Server::~Server() {
  Shutdown(absl::ZeroDuration());
  if (http_ != nullptr) http_->Stop();
  // The metrics HTTP threads read inference_ (active calls) and the engines
  // call into metrics_: stop both before members are destroyed, whichever
  // way Shutdown returned.
  if (metrics_ != nullptr) metrics_->StopServing();
  if (models_ != nullptr) models_->Shutdown();
}

}  // namespace inferd
