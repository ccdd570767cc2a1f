#include "service/model_flags.h"

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/chat/tool_parser.h"
#include "runtime/common/status_macros.h"
#include "runtime/gen/speculative.h"

namespace inferd::flags_internal {

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

namespace {

struct SizeUnit {
  const char* suffix;
  int64_t mult;
};
constexpr SizeUnit kSizeUnits[] = {{"gib", 1LL << 30}, {"mib", 1LL << 20},
                                   {"kib", 1LL << 10}, {"gb", 1000000000LL},
                                   {"mb", 1000000LL},  {"g", 1LL << 30},
                                   {"m", 1LL << 20}};

// The unit `v` (lower case) ends with, if any.
const SizeUnit* UnitOf(absl::string_view v) {
  for (const SizeUnit& u : kSizeUnits) {
    if (absl::EndsWith(v, u.suffix)) return &u;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<int64_t> ParseByteSize(absl::string_view flag,
                                      absl::string_view value) {
  const std::string v = absl::AsciiStrToLower(value);
  absl::string_view num = v;
  int64_t mult = 1;
  if (const SizeUnit* u = UnitOf(v)) {
    num.remove_suffix(strlen(u->suffix));
    mult = u->mult;
  }
  double d;
  if (!absl::SimpleAtod(num, &d) || d < 0 || d * mult > 9.2e18) {
    return Bad(flag, value, "expected a size such as 4GiB, 512MiB or bytes");
  }
  return static_cast<int64_t>(d * mult);
}

// "0.5" -> fraction of free memory; "4GiB", "512MiB", "1000000" -> bytes.
absl::Status ParseMemory(absl::string_view flag, absl::string_view value,
                         EngineOptions* engine) {
  std::string v = absl::AsciiStrToLower(value);
  if (UnitOf(v) != nullptr) {
    ASSIGN_OR_RETURN(int64_t bytes, ParseByteSize(flag, value));
    if (bytes <= 0) {
      return Bad(flag, value, "expected a size such as 4GiB or 512MiB");
    }
    engine->kv_cache_bytes = bytes;
    return absl::OkStatus();
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
  if (v == "auto") {
    *out = v;  // resolved per model when it opens (EngineOptions::dtype)
  } else if (v == "float32" || v == "f32" || v == "fp32") {
    *out = "float32";
  } else if (v == "bfloat16" || v == "bf16") {
    *out = "bfloat16";
  } else if (v == "q8_0" || v == "q4_0" || v == "q4_1") {
    *out = v;  // GEMM weights quantized at load
  } else if (v == "int8") {
    *out = v;  // encoders: int8 weights and int8 activations
  } else {
    return Bad(flag, value,
               "expected auto, float32, bfloat16, q8_0, q4_0, q4_1 or int8");
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
  } else if (key == "activations") {
    const std::string v = absl::AsciiStrToLower(value);
    if (v != "int8" && v != "exact") return Bad(key, value, "expected int8 or exact");
    e->activations = v;
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

// A model from its name, path and options (`--model` or a config file's
// `models` entry); `where` prefixes errors.

namespace {

// The --model options that name a registered component, and what a valid
// value is (said when the spelling is wrong).
struct NamedOption {
  const char* key;
  std::optional<std::string> ModelOverrides::*field;
  std::string (*what)();
};

const NamedOption kNamedOptions[] = {
    {"pooling", &ModelOverrides::pooling,
     [] {
       return std::string(
           "cls, mean, last or the name of a pooling a plug-in registers "
           "(e.g. max with examples/plugin)");
     }},
    {"sampler", &ModelOverrides::sampler,
     [] {
       return std::string(
           "the name of a registered sampler (sample_detokenize, or one a "
           "plug-in registers)");
     }},
    {"rerank_format", &ModelOverrides::rerank_format,
     [] {
       return std::string(
           "the name of a registered rerank format (qwen3, or one a plug-in "
           "registers)");
     }},
    {"tool_parser", &ModelOverrides::tool_parser,
     [] {
       return absl::StrCat("the name of a registered format: ",
                           absl::StrJoin(ToolParserNames(), ", "),
                           ", or one a plug-in registers");
     }},
    {"reasoning_parser", &ModelOverrides::reasoning_parser,
     [] {
       return absl::StrCat("the name of a registered format: ",
                           absl::StrJoin(ReasoningParserNames(), ", "),
                           ", or one a plug-in registers");
     }},
};

const NamedOption* FindNamed(absl::string_view key) {
  for (const NamedOption& o : kNamedOptions) {
    if (key == o.key) return &o;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<double> ParseDuration(absl::string_view value) {
  const std::string lower =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  absl::string_view v = lower;
  double mult = 1;
  if (absl::ConsumeSuffix(&v, "ms")) {
    mult = 0.001;
  } else if (absl::ConsumeSuffix(&v, "s")) {
  } else if (absl::ConsumeSuffix(&v, "m")) {
    mult = 60;
  } else if (absl::ConsumeSuffix(&v, "h")) {
    mult = 3600;
  } else if (absl::ConsumeSuffix(&v, "d")) {
    mult = 86400;
  }
  double d;
  if (!absl::SimpleAtod(v, &d) || d < 0 || d * mult > 365.0 * 86400) {
    return absl::InvalidArgumentError(absl::StrCat(
        "keep_alive=", value,
        ": expected a duration such as 300, 90s, 5m or 1h (0 = never "
        "unload)"));
  }
  return d * mult;
}

absl::Status BuildModel(const std::string& name, const std::string& path,
                        const std::vector<std::pair<std::string, std::string>>&
                            options,
                        const EngineOptions& defaults, const std::string& where,
                        ModelSpec* spec) {
  auto fail = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
  };
  spec->name = name;
  spec->path = path;
  if (name.empty() || path.empty()) {
    return fail(
        "expected NAME=PATH (for example --model llama=/models/Llama-3.2-1B)");
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.') {
      return fail("model names may use letters, digits, '-', '_' and '.'");
    }
  }
  spec->engine = defaults;
  for (const auto& [k, v] : options) {
    if (k == "task") {
      if (v != "generate" && v != "embed" && v != "rerank" && v != "classify") {
        return fail("task must be generate, embed, rerank or classify");
      }
      spec->overrides.task = v;
    } else if (const NamedOption* named = FindNamed(k)) {
      // Names a registered component (a plug-in's among them): only its
      // spelling here; whether it is registered once plug-ins are loaded
      // (ServedModel::CheckComponents, SelectWorkflow).
      if (v.empty() || v.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyz0123456789_") !=
                           std::string::npos) {
        return fail(absl::StrCat(k, " must be ", named->what()));
      }
      spec->overrides.*(named->field) = v;
    } else if (k == "load") {
      if (v != "startup" && v != "on_demand" && v != "on-demand") {
        return fail("load must be startup or on_demand");
      }
      spec->on_demand = v != "startup";
    } else if (k == "keep_alive" || k == "keep-alive") {
      absl::StatusOr<double> seconds = ParseDuration(v);
      if (!seconds.ok()) return fail(seconds.status().message());
      spec->keep_alive_seconds = *seconds;
    } else if (k == "bidirectional") {
      absl::StatusOr<bool> b = ParseBool(k, v);
      if (!b.ok()) return fail(b.status().message());
      spec->overrides.bidirectional = *b;
    } else {
      bool known = false;
      absl::Status st = SetEngineOption(k, v, &spec->engine, &known);
      if (!st.ok()) return fail(st.message());
      if (!known) {
        return fail(absl::StrCat("unknown model option '", k,
                                 "' (see --help for the options)"));
      }
    }
  }
  return absl::OkStatus();
}

// NAME=PATH[,key=value...]
absl::Status ParseModel(absl::string_view value, const EngineOptions& defaults,
                        ModelSpec* spec) {
  std::vector<std::string> parts = absl::StrSplit(value, ',');
  std::pair<std::string, std::string> np =
      absl::StrSplit(parts[0], absl::MaxSplits('=', 1));
  const std::string where = absl::StrCat("--model=", value);
  if (!absl::StrContains(parts[0], '=')) np = {"", ""};
  std::vector<std::pair<std::string, std::string>> options;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(parts[i], absl::MaxSplits('=', 1));
    options.push_back(std::move(kv));
  }
  return BuildModel(np.first, np.second, options, defaults, where, spec);
}

}  // namespace inferd::flags_internal
