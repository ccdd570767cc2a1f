#include "service/flags.h"

#include <cstdlib>
#include <functional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/chat/tool_parser.h"
#include "runtime/common/status_macros.h"
#include "runtime/gen/speculative.h"
#include "service/config_file.h"
#include "service/model_flags.h"
#include "yaml-cpp/yaml.h"

namespace inferd {
namespace {

using flags_internal::Bad;
using flags_internal::BuildModel;
using flags_internal::ParseBool;
using flags_internal::ParseByteSize;
using flags_internal::ParseInt;
using flags_internal::ParseModel;
using flags_internal::SetEngineOption;

struct FlagDoc {
  const char* name;
  const char* arg;
  const char* def;
  const char* help;
};

const FlagDoc kFlags[] = {
    {"config", "FILE", "",
     "Read settings from a YAML (or JSON) file: every flag below by its name "
     "without the dashes (`max-seqs: 32`), `models:` a list of maps with "
     "name, path and any model option (`- {name: chat, path: /m/x.gguf, "
     "max-seqs: 16}`), `plugins:` a list of paths. Flags override "
     "INFERD_* environment variables (INFERD_MAX_SEQS=32 for --max-seqs; "
     "every single-valued flag), which override the file; --model NAME "
     "replaces the file's model of that name. docs/configuration.md."},
    {"print-config", "", "false",
     "Print the effective settings (YAML a --config file accepts, each value "
     "commented with where it came from) and exit, without loading models."},
    {"listen", "HOST:PORT", "127.0.0.1:50051",
     "Address of the gRPC server (0.0.0.0:PORT for every interface)."},
    {"model", "NAME=PATH[,k=v]", "",
     "Serve PATH as NAME: a Hugging Face model directory, a .gguf file, or "
     "a Hugging Face Hub name (org/repo, org/repo:Q4_K_M, "
     "org/repo/file.gguf, each with an optional @revision) fetched into "
     "the Hugging Face cache ($HF_HUB_CACHE; HF_ENDPOINT, HF_TOKEN and "
     "HF_HUB_OFFLINE apply); repeatable. "
     "Options: task=generate|embed|rerank|classify, "
     "pooling=cls|mean|last|<plug-in>, "
     "bidirectional=true|false, sampler=<registered sampler>, "
     "tool_parser=generic|hermes|llama3_json|mistral|pythonic (default: the "
     "template's own format, else generic), reasoning_parser=think|none, "
     "rerank_format=qwen3 (task=rerank on a causal LM), "
     "load=startup|on_demand (on_demand: loaded by the first request that "
     "names it), keep_alive=DURATION (unloaded after that long idle: 300, "
     "90s, 5m, 1h; 0 = never), "
     "and any "
     "engine flag below without the "
     "dashes (e.g. replicas=2,threads=1,dtype=bfloat16)."},
    {"http-listen", "HOST:PORT", "(off)",
     "Also serve the HTTP API (OpenAI's /v1/chat/completions, "
     "/v1/completions, /v1/responses, /v1/embeddings, /v1/models; "
     "Anthropic's /v1/messages; /health) on this address, on the same "
     "models and engines, with the same API key (Authorization: Bearer, or "
     "x-api-key)."},
    {"responses-store-size", "N", "1000",
     "Responses API: responses kept for previous_response_id and GET "
     "/v1/responses/{id} (the least recently used goes first; 0 keeps none "
     "and store is refused)."},
    {"responses-store-bytes", "BYTES", "256MiB",
     "Responses API: the stored responses' total size (their text; the "
     "least recently used goes first)."},
    {"responses-store-ttl", "SECONDS", "3600",
     "Responses API: how long a stored response is kept."},
    {"http-max-concurrent-requests", "N", "256",
     "HTTP API requests served at once (worker threads; a streaming answer "
     "holds one until its last event, a keep-alive connection one while it "
     "waits for its next request); further connections wait to be "
     "accepted."},
    {"metrics-listen", "HOST:PORT", "(off)",
     "Serve Prometheus metrics over HTTP at /metrics on this address."},
    {"health-listen", "HOST:PORT", "(off)",
     "Also serve grpc.health.v1 alone, in plaintext, on this address (for "
     "Kubernetes gRPC probes when --tls-cert is on). Health is always served "
     "on --listen too."},
    {"threads", "N", "0 (CPUs / replicas)",
     "Kernel threads per model replica. CPUs are those this process may use: "
     "its affinity mask, capped by a cgroup CPU quota (a pod's CPU limit, "
     "rounded down, at least 1)."},
    {"replicas-per-model", "N", "0 (workflow default)",
     "Data-parallel replicas of each model, each with its own engine loop. "
     "Default: small encoders (hidden size <= 512) one per cores / threads "
     "(one per core unless threads is set), other models one."},
    {"tokenization-workers", "N|auto", "auto (cores / 4, at least 1)",
     "Engine threads per model that prepare requests (chat template, "
     "tokenization) while batches run; 0 prepares on the gRPC thread."},
    {"max-batched-tokens", "N", "2048", "Token budget of one engine step."},
    {"max-prefill-tokens-while-decoding", "N", "64",
     "Generation: prompt tokens one engine step may prefill while sequences "
     "are decoding (long prompts are chunked so streams keep getting "
     "tokens); with none decoding, the first prompt in line goes in whole "
     "(up to --max-batched-tokens). 0 = no separate limit."},
    {"overlap-output", "BOOL", "true",
     "Generation: detokenize, check stop strings and write chunks on an "
     "output thread while the next forward pass runs."},
    {"max-seqs", "N", "64", "Sequences batched in one engine step."},
    {"max-queue-requests", "N", "1024",
     "Waiting requests per model before new ones get RESOURCE_EXHAUSTED."},
    {"max-queue-tokens", "N", "1048576",
     "Waiting input tokens per model before new requests get "
     "RESOURCE_EXHAUSTED."},
    {"max-inputs-per-request", "N", "256",
     "Most texts in one Embed/Classify request or documents in one Rerank "
     "(INVALID_ARGUMENT above)."},
    {"max-input-tokens", "N", "0 (the model's limit)",
     "Longest input in tokens; longer inputs are truncated when the request "
     "allows it, else INVALID_ARGUMENT."},
    {"max-concurrent-streams", "N", "1024",
     "HTTP/2 streams per connection the server accepts at once."},
    {"max-receive-message-bytes", "N", "16777216",
     "Largest request message (RESOURCE_EXHAUSTED above)."},
    {"kv-cache-memory", "F|SIZE", "0.25",
     "KV cache size of each generating model: a fraction (0.5) of the memory "
     "budget or a size (4GiB). The budget is what the process may still use "
     "when the model loads (its cgroup's memory limit minus the cgroup's "
     "usage, e.g. a pod's limit; else MemAvailable) less memory-mapped "
     "weights, KV caches of models loaded before, the model's activations "
     "and a headroom of max(256 MiB, 5% of the limit). Pages are committed "
     "as blocks are first used. A budget that cannot hold one "
     "full-context sequence is a startup error (lower the model's "
     "max-input-tokens or raise this)."},
    {"block-size", "N", "16", "Tokens per KV cache block."},
    {"enable-prefix-caching", "BOOL", "true",
     "Reuse KV cache blocks of identical prompt prefixes."},
    {"speculative-draft-tokens", "N", "0 (off)",
     "Generation: speculative decoding by prompt lookup, up to N (<= 16) "
     "draft tokens per step taken from the prompt and output, verified in "
     "one forward pass (same greedy tokens, same sampling distribution), "
     "for requests that do not set `speculative`. Pays off when outputs "
     "repeat their input (editing, quoting, code); 4 to 8 is typical."},
    {"dtype", "auto|float32|bfloat16|q8_0|q4_0|q4_1|int8", "auto",
     "Compute dtype of the models: auto (bfloat16 for encoders on CPUs "
     "with AVX512_BF16, where it is ~1.7x float32 and the real MiniLM's "
     "embeddings keep cosine >= 0.9999; float32 otherwise), float32, "
     "bfloat16 GEMM weights (and attention products for encoders), GEMM "
     "weights quantized at load to q8_0 / q4_0 / q4_1 (GGUF files keep "
     "their own quantization), or int8 (encoders only: int8 weights with a "
     "scale per block of 32 inputs, int8 activations per block of 32 on "
     "AVX512-VNNI CPUs)."},
    {"activations", "exact|int8", "int8",
     "Activations of block-quantized weights (GGUF Q4_0 to Q8_0 and the "
     "K-quants, dtype q8_0 / q4_0 / q4_1): int8 runs int8 dot products on "
     "activations quantized per block (32 values, 256 for K-quants) at "
     "every batch size, as llama.cpp does, on weights repacked at load (a "
     "GGUF file's stored copy is given back; weights quantized at load keep "
     "both), so a sequence's output is the same however its tokens are "
     "batched; exact keeps F32 activations (16-bit in the one-sequence "
     "decode) on the weights as stored. CPUs "
     "without AVX512-VNNI run exact either way. docs/precision.md."},
    {"log-format", "text|json", "text", "Log line format (stderr)."},
    {"log-level", "LEVEL", "info", "trace, debug, info, warn or error."},
    {"max-loaded-models", "N", "0 (no cap)",
     "Models loaded at once. Loading one more (LoadModel, an on-demand "
     "model's first request) first unloads the least recently used idle "
     "model; with none idle the load is RESOURCE_EXHAUSTED."},
    {"allow-partial-start", "", "false",
     "Report SERVING once loading ends with at least one model ready, the "
     "others listed FAILED (with their error) in ListModels. Off: health "
     "stays NOT_SERVING while any model failed. Each model also has its own "
     "health service, inferd.v1.Model/NAME, SERVING once it is ready."},
    {"max-connection-age", "SECONDS", "0 (off)",
     "Close each client connection after this long (GOAWAY, then "
     "--max-connection-age-grace for calls in flight; jittered by gRPC), so "
     "clients re-resolve DNS and spread over replicas added since "
     "(Kubernetes headless Services)."},
    {"max-connection-age-grace", "SECONDS", "0 (no limit)",
     "How long calls in flight on an aged connection may still run; 0 waits "
     "for them however long they take."},
    {"drain-timeout", "SECONDS", "30",
     "On SIGTERM/SIGINT: how long in-flight calls may run before they are "
     "cancelled with UNAVAILABLE."},
    {"tls-cert", "PATH", "", "PEM server certificate chain (enables TLS)."},
    {"tls-key", "PATH", "", "PEM private key of --tls-cert."},
    {"tls-client-ca", "PATH", "",
     "PEM CA bundle; clients must present a certificate it signed (mTLS)."},
    {"api-key", "KEY", "",
     "Require metadata 'authorization: Bearer KEY' or 'x-api-key: KEY' on "
     "every inferd.v1 RPC (UNAUTHENTICATED otherwise). grpc.health.v1 and "
     "server reflection stay open."},
    {"api-key-file", "PATH", "",
     "Read the API key from a file (surrounding whitespace is trimmed)."},
    {"reuse-port", "", "false",
     "Let several processes listen on the same --listen / --health-listen "
     "port (SO_REUSEPORT; the kernel spreads connections over them). Off: "
     "an address in use is a startup error."},
    {"mmap-weights", "", "false",
     "Memory-map weight files (pages shared with the page cache) instead of "
     "reading them into memory at load. A mapped file must not be "
     "truncated or rewritten while inferd runs (the process would die of "
     "SIGBUS); read into memory, it can."},
    {"plugin", "PATH.so", "",
     "Load an inferd plug-in (architectures, workflows or components; "
     "docs/plugins.md) before the models. Repeatable."},
    {"list-components", "", "",
     "Print every registered architecture, workflow and component (after "
     "--plugin) and exit."},
    {"help", "", "", "Print this help and exit."},
    {"version", "", "", "Print the version and exit."},
};

bool IsKnownFlag(absl::string_view name) {
  for (const FlagDoc& f : kFlags) {
    if (name == f.name) return true;
  }
  return false;
}

bool IsBoolFlag(absl::string_view name) {
  return name == "help" || name == "version" || name == "reuse-port" ||
         name == "list-components" || name == "mmap-weights" ||
         name == "print-config" || name == "allow-partial-start";
}

// Flags that take one value (so a config file key and an INFERD_* variable
// can set them): all but the repeatable and the command flags.
bool IsSettingFlag(absl::string_view name) {
  return IsKnownFlag(name) && name != "model" && name != "plugin" &&
         name != "config" && name != "help" && name != "version" &&
         name != "list-components" && name != "print-config";
}

// --max-seqs -> INFERD_MAX_SEQS.
std::string EnvName(absl::string_view flag) {
  std::string env = absl::StrCat("INFERD_", flag);
  for (char& c : env) c = c == '-' ? '_' : absl::ascii_toupper(c);
  return env;
}

absl::StatusOr<double> ParseSeconds(absl::string_view flag,
                                    absl::string_view value, double max) {
  double d;
  if (!absl::SimpleAtod(value, &d) || d < 0 || d > max) {
    return Bad(flag, value, absl::StrCat("expected seconds in [0, ", max, "]"));
  }
  return d;
}

// Sets one single-valued setting (engine or server), from any source.
absl::Status ApplySetting(const std::string& name, const std::string& value,
                          ServerOptions* o) {
  if (IsBoolFlag(name)) {
    ASSIGN_OR_RETURN(bool b, ParseBool(name, value));
    if (name == "reuse-port") o->reuse_port = b;
    if (name == "mmap-weights") o->mmap_weights = b;
    if (name == "allow-partial-start") o->allow_partial_start = b;
    return absl::OkStatus();
  }
  bool known = false;
  RETURN_IF_ERROR(SetEngineOption(name, value, &o->engine, &known));
  if (known) return absl::OkStatus();
  if (name == "listen") {
    if (value.empty() || !absl::StrContains(value, ':')) {
      return Bad(name, value, "expected HOST:PORT, e.g. 127.0.0.1:50051");
    }
    o->listen = value;
  } else if (name == "http-listen") {
    if (!value.empty() && !absl::StrContains(value, ':')) {
      return Bad(name, value, "expected HOST:PORT, e.g. 127.0.0.1:8080");
    }
    o->http_listen = value;
  } else if (name == "metrics-listen") {
    if (!value.empty() && !absl::StrContains(value, ':')) {
      return Bad(name, value, "expected HOST:PORT, e.g. 127.0.0.1:9090");
    }
    o->metrics_listen = value;
  } else if (name == "health-listen") {
    if (!value.empty() && !absl::StrContains(value, ':')) {
      return Bad(name, value, "expected HOST:PORT, e.g. 0.0.0.0:8081");
    }
    o->health_listen = value;
  } else if (name == "max-loaded-models") {
    ASSIGN_OR_RETURN(o->max_loaded_models, ParseInt(name, value, 0, 1 << 16));
  } else if (name == "http-max-concurrent-requests") {
    ASSIGN_OR_RETURN(o->http_max_concurrent_requests,
                     ParseInt(name, value, 1, 65536));
  } else if (name == "max-inputs-per-request") {
    ASSIGN_OR_RETURN(o->max_inputs_per_request,
                     ParseInt(name, value, 1, 1 << 20));
  } else if (name == "max-concurrent-streams") {
    ASSIGN_OR_RETURN(o->max_concurrent_streams,
                     ParseInt(name, value, 1, 1 << 20));
  } else if (name == "max-receive-message-bytes") {
    ASSIGN_OR_RETURN(o->max_receive_message_bytes,
                     ParseInt(name, value, 1024, 1 << 30));
  } else if (name == "responses-store-size") {
    ASSIGN_OR_RETURN(o->responses_store_size,
                     ParseInt(name, value, 0, 1 << 20));
  } else if (name == "responses-store-bytes") {
    ASSIGN_OR_RETURN(o->responses_store_bytes, ParseByteSize(name, value));
  } else if (name == "responses-store-ttl") {
    ASSIGN_OR_RETURN(o->responses_store_ttl_seconds,
                     ParseSeconds(name, value, 365 * 86400));
  } else if (name == "drain-timeout") {
    ASSIGN_OR_RETURN(o->drain_timeout_seconds, ParseSeconds(name, value, 86400));
  } else if (name == "max-connection-age") {
    // gRPC takes milliseconds as an int: at most ~24 days.
    ASSIGN_OR_RETURN(o->max_connection_age_seconds,
                     ParseSeconds(name, value, 2000000));
  } else if (name == "max-connection-age-grace") {
    ASSIGN_OR_RETURN(o->max_connection_age_grace_seconds,
                     ParseSeconds(name, value, 2000000));
  } else if (name == "log-format") {
    if (value != "text" && value != "json") {
      return Bad(name, value, "expected text or json");
    }
    o->log_format = value;
  } else if (name == "log-level") {
    if (value != "trace" && value != "debug" && value != "info" &&
        value != "warn" && value != "error") {
      return Bad(name, value, "expected trace, debug, info, warn or error");
    }
    o->log_level = value;
  } else if (name == "tls-cert") {
    o->tls_cert = value;
  } else if (name == "tls-key") {
    o->tls_key = value;
  } else if (name == "tls-client-ca") {
    o->tls_client_ca = value;
  } else if (name == "api-key") {
    o->api_key = value;
  } else if (name == "api-key-file") {
    o->api_key_file = value;
  } else {
    return absl::InternalError(absl::StrCat("setting --", name, " not handled"));
  }
  return absl::OkStatus();
}

absl::Status InSource(const absl::Status& st, absl::string_view source) {
  if (st.ok()) return st;
  return absl::Status(st.code(), absl::StrCat(source, ": ", st.message()));
}

}  // namespace

std::string HelpText() {
  std::string out =
      "inferd: a gRPC inference server for LLMs and embedding, reranking and "
      "classification models.\n\n"
      "Usage: inferd --model NAME=PATH [--model NAME=PATH ...] [flags]\n\n"
      "Flags:\n";
  for (const FlagDoc& f : kFlags) {
    std::string head = absl::StrCat("  --", f.name);
    if (*f.arg) absl::StrAppend(&head, " ", f.arg);
    absl::StrAppend(&out, head, "\n      ", f.help);
    if (*f.def) absl::StrAppend(&out, " (default: ", f.def, ")");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

namespace {

// The command line, scanned: settings in order (applied after the file and
// the environment); models and plug-ins collected; the action flags (help,
// version, ...) and --config set in `o`.
struct CommandLine {
  std::vector<std::pair<std::string, std::string>> settings;
  std::vector<std::string> models;
  std::vector<std::string> plugins;
};

absl::Status ScanCommandLine(int argc, const char* const* argv,
                             ServerOptions* o, CommandLine* cl) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (!absl::ConsumePrefix(&arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected argument '", arg, "'; flags start with -- (see --help)"));
    }
    const size_t eq = arg.find('=');
    const bool has_value = eq != absl::string_view::npos;
    const std::string name(has_value ? arg.substr(0, eq) : arg);
    std::string value(has_value ? arg.substr(eq + 1) : absl::string_view());
    if (!IsKnownFlag(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (see --help)"));
    }
    if (IsBoolFlag(name)) {
      bool b = true;
      if (has_value) {
        ASSIGN_OR_RETURN(b, ParseBool(name, value));
      }
      if (name == "help") {
        o->help = b;
      } else if (name == "version") {
        o->version = b;
      } else if (name == "list-components") {
        o->list_components = b;
      } else if (name == "print-config") {
        o->print_config = b;
      } else {
        cl->settings.emplace_back(name, b ? "true" : "false");
      }
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value (see --help)"));
      }
      value = argv[++i];
    }
    if (name == "model") {
      cl->models.push_back(value);
    } else if (name == "plugin") {
      if (value.empty()) return Bad(name, value, "expected the path of a .so");
      cl->plugins.push_back(value);
    } else if (name == "config") {
      if (value.empty()) return Bad(name, value, "expected a file");
      o->config_path = value;
    } else {
      cl->settings.emplace_back(name, value);
    }
  }
  return absl::OkStatus();
}

// Settings in precedence order: the config file, INFERD_* environment
// variables, flags; each recorded in o->sources.
absl::Status ApplySettings(const RawConfig& file, const EnvLookup& env,
                           const CommandLine& cl, ServerOptions* o) {
  const std::string source = absl::StrCat("--config ", o->config_path);
  for (const auto& [key, v] : file.scalars) {
    // `max_loaded_models` is `max-loaded-models` too (YAML's usual style).
    std::string k = key;
    if (!IsSettingFlag(k)) absl::StrReplaceAll({{"_", "-"}}, &k);
    if (!IsSettingFlag(k)) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": unknown key '", k,
          "' (keys are the flags of --help without the dashes, plus "
          "models and plugins)"));
    }
    RETURN_IF_ERROR(InSource(ApplySetting(k, v, o),
                             absl::StrCat(source, ": key '", k, "'")));
    o->sources[k] = source;
  }
  for (const FlagDoc& f : kFlags) {
    if (!IsSettingFlag(f.name)) continue;
    const std::string var = EnvName(f.name);
    absl::optional<std::string> v = env(var);
    if (!v.has_value()) continue;
    RETURN_IF_ERROR(InSource(ApplySetting(f.name, *v, o),
                             absl::StrCat("environment variable ", var)));
    o->sources[f.name] = absl::StrCat("env ", var);
  }
  for (const auto& [k, v] : cl.settings) {
    RETURN_IF_ERROR(ApplySetting(k, v, o));
    o->sources[k] = "flag";
  }
  o->plugins = file.plugins;
  o->plugins.insert(o->plugins.end(), cl.plugins.begin(), cl.plugins.end());
  return absl::OkStatus();
}

