#include "runtime/loader/config_parser.h"

#include <cmath>
#include <iterator>
#include <mutex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/registry.h"
#include "runtime/common/status_macros.h"
#include "runtime/loader/json_util.h"

namespace inferd {
namespace {

using loader_internal::JsonFields;

// Defaults of transformers' BertConfig.
ConfigParser Bert() {
  ConfigParser p;
  p.architecture_prefix = "Bert";
  ModelConfig& d = p.defaults;
  d.is_encoder = true;
  d.hidden_act = "gelu";
  d.intermediate_size = 3072;
  d.max_position_embeddings = 512;
  d.pad_token_id = 0;
  d.layer_norm_eps = 1e-12;
  d.type_vocab_size = 2;
  d.position_embedding_type = "absolute";
  d.attention_bias = true;
  d.mlp_bias = true;
  d.tie_word_embeddings = true;  // PretrainedConfig's; encoders have no LM head
  return p;
}

// XLMRobertaConfig / RobertaConfig: BERT's shapes, RoBERTa's special ids
// and positions numbered from padding_idx + 1.
ConfigParser Roberta(const char* prefix) {
  ConfigParser p = Bert();
  p.architecture_prefix = prefix;
  p.defaults.bos_token_id = 0;
  p.defaults.eos_token_ids = {2};
  p.defaults.pad_token_id = 1;
  p.defaults.position_ids_after_padding = true;
  return p;
}

// LlamaConfig.
ConfigParser Llama() {
  ConfigParser p;
  p.architecture_prefix = "Llama";
  ModelConfig& d = p.defaults;
  d.is_encoder = false;
  d.hidden_act = "silu";
  d.intermediate_size = 11008;
  d.max_position_embeddings = 2048;
  d.bos_token_id = 1;
  d.eos_token_ids = {2};
  d.rms_norm_eps = 1e-6;
  d.rope_theta = 10000.0;
  d.tie_word_embeddings = false;
  d.attention_bias = false;
  d.mlp_bias = false;
  return p;
}

// "sliding_window" absent -> 4096; an explicit null -> full attention.
absl::Status ReadSlidingWindow(const JsonFields& f, const nlohmann::json& json,
                               ModelConfig& c) {
  if (!json.contains("sliding_window")) {
    c.sliding_window = 4096;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(c.sliding_window, f.OptionalInt("sliding_window"));
  return absl::OkStatus();
}

// MistralConfig: one window for every layer (Mistral v0.2+ sets null).
ConfigParser Mistral() {
  ConfigParser p = Llama();
  p.architecture_prefix = "Mistral";
  p.defaults.intermediate_size = 14336;
  p.defaults.max_position_embeddings = 4096 * 32;
  p.defaults.num_key_value_heads = 8;
  p.read_extra = [](const nlohmann::json& json, absl::string_view source,
                    ModelConfig& c) -> absl::Status {
    JsonFields f(json, source);
    RETURN_IF_ERROR(ReadSlidingWindow(f, json, c));
    c.use_sliding_window = c.sliding_window.has_value();
    c.max_window_layers = 0;
    return absl::OkStatus();
  };
  return p;
}

// Qwen2Config / Qwen3Config: a window only with use_sliding_window, for
// layers >= max_window_layers.
absl::Status ReadQwenSlidingWindow(const nlohmann::json& json,
                                   absl::string_view source, ModelConfig& c) {
  JsonFields f(json, source);
  ASSIGN_OR_RETURN(c.use_sliding_window, f.Bool("use_sliding_window", false));
  RETURN_IF_ERROR(ReadSlidingWindow(f, json, c));
  ASSIGN_OR_RETURN(c.max_window_layers, f.Int("max_window_layers", 28));
  if (!c.use_sliding_window) c.sliding_window = absl::nullopt;
  return absl::OkStatus();
}

ConfigParser Qwen2() {
  ConfigParser p = Llama();
  p.architecture_prefix = "Qwen2";
  p.defaults.intermediate_size = 22016;
  p.defaults.max_position_embeddings = 32768;
  p.defaults.num_key_value_heads = 32;
  p.defaults.bos_token_id = absl::nullopt;
  p.defaults.eos_token_ids.clear();
  p.defaults.attention_bias = true;
  p.read_extra = [](const nlohmann::json& json, absl::string_view source,
                    ModelConfig& c) -> absl::Status {
    // Qwen2's q/k/v projections always have a bias, whatever the file says.
    c.attention_bias = true;
    return ReadQwenSlidingWindow(json, source, c);
  };
  return p;
}

// Qwen3Config: Qwen2's shapes, no bias, per-head q/k RMSNorm and a head_dim
// of 128 whatever hidden_size / heads is.
ConfigParser Qwen3() {
  ConfigParser p = Qwen2();
  p.architecture_prefix = "Qwen3";
  p.defaults.attention_bias = false;
  p.defaults.head_dim = 128;
  p.defaults.qk_norm = true;
  p.read_extra = &ReadQwenSlidingWindow;
  return p;
}

// SmolLM3Config: Llama's blocks with RoPE left out of some layers
// (no_rope_layers, or every no_rope_layer_interval-th layer), and a sliding
// window only with use_sliding_window, on the layers layer_types (derived:
// those without RoPE) marks.
ConfigParser SmolLM3() {
  ConfigParser p = Llama();
  p.architecture_prefix = "SmolLM3";
  ModelConfig& d = p.defaults;
  d.intermediate_size = 11008;
  d.max_position_embeddings = 32768;
  d.num_key_value_heads = 4;
  d.rope_theta = 2000000.0;
  d.bos_token_id = 128000;
  d.eos_token_ids = {128001};
  d.pad_token_id = 128004;
  d.tie_word_embeddings = true;
  p.read_extra = [](const nlohmann::json& json, absl::string_view source,
                    ModelConfig& c) -> absl::Status {
    JsonFields f(json, source);
    const int64_t layers = c.num_hidden_layers;
    if (const nlohmann::json* v = f.Find("no_rope_layers")) {
      if (!v->is_array() || static_cast<int64_t>(v->size()) != layers) {
        return f.Error("no_rope_layers",
                       "must list one 0 or 1 per hidden layer");
      }
      for (const auto& x : *v) {
        absl::optional<int64_t> flag = loader_internal::AsInt(x);
        if (!flag.has_value() || (*flag != 0 && *flag != 1)) {
          return f.Error("no_rope_layers",
                         "must list one 0 or 1 per hidden layer");
        }
        c.layer_uses_rope.push_back(*flag == 1);
      }
    } else {
      ASSIGN_OR_RETURN(int64_t interval, f.Int("no_rope_layer_interval", 4));
      if (interval <= 0) {
        return f.Error("no_rope_layer_interval", "must be positive");
      }
      for (int64_t i = 0; i < layers; ++i) {
        c.layer_uses_rope.push_back((i + 1) % interval != 0);
      }
    }
    ASSIGN_OR_RETURN(c.use_sliding_window, f.Bool("use_sliding_window", false));
    ASSIGN_OR_RETURN(c.sliding_window, f.OptionalInt("sliding_window"));
    if (!c.use_sliding_window) c.sliding_window = absl::nullopt;
    if (c.sliding_window.has_value() && c.layer_types.empty()) {
      for (int64_t i = 0; i < layers; ++i) {
        c.layer_types.push_back(c.layer_uses_rope[static_cast<size_t>(i)]
                                    ? "full_attention"
                                    : "sliding_attention");
      }
    }
    return absl::OkStatus();
  };
  return p;
}

// Phi3Config: Llama's blocks with fused q|k|v and gate|up projections (the
// model reads them from the weights), partial rotary dimensions
// (partial_rotary_factor, Phi-4-mini) and longrope scaling whose original
// context is the top-level original_max_position_embeddings; a
// sliding_window, when set, on every layer.
ConfigParser Phi3() {
  ConfigParser p = Llama();
  p.architecture_prefix = "Phi3";
  p.rope_type_aliases = {{"su", "longrope"}, {"yarn", "longrope"}};
  ModelConfig& d = p.defaults;
  d.intermediate_size = 8192;
  d.max_position_embeddings = 4096;
  d.rms_norm_eps = 1e-5;
  d.bos_token_id = 1;
  d.eos_token_ids = {32000};
  d.pad_token_id = 32000;
  p.read_extra = [](const nlohmann::json& json, absl::string_view source,
                    ModelConfig& c) -> absl::Status {
    JsonFields f(json, source);
    ASSIGN_OR_RETURN(c.sliding_window, f.OptionalInt("sliding_window"));
    c.max_window_layers = 0;
    // partial_rotary_factor: top level, or inside rope_parameters.
    const nlohmann::json* params = f.Find("rope_parameters");
    double partial = 1.0;
    if (params != nullptr && params->is_object() &&
        params->contains("partial_rotary_factor")) {
      JsonFields pf(*params, absl::StrCat(source, " rope_parameters"));
      ASSIGN_OR_RETURN(partial, pf.Double("partial_rotary_factor", 1.0));
    }
    ASSIGN_OR_RETURN(c.partial_rotary_factor,
                     f.Double("partial_rotary_factor", partial));
    const int64_t rotary = static_cast<int64_t>(
        static_cast<double>(c.head_dim) * c.partial_rotary_factor);
    if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1) ||
        rotary < 2 || rotary % 2 != 0) {
      return f.Error("partial_rotary_factor",
                     absl::StrCat("must give an even number of rotary "
                                  "dimensions in (0, head_dim], got ",
                                  rotary));
    }
    if (!c.rope_scaling.has_value() || c.rope_scaling->type != "longrope") {
      if (c.rope_scaling.has_value()) {
        return f.Error("rope_scaling",
                       absl::StrCat("type '", c.rope_scaling->type,
                                    "' is not supported for Phi-3 (longrope)"));
      }
      return absl::OkStatus();
    }
    // transformers' Phi3Config: the top-level original context wins over
    // the rope parameters'; without a factor, max / original.
    RopeScalingConfig& r = *c.rope_scaling;
    ASSIGN_OR_RETURN(r.original_max_position_embeddings,
                     f.Int("original_max_position_embeddings",
                           r.original_max_position_embeddings > 0
                               ? r.original_max_position_embeddings
                               : 4096));
    if (r.original_max_position_embeddings <= 0) {
      return f.Error("original_max_position_embeddings", "must be positive");
    }
    const nlohmann::json* rs = f.Find("rope_scaling");
    const bool has_factor =
        (rs != nullptr && rs->is_object() && rs->contains("factor")) ||
        (params != nullptr && params->is_object() &&
         params->contains("factor"));
    if (!has_factor) {
      r.factor = static_cast<double>(c.max_position_embeddings) /
                 static_cast<double>(r.original_max_position_embeddings);
    }
    const size_t pairs = static_cast<size_t>(rotary / 2);
    if (r.short_factor.size() != pairs || r.long_factor.size() != pairs) {
      return f.Error("rope_scaling",
                     absl::StrCat("short_factor and long_factor need ", pairs,
                                  " values (rotary dimensions / 2)"));
    }
    return absl::OkStatus();
  };
  return p;
}

// Gemma 2 / 3 common keys: the window and the per-layer types (derived
// from `pattern`: every pattern-th layer global, the others sliding), the
// attention scale and soft caps.
absl::Status ReadGemma(const nlohmann::json& json, absl::string_view source,
                       int64_t pattern, ModelConfig& c) {
  JsonFields f(json, source);
  if (json.contains("sliding_window")) {
    ASSIGN_OR_RETURN(c.sliding_window, f.OptionalInt("sliding_window"));
  }
  if (c.layer_types.empty()) {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      c.layer_types.push_back((i + 1) % pattern != 0 ? "sliding_attention"
                                                     : "full_attention");
    }
  }
  ASSIGN_OR_RETURN(c.query_pre_attn_scalar,
                   f.Double("query_pre_attn_scalar", c.query_pre_attn_scalar));
  if (!(c.query_pre_attn_scalar > 0)) {
    return f.Error("query_pre_attn_scalar", "must be positive");
  }
  for (auto [key, out] :
       {std::make_pair("attn_logit_softcapping", &c.attn_logit_softcapping),
        std::make_pair("final_logit_softcapping",
                       &c.final_logit_softcapping)}) {
    if (!json.contains(key)) continue;  // the family's default
    ASSIGN_OR_RETURN(absl::optional<double> cap, f.OptionalDouble(key));
    if (cap.has_value() && !(*cap > 0)) {
      return f.Error(key, "must be positive or null");
    }
    *out = cap.value_or(0.0);
  }
  ASSIGN_OR_RETURN(bool bidirectional,
                   f.Bool("use_bidirectional_attention", false));
  if (bidirectional) {
    return f.Error("use_bidirectional_attention",
                   "true (EmbeddingGemma) is not supported yet");
  }
  c.embedding_multiplier = std::sqrt(static_cast<double>(c.hidden_size));
  return absl::OkStatus();
}

