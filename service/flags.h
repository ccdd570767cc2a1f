// Command-line flags of the inferd binary: parsing into ServerOptions and
// the --help text. Pure functions; thread-compatible.
#ifndef INFERD_SERVICE_FLAGS_H_
#define INFERD_SERVICE_FLAGS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "runtime/engine/model_options.h"

namespace inferd {

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";
  std::string metrics_listen;  // empty: no metrics endpoint
  std::string health_listen;   // empty: health only on --listen
  std::string http_listen;     // empty: no OpenAI-compatible HTTP API
  // HTTP requests served at once (cpp-httplib worker threads; a stream
  // holds one until its last event).
  int http_max_concurrent_requests = 256;
  // The Responses API's stored responses: how many, and for how long.
  int responses_store_size = 1000;
  int64_t responses_store_bytes = int64_t{256} << 20;
  double responses_store_ttl_seconds = 3600;
  std::vector<ModelSpec> models;
  EngineOptions engine;  // defaults every model starts from
  int max_inputs_per_request = 256;
  int max_concurrent_streams = 1024;
  int max_receive_message_bytes = 16 << 20;
  double drain_timeout_seconds = 30;
  std::string log_format = "text";
  std::string log_level = "info";
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::string api_key;
  std::string api_key_file;
  // SO_REUSEPORT on the gRPC listeners (gRPC turns it on by default on
  // Linux, which lets a second server start silently on a port in use).
  bool reuse_port = false;
  // Weight files memory-mapped instead of read into memory at load
  // (WeightFileMode in runtime/loader/safetensors.h).
  bool mmap_weights = false;
  // Shared libraries to load before the models (--plugin, in order).
  std::vector<std::string> plugins;
  bool list_components = false;
  bool help = false;
  bool version = false;
  // Models loaded at once (0 = no cap; ModelManager::Options).
  int max_loaded_models = 0;
  // Health SERVING with failed models (listed FAILED) once one is ready.
  bool allow_partial_start = false;
  // gRPC MAX_CONNECTION_AGE (0 = off) and its grace (0 = no limit).
  double max_connection_age_seconds = 0;
  double max_connection_age_grace_seconds = 0;
  // --config FILE (empty: none) and --print-config.
  std::string config_path;
  bool print_config = false;
  // Where each setting given came from ("flag", "env INFERD_X",
  // "--config FILE"); settings left at their default are absent.
  std::map<std::string, std::string> sources;
};

// Looks up an environment variable; nullopt when unset.
using EnvLookup =
    std::function<absl::optional<std::string>(const std::string& name)>;

// Parses argv (argv[0] is skipped). Accepts `--flag value` and
// `--flag=value`. Errors are INVALID_ARGUMENT with one line saying what to
// fix. `--help`, `--version` and `--list-components` skip the checks that
// need models.
// Settings come from a --config file, then INFERD_* environment variables
// (`env`), then flags, each overriding the one before.
absl::StatusOr<ServerOptions> ParseFlags(int argc, const char* const* argv,
                                         const EnvLookup& env);
// The same with the process environment.
absl::StatusOr<ServerOptions> ParseFlags(int argc, const char* const* argv);

// The effective settings as a --config file (YAML), every setting with a
// comment saying where it came from ("default", "flag", ...); models list
// only their options that differ from the server-wide ones.
std::string ConfigYaml(const ServerOptions& o);

// The --help text: every flag with its default and meaning.
std::string HelpText();

}  // namespace inferd

#endif  // INFERD_SERVICE_FLAGS_H_
