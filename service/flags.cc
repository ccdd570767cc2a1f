#include "service/flags.h"

#include <functional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/common/status_macros.h"
#include "runtime/gen/speculative.h"

namespace inferd {
namespace {

absl::Status Bad(absl::string_view flag, absl::string_view value,
                 absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, ": ", want));
}

absl::StatusOr<int64_t> ParseInt(absl::string_view flag,
                                 absl::string_view value, int64_t min,
                                 int64_t max) {
  int64_t v;
  if (!absl::SimpleAtoi(value, &v) || v < min || v > max) {
    return Bad(flag, value,
               absl::StrCat("expected an integer in [", min, ", ", max, "]"));
  }
  return v;
}

absl::StatusOr<bool> ParseBool(absl::string_view flag,
                               absl::string_view value) {
  bool v;
  if (!absl::SimpleAtob(value, &v)) return Bad(flag, value, "expected true or false");
  return v;
}

// "0.5" -> fraction of free memory; "4GiB", "512MiB", "1000000" -> bytes.
absl::Status ParseMemory(absl::string_view flag, absl::string_view value,
                         EngineOptions* engine) {
  std::string v = absl::AsciiStrToLower(value);
  struct Unit {
    const char* suffix;
    int64_t mult;
  };
  static const Unit kUnits[] = {{"gib", 1LL << 30}, {"mib", 1LL << 20},
                                {"kib", 1LL << 10}, {"gb", 1000000000LL},
                                {"mb", 1000000LL},  {"g", 1LL << 30},
                                {"m", 1LL << 20}};
  for (const Unit& u : kUnits) {
    absl::string_view num = v;
    if (absl::ConsumeSuffix(&num, u.suffix)) {
      double d;
      if (!absl::SimpleAtod(num, &d) || d <= 0) {
        return Bad(flag, value, "expected a size such as 4GiB or 512MiB");
      }
      engine->kv_cache_bytes = static_cast<int64_t>(d * u.mult);
      return absl::OkStatus();
    }
  }
  double d;
  if (!absl::SimpleAtod(v, &d) || d <= 0) {
    return Bad(flag, value,
               "expected a fraction in (0, 1] of free memory or a size such "
               "as 4GiB");
  }
  if (d <= 1.0) {
    engine->kv_cache_fraction = d;
    engine->kv_cache_bytes = 0;
  } else {
    engine->kv_cache_bytes = static_cast<int64_t>(d);
  }
  return absl::OkStatus();
}

absl::Status ParseDtype(absl::string_view flag, absl::string_view value,
                        std::string* out) {
  std::string v = absl::AsciiStrToLower(value);
  if (v == "float32" || v == "f32" || v == "fp32") {
    *out = "float32";
  } else if (v == "bfloat16" || v == "bf16") {
    *out = "bfloat16";
  } else if (v == "q8_0" || v == "q4_0" || v == "q4_1") {
    *out = v;  // GEMM weights quantized at load
  } else if (v == "int8") {
    *out = v;  // encoders: int8 weights and int8 activations
  } else {
    return Bad(flag, value,
               "expected float32, bfloat16, q8_0, q4_0, q4_1 or int8");
  }
  return absl::OkStatus();
}

// Engine options that may also be set per model (`--model n=p,key=value`).
absl::Status SetEngineOption(absl::string_view key, absl::string_view value,
                             EngineOptions* e, bool* known) {
  *known = true;
  if (key == "threads") {
    ASSIGN_OR_RETURN(e->threads, ParseInt(key, value, 0, 1024));
  } else if (key == "replicas-per-model" || key == "replicas") {
    ASSIGN_OR_RETURN(e->replicas, ParseInt(key, value, 0, 256));
  } else if (key == "tokenization-workers") {
    if (value == "auto") {
      e->tokenization_workers = -1;
    } else {
      ASSIGN_OR_RETURN(e->tokenization_workers, ParseInt(key, value, 0, 256));
    }
  } else if (key == "max-batched-tokens") {
    ASSIGN_OR_RETURN(e->max_batched_tokens, ParseInt(key, value, 1, 1 << 24));
  } else if (key == "max-prefill-tokens-while-decoding") {
    ASSIGN_OR_RETURN(e->max_prefill_tokens_while_decoding,
                     ParseInt(key, value, 0, 1 << 24));
  } else if (key == "overlap-output") {
    ASSIGN_OR_RETURN(e->overlap_output, ParseBool(key, value));
  } else if (key == "max-seqs") {
    ASSIGN_OR_RETURN(e->max_seqs, ParseInt(key, value, 1, 1 << 16));
  } else if (key == "max-queue-requests") {
    ASSIGN_OR_RETURN(e->max_queue_requests, ParseInt(key, value, 1, 1 << 24));
  } else if (key == "max-queue-tokens") {
    ASSIGN_OR_RETURN(e->max_queue_tokens, ParseInt(key, value, 1, 1LL << 40));
  } else if (key == "max-input-tokens") {
    ASSIGN_OR_RETURN(e->max_input_tokens, ParseInt(key, value, 0, 1 << 24));
  } else if (key == "kv-cache-memory") {
    RETURN_IF_ERROR(ParseMemory(key, value, e));
  } else if (key == "block-size") {
    ASSIGN_OR_RETURN(e->block_size, ParseInt(key, value, 1, 1024));
  } else if (key == "dtype") {
    RETURN_IF_ERROR(ParseDtype(key, value, &e->dtype));
  } else if (key == "enable-prefix-caching" || key == "prefix-caching") {
    ASSIGN_OR_RETURN(e->enable_prefix_caching, ParseBool(key, value));
  } else if (key == "speculative-draft-tokens") {
    ASSIGN_OR_RETURN(e->speculative_draft_tokens,
                     ParseInt(key, value, 0, kMaxDraftTokens));
  } else {
    *known = false;
  }
  return absl::OkStatus();
}