// Gemma2Config: GeGLU (gelu tanh), RMSNorm (1 + w), four norms per block,
// embeddings times sqrt(hidden), every other layer sliding, attention and
// final-logit soft caps.
ConfigParser Gemma2() {
  ConfigParser p = Llama();
  p.architecture_prefix = "Gemma2";
  ModelConfig& d = p.defaults;
  d.hidden_act = "gelu_pytorch_tanh";
  d.intermediate_size = 9216;
  d.max_position_embeddings = 8192;
  d.num_key_value_heads = 4;
  d.head_dim = 256;
  d.bos_token_id = 2;
  d.eos_token_ids = {1};
  d.pad_token_id = 0;
  d.tie_word_embeddings = true;
  d.rms_norm_weight_offset = 1.0;
  d.sandwich_norms = true;
  d.sliding_window = 4096;
  d.query_pre_attn_scalar = 256;
  d.attn_logit_softcapping = 50.0;
  d.final_logit_softcapping = 30.0;
  p.read_extra = [](const nlohmann::json& json, absl::string_view source,
                    ModelConfig& c) -> absl::Status {
    return ReadGemma(json, source, 2, c);
  };
  return p;
}

// Gemma3TextConfig: Gemma 2's block with q/k RMSNorm (1 + w) instead of
// attention soft caps, five sliding layers per global one
// (sliding_window_pattern), and a local RoPE base (rope_local_base_freq) on
// sliding layers; rope_scaling applies to global layers only.
ConfigParser Gemma3Text() {
  ConfigParser p = Gemma2();
  p.architecture_prefix = "Gemma3";
  ModelConfig& d = p.defaults;
  d.max_position_embeddings = 131072;
  d.rope_theta = 1000000.0;
  d.rope_local_theta = 10000.0;
  d.qk_norm = true;
  d.attn_logit_softcapping = 0.0;
  d.final_logit_softcapping = 0.0;
  p.read_extra = [](const nlohmann::json& json, absl::string_view source,
                    ModelConfig& c) -> absl::Status {
    JsonFields f(json, source);
    ASSIGN_OR_RETURN(int64_t pattern, f.Int("sliding_window_pattern", 6));
    if (pattern <= 0) return f.Error("sliding_window_pattern", "must be > 0");
    ASSIGN_OR_RETURN(c.rope_local_theta,
                     f.Double("rope_local_base_freq", c.rope_local_theta));
    // transformers 5 nests the RoPE parameters per layer type.
    if (const nlohmann::json* params = f.Find("rope_parameters");
        params != nullptr && params->is_object()) {
      const std::string where = absl::StrCat(source, " rope_parameters");
      for (const char* type : {"full_attention", "sliding_attention"}) {
        const auto it = params->find(type);
        if (it == params->end() || !it->is_object()) continue;
        JsonFields t(*it, absl::StrCat(where, ".", type));
        ASSIGN_OR_RETURN(std::string rope_type, t.String("rope_type", ""));
        const bool full = std::string(type) == "full_attention";
        double& theta = full ? c.rope_theta : c.rope_local_theta;
        ASSIGN_OR_RETURN(theta, t.Double("rope_theta", theta));
        if (rope_type == "linear" && full) {
          RopeScalingConfig r;
          r.type = "linear";
          ASSIGN_OR_RETURN(r.factor, t.Double("factor", 1.0));
          c.rope_scaling = r;
        } else if (!rope_type.empty() && rope_type != "default") {
          return t.Error("rope_type",
                         absl::StrCat("'", rope_type, "' is not supported"));
        }
      }
    }
    if (!(c.rope_local_theta > 0)) {
      return f.Error("rope_local_base_freq", "must be positive");
    }
    if (c.rope_scaling.has_value() && c.rope_scaling->type != "linear") {
      return f.Error("rope_scaling", "only linear scaling is supported");
    }
    return ReadGemma(json, source, pattern, c);
  };
  return p;
}

}  // namespace

