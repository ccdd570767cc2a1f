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

// Defaults of transformers' BertConfig; "alibi" positions are JinaBERT v2's
// (its configs are BERT's with that type).
ConfigParser Bert() {
  ConfigParser p;
  p.architecture_prefix = "Bert";
  p.position_embedding_types = {"alibi"};
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
  p.position_embedding_types.clear();  // absolute only
  p.defaults.bos_token_id = 0;
  p.defaults.eos_token_ids = {2};
  p.defaults.pad_token_id = 1;
  p.defaults.position_ids_after_padding = true;
  return p;
}

// MPNetConfig: RoBERTa's positions and special ids, no token types, and
// the relative-position bias. transformers' MPNet buckets distances into 32
// whatever relative_attention_num_buckets says (the table may be larger),
// up to a distance of 128.
ConfigParser Mpnet() {
  ConfigParser p = Roberta("MPNet");
  ModelConfig& d = p.defaults;
  d.max_position_embeddings = 514;
  d.type_vocab_size = 0;
  d.relative_attention_buckets = 32;
  d.relative_attention_max_distance = 128;
  return p;
}

// partial_rotary_factor must rotate an even number of each head's
// dimensions, at least two.
absl::Status CheckPartialRotary(const JsonFields& f, const ModelConfig& c) {
  const int64_t rotary = static_cast<int64_t>(
      static_cast<double>(c.head_dim) * c.partial_rotary_factor);
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1) ||
      rotary < 2 || rotary % 2 != 0) {
    return f.Error("partial_rotary_factor",
                   absl::StrCat("must give an even number of rotary "
                                "dimensions in (0, head_dim], got ", rotary));
  }
  return absl::OkStatus();
}

// The rotary base of an encoder config: rope_parameters.rope_theta (newer
// transformers), else rope_theta, else the family's default.
absl::Status ReadEncoderRopeTheta(const JsonFields& f, absl::string_view source,
                                  ModelConfig& c) {
  double theta = c.rope_theta;
  if (const nlohmann::json* params = f.Find("rope_parameters")) {
    if (!params->is_object()) {
      return f.Error("rope_parameters", "must be an object");
    }
    JsonFields pf(*params, absl::StrCat(source, " rope_parameters"));
    ASSIGN_OR_RETURN(theta, pf.Double("rope_theta", theta));
  }
  ASSIGN_OR_RETURN(c.rope_theta, f.Double("rope_theta", theta));
  if (!(c.rope_theta > 0)) return f.Error("rope_theta", "must be positive");
  return absl::OkStatus();
}

// NomicBertConfig (nomic-embed-text): rotary positions (base 1000) instead
// of a position table, token types, SwiGLU, no biases, post-LayerNorm. The
// Hub's configs come from nomic's remote code, in GPT-2 style keys
// (n_embd, n_layer, rotary_emb_base, activation_function, ...);
// transformers' own NomicBertConfig uses the usual ones. Both read.
ConfigParser NomicBert() {
  ConfigParser p;
  p.architecture_prefix = "NomicBert";
  p.key_aliases = {{"n_embd", "hidden_size"},
                   {"n_layer", "num_hidden_layers"},
                   {"n_head", "num_attention_heads"},
                   {"n_inner", "intermediate_size"},
                   {"n_positions", "max_position_embeddings"},
                   {"layer_norm_epsilon", "layer_norm_eps"},
                   {"rotary_emb_base", "rope_theta"},
                   {"rotary_emb_fraction", "partial_rotary_factor"}};
  ModelConfig& d = p.defaults;
  d.is_encoder = true;
  d.hidden_act = "silu";
  d.intermediate_size = 3072;
  d.max_position_embeddings = 2048;
  d.type_vocab_size = 2;
  d.layer_norm_eps = 1e-12;
  d.pad_token_id = 0;
  d.position_embedding_type = "rotary";
  d.rope_theta = 1000.0;
  p.read_extra = [](const nlohmann::json& json, absl::string_view source,
                    ModelConfig& c) -> absl::Status {
    JsonFields f(json, source);
    // The remote code's gated activations name the gate's function.
    if (!f.Has("hidden_act") && f.Has("activation_function")) {
      ASSIGN_OR_RETURN(std::string fn, f.String("activation_function", ""));
      if (fn == "swiglu") {
        c.hidden_act = "silu";
      } else if (fn == "geglu") {
        c.hidden_act = "gelu";
      } else {
        return f.Error("activation_function",
                       absl::StrCat("'", fn, "' is not supported (swiglu or "
                                    "geglu: NomicBERT's MLP is gated)"));
      }
    }
    ASSIGN_OR_RETURN(bool prenorm, f.Bool("prenorm", false));
    if (prenorm) {
      return f.Error("prenorm", "true is not supported (NomicBERT blocks "
                                "normalize after the residual add)");
    }
    ASSIGN_OR_RETURN(c.rope_interleaved,
                     f.Bool("rotary_emb_interleaved", false));
    ASSIGN_OR_RETURN(absl::optional<double> scaling,
                     f.OptionalDouble("rotary_scaling_factor"));
    if (scaling.has_value()) {
      return f.Error("rotary_scaling_factor",
                     "is not supported yet (dynamic NTK scaling of NomicBERT's "
                     "rotary base); use a config without it");
    }
    RETURN_IF_ERROR(ReadEncoderRopeTheta(f, source, c));
    ASSIGN_OR_RETURN(c.partial_rotary_factor,
                     f.Double("partial_rotary_factor", 1.0));
    RETURN_IF_ERROR(CheckPartialRotary(f, c));
    return absl::OkStatus();
  };
  return p;
}