// NAME=PATH[,key=value...]
absl::Status ParseModel(absl::string_view value, const EngineOptions& defaults,
                        ModelSpec* spec) {
  std::vector<std::string> parts = absl::StrSplit(value, ',');
  std::pair<std::string, std::string> np =
      absl::StrSplit(parts[0], absl::MaxSplits('=', 1));
  spec->name = np.first;
  spec->path = np.second;
  if (spec->name.empty() || spec->path.empty() ||
      !absl::StrContains(parts[0], '=')) {
    return Bad("model", value,
               "expected NAME=PATH (for example "
               "--model llama=/models/Llama-3.2-1B)");
  }
  for (char c : spec->name) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.') {
      return Bad("model", value,
                 "model names may use letters, digits, '-', '_' and '.'");
    }
  }
  spec->engine = defaults;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(parts[i], absl::MaxSplits('=', 1));
    const std::string& k = kv.first;
    const std::string& v = kv.second;
    if (k == "task") {
      if (v != "generate" && v != "embed" && v != "rerank" && v != "classify") {
        return Bad("model", value,
                   "task must be generate, embed, rerank or classify");
      }
      spec->overrides.task = v;
    } else if (k == "pooling") {
      // cls, mean, last, or a pooling a plug-in registers (pooling_<v>);
      // whether it exists is checked once plug-ins are loaded.
      if (v.empty() || v.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") !=
                           std::string::npos) {
        return Bad("model", value,
                   "pooling must be cls, mean, last or the name of a pooling "
                   "a plug-in registers (e.g. max with examples/plugin)");
      }
      spec->overrides.pooling = v;
    } else if (k == "bidirectional") {
      ASSIGN_OR_RETURN(spec->overrides.bidirectional, ParseBool(k, v));
    } else {
      bool known = false;
      RETURN_IF_ERROR(SetEngineOption(k, v, &spec->engine, &known));
      if (!known) {
        return Bad("model", value,
                   absl::StrCat("unknown model option '", k,
                                "' (see --help for the options)"));
      }
    }
  }
  return absl::OkStatus();
}

struct FlagDoc {
  const char* name;
  const char* arg;
  const char* def;
  const char* help;
};

const FlagDoc kFlags[] = {
    {"listen", "HOST:PORT", "127.0.0.1:50051",
     "Address of the gRPC server (0.0.0.0:PORT for every interface)."},
    {"model", "NAME=PATH[,k=v]", "",
     "Serve PATH as NAME: a Hugging Face model directory or a .gguf file; "
     "repeatable. "
     "Options: task=generate|embed|rerank|classify, pooling=cls|mean|last|<plug-in>, "
     "bidirectional=true|false, and any engine flag below without the "
     "dashes (e.g. replicas=2,threads=1,dtype=bfloat16)."},
    {"metrics-listen", "HOST:PORT", "(off)",
     "Serve Prometheus metrics over HTTP at /metrics on this address."},
    {"health-listen", "HOST:PORT", "(off)",
     "Also serve grpc.health.v1 alone, in plaintext, on this address (for "
     "Kubernetes gRPC probes when --tls-cert is on). Health is always served "
     "on --listen too."},
    {"threads", "N", "0 (cores / replicas)",
     "Kernel threads per model replica."},
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
     "KV cache size: a fraction of free memory (0.5) or a size (4GiB)."},
    {"block-size", "N", "16", "Tokens per KV cache block."},
    {"enable-prefix-caching", "BOOL", "true",
     "Reuse KV cache blocks of identical prompt prefixes."},
    {"speculative-draft-tokens", "N", "0 (off)",
     "Generation: speculative decoding by prompt lookup, up to N (<= 16) "
     "draft tokens per step taken from the prompt and output, verified in "
     "one forward pass (same greedy tokens, same sampling distribution), "
     "for requests that do not set `speculative`. Pays off when outputs "
     "repeat their input (editing, quoting, code); 4 to 8 is typical."},
    {"dtype", "float32|bfloat16|q8_0|q4_0|q4_1|int8", "float32",
     "Compute dtype of the models: float32, bfloat16 GEMM weights, GEMM "
     "weights quantized at load to q8_0 / q4_0 / q4_1 (GGUF files keep "
     "their own quantization), or int8 (encoders only: int8 weights with a "
     "scale per block of 32 inputs, int8 activations per block of 32 on "
     "AVX512-VNNI CPUs)."},
    {"log-format", "text|json", "text", "Log line format (stderr)."},
    {"log-level", "LEVEL", "info", "trace, debug, info, warn or error."},
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
         name == "list-components" || name == "mmap-weights";
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