Registry<ConfigParser>& ConfigParsers() {
  static auto* const registry = new Registry<ConfigParser>(
      "config_parser",
      "config.json's model_type -> how the family's config is read");
  return *registry;
}

void RegisterLoaderBuiltins() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::pair<const char*, const char*> kDescriptions[] = {
        {"bert", "BertConfig defaults; absolute positions from 0"},
        {"roberta",
         "RobertaConfig defaults; positions from pad_token_id + 1"},
        {"xlm-roberta",
         "XLMRobertaConfig defaults; positions from pad_token_id + 1"},
        {"llama", "LlamaConfig defaults; RoPE (+ rope_scaling)"},
        {"mistral", "MistralConfig defaults; sliding_window on every layer"},
        {"qwen2",
         "Qwen2Config defaults; q/k/v bias; sliding window above "
         "max_window_layers when use_sliding_window"},
        {"qwen3",
         "Qwen3Config defaults; q/k RMSNorm, head_dim 128; Qwen2's sliding "
         "window rule"},
        {"smollm3",
         "SmolLM3Config defaults; no RoPE on no_rope_layers (every 4th by "
         "default)"},
        {"phi3",
         "Phi3Config defaults; partial rotary, longrope with the top-level "
         "original context, sliding_window on every layer"},
        {"gemma2",
         "Gemma2Config defaults; (1 + w) norms, sandwich norms, soft caps, "
         "every other layer sliding"},
        {"gemma3_text",
         "Gemma3TextConfig defaults; q/k norms, local RoPE base on sliding "
         "layers (5 of 6)"},
    };
    const ConfigParser kParsers[] = {
        Bert(),   Roberta("Roberta"), Roberta("XLMRoberta"),
        Llama(),  Mistral(),          Qwen2(),
        Qwen3(),  SmolLM3(),          Phi3(),
        Gemma2(), Gemma3Text()};
    for (size_t i = 0; i < std::size(kParsers); ++i) {
      absl::Status s = AddConfigParser(kDescriptions[i].first,
                                       kDescriptions[i].second, kParsers[i],
                                       "builtin");
      (void)s;  // call_once: registered once
    }
  });
}

