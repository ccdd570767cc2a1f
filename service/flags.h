// Command-line flags of the inferd binary: parsing into ServerOptions and
// the --help text. Pure functions; thread-compatible.
#ifndef INFERD_SERVICE_FLAGS_H_
#define INFERD_SERVICE_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/engine/model_options.h"

namespace inferd {

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";
  std::string metrics_listen;  // empty: no metrics endpoint
  std::string health_listen;   // empty: health only on --listen
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
};

// Parses argv (argv[0] is skipped). Accepts `--flag value` and
// `--flag=value`. Errors are INVALID_ARGUMENT with one line saying what to
// fix. `--help`, `--version` and `--list-components` skip the checks that
// need models.
absl::StatusOr<ServerOptions> ParseFlags(int argc, const char* const* argv);

// The --help text: every flag with its default and meaning.
std::string HelpText();

}  // namespace inferd

#endif  // INFERD_SERVICE_FLAGS_H_