// Models last, so they inherit every engine setting wherever it was given.
// A --model replaces the file's model of the same name.
absl::Status CollectModels(const RawConfig& file, const CommandLine& cl,
                           ServerOptions* o) {
  std::vector<ModelSpec> from_flags;
  for (const std::string& v : cl.models) {
    ModelSpec spec;
    RETURN_IF_ERROR(ParseModel(v, o->engine, &spec));
    for (const ModelSpec& other : from_flags) {
      if (other.name == spec.name) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--model: the name '", spec.name, "' is given twice"));
      }
    }
    from_flags.push_back(std::move(spec));
  }
  for (const RawConfigModel& m : file.models) {
    ModelSpec spec;
    RETURN_IF_ERROR(BuildModel(m.name, m.path, m.options, o->engine,
                               absl::StrCat("--config ", m.where), &spec));
    bool replaced = false;
    for (const ModelSpec& f : from_flags) replaced |= f.name == spec.name;
    for (const ModelSpec& other : o->models) {
      if (other.name == spec.name) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--config ", m.where, ": the name '", spec.name,
            "' is given twice"));
      }
    }
    if (!replaced) o->models.push_back(std::move(spec));
  }
  for (ModelSpec& spec : from_flags) o->models.push_back(std::move(spec));
  if (o->models.empty()) {
    return absl::InvalidArgumentError(
        "no model to serve: pass --model NAME=PATH (a Hugging Face model "
        "directory with config.json, or a .gguf file) or a --config file "
        "with models");
  }
  return absl::OkStatus();
}