// GTE "new" (Alibaba's remote-code NewConfig: gte-base-en-v1.5,
// gte-large-en-v1.5, gte-multilingual-base) and transformers' GteConfig:
// rotary positions, a gated MLP whose gate runs hidden_act (GELU), q|k|v
// and output biases, post-LayerNorm. rope_scaling type "ntk" is the fixed
// NTK-aware scaling of the remote code: base times the factor, and every
// inverse frequency divided by factor^(2 / rotary_dim), held here as the
// rotary base and per-dimension divisors.
ConfigParser Gte(const char* prefix, double default_theta) {
  ConfigParser p;
  p.architecture_prefix = prefix;
  ModelConfig& d = p.defaults;
  d.is_encoder = true;
  d.hidden_act = "gelu";
  d.intermediate_size = 3072;
  d.max_position_embeddings = 8192;
  d.type_vocab_size = 0;
  d.layer_norm_eps = 1e-12;
  d.position_embedding_type = "rope";
  d.rope_theta = default_theta;
  p.read_extra = [](const nlohmann::json& json, absl::string_view source,
                    ModelConfig& c) -> absl::Status {
    JsonFields f(json, source);
    RETURN_IF_ERROR(ReadEncoderRopeTheta(f, source, c));
    ASSIGN_OR_RETURN(bool pack_qkv, f.Bool("pack_qkv", true));
    if (!pack_qkv) {
      return f.Error("pack_qkv", "false is not supported (q, k and v as one "
                                 "qkv_proj, as the published models store "
                                 "them)");
    }
    ASSIGN_OR_RETURN(std::string norm, f.String("layer_norm_type",
                                                "layer_norm"));
    if (norm != "layer_norm") {
      return f.Error("layer_norm_type",
                     absl::StrCat("'", norm, "' is not supported (layer_norm)"));
    }
    ASSIGN_OR_RETURN(bool logn, f.Bool("logn_attention_scale", false));
    if (logn) {
      return f.Error("logn_attention_scale", "true is not supported");
    }
    ASSIGN_OR_RETURN(int64_t rotary,
                     f.Int("rotary_emb_dim", c.head_dim));
    if (rotary < 2 || rotary % 2 != 0 || rotary > c.head_dim) {
      return f.Error("rotary_emb_dim",
                     "must be even and at most the head dimension");
    }
    c.partial_rotary_factor =
        static_cast<double>(rotary) / static_cast<double>(c.head_dim);
    if (const nlohmann::json* rs = f.Find("rope_scaling")) {
      if (!rs->is_object()) {
        return f.Error("rope_scaling", "must be an object or null");
      }
      JsonFields rf(*rs, absl::StrCat(source, " rope_scaling"));
      ASSIGN_OR_RETURN(std::string type, rf.String("type", ""));
      if (type.empty()) {
        ASSIGN_OR_RETURN(type, rf.String("rope_type", ""));
      }
      ASSIGN_OR_RETURN(double factor, rf.Double("factor", 1.0));
      if (rf.Has("mixed_b")) {
        return f.Error("rope_scaling", "mixed NTK scaling (mixed_b) is not "
                                       "supported");
      }
      if (type != "ntk" || !(factor > 0)) {
        return f.Error("rope_scaling",
                       absl::StrCat("type '", type, "' with factor ", factor,
                                    " is not supported (ntk with a positive "
                                    "factor)"));
      }
      c.rope_theta *= factor;
      c.rope_freq_factors.assign(
          static_cast<size_t>(rotary / 2),
          std::pow(factor, 2.0 / static_cast<double>(rotary)));
    }
    return absl::OkStatus();
  };
  return p;
}

