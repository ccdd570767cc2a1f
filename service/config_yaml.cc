#include "service/flags.h"

#include <string>
#include <utility>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace inferd {
namespace {

std::string KvMemory(const EngineOptions& e) {
  return e.kv_cache_bytes > 0 ? absl::StrCat(e.kv_cache_bytes)
                              : absl::StrCat(e.kv_cache_fraction);
}

// Every engine setting as (key, value) text, as a config file spells it.
std::vector<std::pair<std::string, std::string>> EngineSettings(
    const EngineOptions& e) {
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  return {
      {"threads", absl::StrCat(e.threads)},
      {"replicas-per-model", absl::StrCat(e.replicas)},
      {"tokenization-workers", e.tokenization_workers < 0
                                   ? std::string("auto")
                                   : absl::StrCat(e.tokenization_workers)},
      {"max-batched-tokens", absl::StrCat(e.max_batched_tokens)},
      {"max-prefill-tokens-while-decoding",
       absl::StrCat(e.max_prefill_tokens_while_decoding)},
      {"overlap-output", b(e.overlap_output)},
      {"max-seqs", absl::StrCat(e.max_seqs)},
      {"max-queue-requests", absl::StrCat(e.max_queue_requests)},
      {"max-queue-tokens", absl::StrCat(e.max_queue_tokens)},
      {"max-input-tokens", absl::StrCat(e.max_input_tokens)},
      {"kv-cache-memory", KvMemory(e)},
      {"block-size", absl::StrCat(e.block_size)},
      {"dtype", e.dtype},
      {"activations", e.activations},
      {"enable-prefix-caching", b(e.enable_prefix_caching)},
      {"speculative-draft-tokens", absl::StrCat(e.speculative_draft_tokens)},
  };
}

std::string Bool(bool v) { return v ? "true" : "false"; }

// The server-wide settings in the order a config file lists them.
std::vector<std::pair<std::string, std::string>> ServerSettings(
    const ServerOptions& o) {
  std::vector<std::pair<std::string, std::string>> settings = {
      {"listen", o.listen},
      {"metrics-listen", o.metrics_listen},
      {"health-listen", o.health_listen},
      {"http-listen", o.http_listen},
      {"http-max-concurrent-requests",
       absl::StrCat(o.http_max_concurrent_requests)},
  };
  for (auto& kv : EngineSettings(o.engine)) settings.push_back(kv);
  std::vector<std::pair<std::string, std::string>> more = {
      {"max-inputs-per-request", absl::StrCat(o.max_inputs_per_request)},
      {"max-concurrent-streams", absl::StrCat(o.max_concurrent_streams)},
      {"max-receive-message-bytes", absl::StrCat(o.max_receive_message_bytes)},
      {"max-loaded-models", absl::StrCat(o.max_loaded_models)},
      {"allow-partial-start", Bool(o.allow_partial_start)},
      {"max-connection-age", absl::StrCat(o.max_connection_age_seconds)},
      {"max-connection-age-grace",
       absl::StrCat(o.max_connection_age_grace_seconds)},
      {"drain-timeout", absl::StrCat(o.drain_timeout_seconds)},
      {"log-format", o.log_format},
      {"log-level", o.log_level},
      {"tls-cert", o.tls_cert},
      {"tls-key", o.tls_key},
      {"tls-client-ca", o.tls_client_ca},
      // api-key is never printed.
      {"api-key-file", o.api_key_file},
      {"reuse-port", Bool(o.reuse_port)},
      {"mmap-weights", Bool(o.mmap_weights)},
  };
  for (auto& kv : more) settings.push_back(kv);
  return settings;
}

// Text the parser reads back as the same setting: numbers and booleans
// plain, everything else quoted.
void Value(YAML::Emitter& out, const std::string& v) {
  const bool plain = !v.empty() && (v == "true" || v == "false" ||
                                    v.find_first_not_of("0123456789.e+-") ==
                                        std::string::npos);
  if (plain) {
    out << v;
  } else {
    out << YAML::DoubleQuoted << v;
  }
}

// One `models` entry: name, path, overrides, and the engine settings that
// differ from the server-wide `defaults`.
void EmitModel(YAML::Emitter& out, const ModelSpec& m,
               const std::vector<std::pair<std::string, std::string>>& defaults) {
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value;
  Value(out, m.name);
  out << YAML::Key << "path" << YAML::Value;
  Value(out, m.path);
  const ModelOverrides& o = m.overrides;
  auto emit = [&out](const char* key, const std::optional<std::string>& v) {
    if (v.has_value()) out << YAML::Key << key << YAML::Value << *v;
  };
  emit("task", o.task);
  emit("pooling", o.pooling);
  if (o.bidirectional) emit("bidirectional", Bool(*o.bidirectional));
  emit("sampler", o.sampler);
  emit("tool_parser", o.tool_parser);
  emit("reasoning_parser", o.reasoning_parser);
  emit("rerank_format", o.rerank_format);
  if (m.on_demand) emit("load", std::string("on_demand"));
  if (m.keep_alive_seconds > 0) {
    emit("keep_alive", absl::StrCat(m.keep_alive_seconds, "s"));
  }
  const auto own = EngineSettings(m.engine);
  for (size_t i = 0; i < own.size(); ++i) {
    if (own[i].second == defaults[i].second) continue;
    out << YAML::Key
        << (own[i].first == "replicas-per-model" ? "replicas" : own[i].first)
        << YAML::Value;
    Value(out, own[i].second);
  }
  out << YAML::EndMap;
}

}  // namespace

std::string ConfigYaml(const ServerOptions& o) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const auto& [k, v] : ServerSettings(o)) {
    out << YAML::Key << k << YAML::Value;
    Value(out, v);
    auto src = o.sources.find(k);
    out << YAML::Comment(src == o.sources.end() ? "default" : src->second);
  }
  out << YAML::Key << "plugins" << YAML::Value << YAML::BeginSeq;
  for (const std::string& p : o.plugins) Value(out, p);
  out << YAML::EndSeq;
  out << YAML::Key << "models" << YAML::Value << YAML::BeginSeq;
  const auto defaults = EngineSettings(o.engine);
  for (const ModelSpec& m : o.models) EmitModel(out, m, defaults);
  out << YAML::EndSeq;
  out << YAML::EndMap;
  return absl::StrCat(out.c_str(), "\n");
}

}  // namespace inferd