// Flags that only make sense together (or apart).
absl::Status CheckCombinations(const ServerOptions& o) {
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key must be given together");
  }
  if (!o.tls_client_ca.empty() && o.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs --tls-cert and --tls-key");
  }
  if (!o.api_key.empty() && !o.api_key_file.empty()) {
    return absl::InvalidArgumentError(
        "give --api-key or --api-key-file, not both");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServerOptions> ParseFlags(int argc, const char* const* argv,
                                         const EnvLookup& env) {
  ServerOptions o;
  CommandLine cl;
  RETURN_IF_ERROR(ScanCommandLine(argc, argv, &o, &cl));
  if (o.help || o.version) return o;
  RawConfig file;
  if (!o.config_path.empty()) {
    ASSIGN_OR_RETURN(file, LoadConfigFile(o.config_path));
  }
  RETURN_IF_ERROR(ApplySettings(file, env, cl, &o));
  if (o.list_components) return o;
  RETURN_IF_ERROR(CollectModels(file, cl, &o));
  RETURN_IF_ERROR(CheckCombinations(o));
  return o;
}

absl::StatusOr<ServerOptions> ParseFlags(int argc, const char* const* argv) {
  return ParseFlags(argc, argv, [](const std::string& name) {
    const char* v = std::getenv(name.c_str());
    return v == nullptr ? absl::optional<std::string>()
                        : absl::optional<std::string>(v);
  });
}

}  // namespace inferd