// transformers' GteConfig: its defaults differ (rotary base 160000, one
// token type, pad id 1).
ConfigParser GteTransformers() {
  ConfigParser p = Gte("Gte", 160000.0);
  p.defaults.type_vocab_size = 1;
  p.defaults.pad_token_id = 1;
  return p;
}

// ModernBertConfig: pre-LayerNorm (norm_eps, no biases by default), gated
// GELU, rotary positions with a global base (global_rope_theta, 160000) and
// a local one (local_rope_theta, 10000) on local layers, which see
// |i - j| <= local_attention / 2: every layer but each
// global_attn_every_n_layers-th (from 0) unless layer_types lists them.
ConfigParser ModernBert() {
  ConfigParser p;
  p.architecture_prefix = "ModernBert";
  p.key_aliases = {{"norm_eps", "layer_norm_eps"},
                   {"hidden_activation", "hidden_act"}};
  ModelConfig& d = p.defaults;
  d.is_encoder = true;
  d.hidden_act = "gelu";
  d.intermediate_size = 1152;
  d.max_position_embeddings = 8192;
  d.type_vocab_size = 0;
  d.layer_norm_eps = 1e-5;
  d.position_embedding_type = "rotary";
  d.pad_token_id = 50283;
  d.bos_token_id = 50281;
  d.eos_token_ids = {50282};
  d.rope_theta = 160000.0;
  d.rope_local_theta = 10000.0;
  p.read_extra = [](const nlohmann::json& json, absl::string_view source,
                    ModelConfig& c) -> absl::Status {
    JsonFields f(json, source);
    ASSIGN_OR_RETURN(c.rope_theta, f.Double("global_rope_theta", c.rope_theta));
    ASSIGN_OR_RETURN(c.rope_local_theta,
                     f.Double("local_rope_theta", c.rope_local_theta));
    // Newer files: rope_parameters per layer type.
    if (const nlohmann::json* params = f.Find("rope_parameters")) {
      if (!params->is_object()) {
        return f.Error("rope_parameters", "must be an object");
      }
      for (const auto& [type, theta] :
           {std::make_pair("full_attention", &c.rope_theta),
            std::make_pair("sliding_attention", &c.rope_local_theta)}) {
        const auto it = params->find(type);
        if (it == params->end() || it->is_null()) continue;
        if (!it->is_object()) {
          return f.Error("rope_parameters", absl::StrCat(type, " must be an "
                                                         "object"));
        }
        JsonFields tf(*it, absl::StrCat(source, " rope_parameters.", type));
        ASSIGN_OR_RETURN(*theta, tf.Double("rope_theta", *theta));
        ASSIGN_OR_RETURN(std::string rope_type,
                         tf.String("rope_type", "default"));
        if (rope_type != "default") {
          return f.Error("rope_parameters",
                         absl::StrCat(type, ": rope_type '", rope_type,
                                      "' is not supported (default)"));
        }
      }
    }
    if (!(c.rope_theta > 0) || !(c.rope_local_theta > 0)) {
      return f.Error("global_rope_theta",
                     "the global and local rotary bases must be positive");
    }
    ASSIGN_OR_RETURN(int64_t local, f.Int("local_attention", 128));
    if (local < 2 || local % 2 != 0) {
      return f.Error("local_attention", "must be a positive even window");
    }
    // Keys within local / 2 either side: |i - j| < local / 2 + 1.
    c.sliding_window = local / 2 + 1;
    c.use_sliding_window = true;
    c.layer_types.clear();
    RETURN_IF_ERROR(ReadLayerTypes(json, source, c));
    if (c.layer_types.empty()) {
      ASSIGN_OR_RETURN(int64_t every, f.Int("global_attn_every_n_layers", 3));
      if (every <= 0) {
        return f.Error("global_attn_every_n_layers", "must be positive");
      }
      for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        c.layer_types.push_back(i % every == 0 ? "full_attention"
                                               : "sliding_attention");
      }
    }
    return absl::OkStatus();
  };
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