absl::Status AddConfigParser(const std::string& model_type,
                             const std::string& description,
                             ConfigParser parser, const std::string& origin) {
  if (model_type.empty()) {
    return absl::InvalidArgumentError(
        "a config parser needs a non-empty model_type");
  }
  return ConfigParsers().Add(model_type, description, std::move(parser),
                             origin);
}

absl::StatusOr<ConfigParser> FindConfigParser(absl::string_view model_type) {
  const ConfigParser* parser = ConfigParsers().Find(model_type);
  if (parser == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported model_type '", model_type,
        "'; registered: ", absl::StrJoin(ConfigParserModelTypes(), ", "),
        " (a plug-in loaded with --plugin can register another)"));
  }
  return *parser;
}

absl::StatusOr<std::string> ModelTypeForArchitecture(
    absl::string_view architecture) {
  for (const std::string& type : ConfigParserModelTypes()) {
    const ConfigParser* parser = ConfigParsers().Find(type);
    if (parser == nullptr || parser->architecture_prefix.empty()) continue;
    const std::string& prefix = parser->architecture_prefix;
    if (architecture == absl::StrCat(prefix, "Model") ||
        absl::StartsWith(architecture, absl::StrCat(prefix, "For"))) {
      return type;
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "no registered config parser recognizes architecture ", architecture));
}

std::vector<std::string> ConfigParserModelTypes() {
  return ConfigParsers().Names();
}

}  // namespace inferd