absl::StatusOr<ServerOptions> ParseFlags(int argc, const char* const* argv) {
  ServerOptions o;
  std::vector<std::string> model_values;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (!absl::ConsumePrefix(&arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected argument '", arg, "'; flags start with -- (see --help)"));
    }
    std::string name;
    std::string value;
    bool has_value = false;
    size_t eq = arg.find('=');
    if (eq != absl::string_view::npos) {
      name = std::string(arg.substr(0, eq));
      value = std::string(arg.substr(eq + 1));
      has_value = true;
    } else {
      name = std::string(arg);
    }
    if (!IsKnownFlag(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (see --help)"));
    }
    if (IsBoolFlag(name)) {
      bool b = true;
      if (has_value) {
        ASSIGN_OR_RETURN(b, ParseBool(name, value));
      }
      if (name == "help") o.help = b;
      if (name == "version") o.version = b;
      if (name == "reuse-port") o.reuse_port = b;
      if (name == "mmap-weights") o.mmap_weights = b;
      if (name == "list-components") o.list_components = b;
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value (see --help)"));
      }
      value = argv[++i];
    }
    bool known = false;
    RETURN_IF_ERROR(SetEngineOption(name, value, &o.engine, &known));
    if (known) continue;
    if (name == "listen") {
      if (value.empty() || !absl::StrContains(value, ':')) {
        return Bad(name, value, "expected HOST:PORT, e.g. 127.0.0.1:50051");
      }
      o.listen = value;
    } else if (name == "metrics-listen") {
      if (!value.empty() && !absl::StrContains(value, ':')) {
        return Bad(name, value, "expected HOST:PORT, e.g. 127.0.0.1:9090");
      }
      o.metrics_listen = value;
    } else if (name == "health-listen") {
      if (!value.empty() && !absl::StrContains(value, ':')) {
        return Bad(name, value, "expected HOST:PORT, e.g. 0.0.0.0:8081");
      }
      o.health_listen = value;
    } else if (name == "model") {
      model_values.push_back(value);
    } else if (name == "plugin") {
      if (value.empty()) return Bad(name, value, "expected the path of a .so");
      o.plugins.push_back(value);
    } else if (name == "max-inputs-per-request") {
      ASSIGN_OR_RETURN(o.max_inputs_per_request,
                       ParseInt(name, value, 1, 1 << 20));
    } else if (name == "max-concurrent-streams") {
      ASSIGN_OR_RETURN(o.max_concurrent_streams,
                       ParseInt(name, value, 1, 1 << 20));
    } else if (name == "max-receive-message-bytes") {
      ASSIGN_OR_RETURN(o.max_receive_message_bytes,
                       ParseInt(name, value, 1024, 1 << 30));
    } else if (name == "drain-timeout") {
      double d;
      if (!absl::SimpleAtod(value, &d) || d < 0 || d > 86400) {
        return Bad(name, value, "expected seconds in [0, 86400]");
      }
      o.drain_timeout_seconds = d;
    } else if (name == "log-format") {
      if (value != "text" && value != "json") {
        return Bad(name, value, "expected text or json");
      }
      o.log_format = value;
    } else if (name == "log-level") {
      if (value != "trace" && value != "debug" && value != "info" &&
          value != "warn" && value != "error") {
        return Bad(name, value, "expected trace, debug, info, warn or error");
      }
      o.log_level = value;
    } else if (name == "tls-cert") {
      o.tls_cert = value;
    } else if (name == "tls-key") {
      o.tls_key = value;
    } else if (name == "tls-client-ca") {
      o.tls_client_ca = value;
    } else if (name == "api-key") {
      o.api_key = value;
    } else if (name == "api-key-file") {
      o.api_key_file = value;
    }
  }
  if (o.help || o.version || o.list_components) return o;

  // Models are parsed last so they inherit every engine flag, wherever the
  // flag appears on the command line.
  for (const std::string& v : model_values) {
    ModelSpec spec;
    RETURN_IF_ERROR(ParseModel(v, o.engine, &spec));
    for (const ModelSpec& other : o.models) {
      if (other.name == spec.name) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--model: the name '", spec.name, "' is given twice"));
      }
    }
    o.models.push_back(std::move(spec));
  }
  if (o.models.empty()) {
    return absl::InvalidArgumentError(
        "no model to serve: pass --model NAME=PATH (a Hugging Face model "
        "directory with config.json, or a .gguf file)");
  }
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
  return o;
}

}  // namespace inferd