// GemmaConfig (Gemma 1; bge-reranker-v2-gemma): Llama's blocks with
// RMSNorm scaling by (1 + w), embeddings times sqrt(hidden_size), head_dim
// 256 and the tanh-approximated GELU (transformers reads the original
// releases' hidden_act "gelu" as that).
ConfigParser Gemma() {
  ConfigParser p = Llama();
  p.architecture_prefix = "Gemma";
  ModelConfig& d = p.defaults;
  d.hidden_act = "gelu_pytorch_tanh";
  d.intermediate_size = 24576;
  d.max_position_embeddings = 8192;
  d.head_dim = 256;
  d.bos_token_id = 2;
  d.eos_token_ids = {1};
  d.pad_token_id = 0;
  d.tie_word_embeddings = true;
  d.rms_norm_weight_offset = 1.0;
  p.read_extra = [](const nlohmann::json& json, absl::string_view source,
                    ModelConfig& c) -> absl::Status {
    JsonFields f(json, source);
    if (c.hidden_act == "gelu") c.hidden_act = "gelu_pytorch_tanh";
    c.embedding_multiplier = std::sqrt(static_cast<double>(c.hidden_size));
    ASSIGN_OR_RETURN(bool bidirectional,
                     f.Bool("use_bidirectional_attention", false));
    if (bidirectional) c.is_causal = false;
    return absl::OkStatus();
  };
  return p;
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
    RETURN_IF_ERROR(CheckPartialRotary(f, c));
    const int64_t rotary = static_cast<int64_t>(
        static_cast<double>(c.head_dim) * c.partial_rotary_factor);
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
  // EmbeddingGemma: attention in both directions, the sliding layers' keys
  // within |i - j| < sliding_window / 2 + 1 (transformers' conversion of
  // the file's window for bidirectional Gemma 3).
  ASSIGN_OR_RETURN(bool bidirectional,
                   f.Bool("use_bidirectional_attention", false));
  if (bidirectional) {
    c.is_causal = false;
    if (c.sliding_window.has_value()) {
      c.sliding_window = *c.sliding_window / 2 + 1;
    }
  }
  c.embedding_multiplier = std::sqrt(static_cast<double>(c.hidden_size));
  return absl::OkStatus();
}

// Gemma2Config: GeGLU (gelu tanh), RMSNorm (1 + w), four norms per block,
// embeddings times sqrt(hidden), every other layer sliding, attention and
// final-logit soft caps.
ConfigParser Gemma2() {
  ConfigParser p = Gemma();  // Gemma 1's norms, ids, head_dim, GELU
  p.architecture_prefix = "Gemma2";
  ModelConfig& d = p.defaults;
  d.intermediate_size = 9216;
  d.num_key_value_heads = 4;
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

absl::Status ReadLayerTypes(const nlohmann::json& json,
                            absl::string_view source, ModelConfig& c) {
  JsonFields f(json, source);
  const nlohmann::json* lt = f.Find("layer_types");
  if (lt == nullptr) return absl::OkStatus();
  if (!lt->is_array() ||
      static_cast<int64_t>(lt->size()) != c.num_hidden_layers) {
    return f.Error("layer_types", "must list one type per hidden layer");
  }
  c.layer_types.clear();
  for (const auto& t : *lt) {
    if (!t.is_string() ||
        (t != "full_attention" && t != "sliding_attention")) {
      return f.Error("layer_types",
                     "entries must be full_attention or sliding_attention");
    }
    c.layer_types.push_back(t.get<std::string>());
  }
  return absl::OkStatus();
}

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
        {"mpnet",
         "MPNetConfig defaults; positions from pad_token_id + 1, "
         "relative-position attention bias (32 buckets)"},
        {"nomic_bert",
         "NomicBertConfig defaults (and nomic's remote-code keys: n_embd, "
         "rotary_emb_base, ...); rotary positions, SwiGLU, no biases"},
        {"new",
         "GTE's remote-code NewConfig (gte-base-en-v1.5); rotary positions "
         "(ntk scaling), gated GELU"},
        {"gte", "GteConfig defaults (transformers' GTE); rotary base 160000"},
        {"modernbert",
         "ModernBertConfig defaults; pre-norm, gated GELU, global/local "
         "rotary bases, local attention every layer but each third"},
        {"llama", "LlamaConfig defaults; RoPE (+ rope_scaling)"},
        {"gemma",
         "GemmaConfig defaults (Gemma 1); (1 + w) norms, scaled "
         "embeddings, tanh GELU"},
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
        Bert(),   Roberta("Roberta"), Roberta("XLMRoberta"), Mpnet(), NomicBert(),
        Gte("New", 10000.0), GteTransformers(), ModernBert(),
        Llama(),  Gemma(),  Mistral(),          Qwen2(),
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
