#include "runtime/loader/model_config.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/common/status_macros.h"
#include "runtime/loader/config_parser.h"
#include "runtime/loader/json_util.h"

namespace inferd {
namespace {

using loader_internal::AsInt;
using loader_internal::JsonFields;

// `aliases`: the family's older type names (ConfigParser::
// rope_type_aliases).
absl::StatusOr<absl::optional<RopeScalingConfig>> ParseRopeScaling(
    const nlohmann::json& obj, absl::string_view field,
    absl::string_view source,
    const std::map<std::string, std::string>& aliases) {
  const std::string where = absl::StrCat(source, " ", field);
  JsonFields f(obj, where);
  std::string type;
  if (f.Has("rope_type")) {
    ASSIGN_OR_RETURN(type, f.String("rope_type", ""));
  } else {
    ASSIGN_OR_RETURN(type, f.String("type", ""));
  }
  if (auto alias = aliases.find(type); alias != aliases.end()) {
    type = alias->second;
  }
  if (type.empty() || type == "default") return absl::optional<RopeScalingConfig>();
  RopeScalingConfig r;
  r.type = type;
  if (type != "linear" && type != "dynamic" && type != "llama3" &&
      type != "yarn" && type != "longrope") {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": unsupported rope type '", type,
                     "' (supported: linear, dynamic, llama3, yarn, longrope)"));
  }
  if (type != "longrope" && !f.Has("factor")) {
    return f.Error("factor", absl::StrCat("is required for rope type ", type));
  }
  ASSIGN_OR_RETURN(r.factor, f.Double("factor", 1.0));
  if (!(r.factor > 0.0)) return f.Error("factor", "must be positive");
  ASSIGN_OR_RETURN(r.original_max_position_embeddings,
                   f.Int("original_max_position_embeddings", 0));
  if (type == "llama3") {
    for (absl::string_view key : {"original_max_position_embeddings",
                                  "low_freq_factor", "high_freq_factor"}) {
      if (!f.Has(key)) return f.Error(key, "is required for rope type llama3");
    }
  }
  ASSIGN_OR_RETURN(r.low_freq_factor, f.Double("low_freq_factor", 1.0));
  ASSIGN_OR_RETURN(r.high_freq_factor, f.Double("high_freq_factor", 4.0));
  if (type == "llama3" && !(r.high_freq_factor > r.low_freq_factor)) {
    return f.Error("high_freq_factor", "must exceed low_freq_factor");
  }
  ASSIGN_OR_RETURN(r.beta_fast, f.Double("beta_fast", 32.0));
  ASSIGN_OR_RETURN(r.beta_slow, f.Double("beta_slow", 1.0));
  ASSIGN_OR_RETURN(r.attention_factor, f.OptionalDouble("attention_factor"));
  ASSIGN_OR_RETURN(r.mscale, f.OptionalDouble("mscale"));
  ASSIGN_OR_RETURN(r.mscale_all_dim, f.OptionalDouble("mscale_all_dim"));
  for (auto [key, out] : {std::make_pair("short_factor", &r.short_factor),
                          std::make_pair("long_factor", &r.long_factor)}) {
    const nlohmann::json* v = f.Find(key);
    if (v == nullptr) continue;
    if (!v->is_array()) return f.Error(key, "must be a list of numbers");
    for (const auto& x : *v) {
      if (!x.is_number()) return f.Error(key, "must be a list of numbers");
      out->push_back(x.get<double>());
    }
  }
  if (type == "longrope" && (r.short_factor.empty() || r.long_factor.empty())) {
    return f.Error("short_factor",
                   "and long_factor are required for rope type longrope");
  }
  return absl::optional<RopeScalingConfig>(std::move(r));
}

absl::Status ParseLabels(const JsonFields& f, ModelConfig& c) {
  if (const nlohmann::json* v = f.Find("id2label")) {
    if (!v->is_object()) return f.Error("id2label", "must be an object");
    for (auto it = v->begin(); it != v->end(); ++it) {
      int64_t id = 0;
      if (!absl::SimpleAtoi(it.key(), &id) || id < 0) {
        return f.Error("id2label", absl::StrCat("has non-integer key '",
                                                it.key(), "'"));
      }
      if (!it.value().is_string()) {
        return f.Error("id2label", "values must be strings");
      }
      c.id2label[id] = it.value().get<std::string>();
    }
  }
  if (const nlohmann::json* v = f.Find("label2id")) {
    if (!v->is_object()) return f.Error("label2id", "must be an object");
    for (auto it = v->begin(); it != v->end(); ++it) {
      absl::optional<int64_t> id = AsInt(it.value());
      if (!id.has_value()) return f.Error("label2id", "values must be integers");
      c.label2id[it.key()] = *id;
    }
  }
  // transformers derives num_labels from id2label when both are present.
  if (!c.id2label.empty()) {
    c.num_labels = static_cast<int64_t>(c.id2label.size());
  } else {
    ASSIGN_OR_RETURN(c.num_labels, f.Int("num_labels", 2));
  }
  if (c.num_labels < 1) return f.Error("num_labels", "must be at least 1");
  for (const auto& [id, label] : c.id2label) {
    if (id >= c.num_labels) {
      return f.Error("id2label", "ids must be 0..num_labels-1");
    }
  }
  ASSIGN_OR_RETURN(c.problem_type, f.String("problem_type", ""));
  if (!c.problem_type.empty() && c.problem_type != "regression" &&
      c.problem_type != "single_label_classification" &&
      c.problem_type != "multi_label_classification") {
    return f.Error("problem_type", absl::StrCat("has unknown value '",
                                                c.problem_type, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

bool ModelConfig::IsCausalLM() const {
  return !architectures.empty() &&
         absl::EndsWith(architectures[0], "ForCausalLM");
}

bool ModelConfig::IsSequenceClassification() const {
  return !architectures.empty() &&
         absl::EndsWith(architectures[0], "ForSequenceClassification");
}

int64_t ModelConfig::position_id_offset() const {
  return position_ids_after_padding ? pad_token_id.value_or(1) + 1 : 0;
}

absl::optional<int64_t> ModelConfig::SlidingWindowForLayer(
    int64_t layer) const {
  if (!sliding_window.has_value()) return absl::nullopt;
  if (!layer_types.empty()) {
    if (layer >= 0 && layer < static_cast<int64_t>(layer_types.size()) &&
        layer_types[layer] == "sliding_attention") {
      return sliding_window;
    }
    return absl::nullopt;
  }
  if (layer >= max_window_layers) return sliding_window;
  return absl::nullopt;
}

bool ModelConfig::LayerUsesRope(int64_t layer) const {
  if (layer < 0 || layer >= static_cast<int64_t>(layer_uses_rope.size())) {
    return true;
  }
  return layer_uses_rope[static_cast<size_t>(layer)];
}

bool ModelConfig::LayerUsesLocalRope(int64_t layer) const {
  return rope_local_theta > 0 && layer >= 0 &&
         layer < static_cast<int64_t>(layer_types.size()) &&
         layer_types[static_cast<size_t>(layer)] == "sliding_attention";
}

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json,
                                             absl::string_view source) {
  ASSIGN_OR_RETURN(nlohmann::json root,
                   loader_internal::ParseJsonObject(json, source));
  JsonFields f(root, source);

  const nlohmann::json* arch = f.Find("architectures");
  if (arch == nullptr) return f.Error("architectures", "is required but missing");
  if (!arch->is_array() || arch->empty()) {
    return f.Error("architectures", "must be a non-empty list of strings");
  }
  std::vector<std::string> architectures;
  for (const auto& a : *arch) {
    if (!a.is_string()) {
      return f.Error("architectures", "must be a non-empty list of strings");
    }
    architectures.push_back(a.get<std::string>());
  }

  // The model_type's registered parser (config_parser.h) supplies the
  // family's defaults and rules.
  ASSIGN_OR_RETURN(std::string model_type, f.String("model_type", ""));
  if (model_type.empty()) {
    auto inferred = ModelTypeForArchitecture(architectures[0]);
    if (!inferred.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": no model_type, and architecture ", architectures[0],
          " matches no registered config parser; registered model_types: ",
          absl::StrJoin(ConfigParserModelTypes(), ", "),
          " (set model_type, or load a plug-in that registers it with "
          "--plugin)"));
    }
    model_type = *std::move(inferred);
  }
  auto parser = FindConfigParser(model_type);
  if (!parser.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, " (architecture ", architectures[0],
                     "): ", parser.status().message()));
  }
  for (const auto& [older, newer] : parser->key_aliases) {
    if (root.contains(older) && !root.contains(newer)) {
      root[newer] = root[older];
    }
  }
  const ModelConfig& d = parser->defaults;
  ModelConfig c = d;
  c.model_type = std::move(model_type);
  c.architectures = std::move(architectures);
  c.eos_token_ids.clear();
  c.layer_types.clear();
  c.layer_uses_rope.clear();

  ASSIGN_OR_RETURN(c.vocab_size, f.RequiredInt("vocab_size"));
  ASSIGN_OR_RETURN(c.hidden_size, f.RequiredInt("hidden_size"));
  ASSIGN_OR_RETURN(c.num_hidden_layers, f.RequiredInt("num_hidden_layers"));
  ASSIGN_OR_RETURN(c.num_attention_heads, f.RequiredInt("num_attention_heads"));
  ASSIGN_OR_RETURN(c.intermediate_size,
                   f.Int("intermediate_size", d.intermediate_size));
  ASSIGN_OR_RETURN(c.max_position_embeddings,
                   f.Int("max_position_embeddings", d.max_position_embeddings));
  ASSIGN_OR_RETURN(c.hidden_act, f.String("hidden_act", d.hidden_act));
  if (c.IsDecoder() && !f.Has("hidden_act") && f.Has("hidden_activation")) {
    ASSIGN_OR_RETURN(c.hidden_act, f.String("hidden_activation", ""));
  }
  for (auto [key, value] :
       {std::make_pair("vocab_size", c.vocab_size),
        std::make_pair("hidden_size", c.hidden_size),
        std::make_pair("num_hidden_layers", c.num_hidden_layers),
        std::make_pair("num_attention_heads", c.num_attention_heads),
        std::make_pair("intermediate_size", c.intermediate_size),
        std::make_pair("max_position_embeddings",
                       c.max_position_embeddings)}) {
    if (value <= 0) return f.Error(key, "must be positive");
  }

  ASSIGN_OR_RETURN(
      c.num_key_value_heads,
      f.Int("num_key_value_heads", d.num_key_value_heads > 0
                                       ? d.num_key_value_heads
                                       : c.num_attention_heads));
  if (c.num_key_value_heads <= 0 ||
      c.num_attention_heads % c.num_key_value_heads != 0) {
    return f.Error("num_key_value_heads",
                   absl::StrCat("(", c.num_key_value_heads,
                                ") must be positive and divide "
                                "num_attention_heads (",
                                c.num_attention_heads, ")"));
  }
  ASSIGN_OR_RETURN(absl::optional<int64_t> head_dim, f.OptionalInt("head_dim"));
  if (!head_dim.has_value() && d.head_dim > 0) head_dim = d.head_dim;
  if (head_dim.has_value()) {
    if (*head_dim <= 0) return f.Error("head_dim", "must be positive");
    c.head_dim = *head_dim;
  } else {
    if (c.hidden_size % c.num_attention_heads != 0) {
      return f.Error("hidden_size",
                     absl::StrCat("(", c.hidden_size,
                                  ") is not a multiple of num_attention_heads (",
                                  c.num_attention_heads, ")"));
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }

  // Token ids: a key the file mentions (even as null) replaces the default.
  if (root.contains("bos_token_id")) {
    ASSIGN_OR_RETURN(c.bos_token_id, f.OptionalInt("bos_token_id"));
  }
  if (root.contains("pad_token_id")) {
    ASSIGN_OR_RETURN(c.pad_token_id, f.OptionalInt("pad_token_id"));
  }
  if (const nlohmann::json* eos = f.Find("eos_token_id")) {
    if (eos->is_array()) {
      for (const auto& e : *eos) {
        absl::optional<int64_t> id = AsInt(e);
        if (!id.has_value()) {
          return f.Error("eos_token_id", "must be an integer or a list of them");
        }
        c.eos_token_ids.push_back(*id);
      }
    } else {
      absl::optional<int64_t> id = AsInt(*eos);
      if (!id.has_value()) {
        return f.Error("eos_token_id", "must be an integer or a list of them");
      }
      c.eos_token_ids.push_back(*id);
    }
  } else if (!root.contains("eos_token_id")) {
    c.eos_token_ids = d.eos_token_ids;
  }

  ASSIGN_OR_RETURN(c.torch_dtype, f.String("torch_dtype", ""));
  if (c.torch_dtype.empty()) {
    ASSIGN_OR_RETURN(c.torch_dtype, f.String("dtype", ""));
  }
  ASSIGN_OR_RETURN(c.is_causal, f.OptionalBool("is_causal"));
  RETURN_IF_ERROR(ParseLabels(f, c));

  if (c.IsEncoder()) {
    ASSIGN_OR_RETURN(c.layer_norm_eps,
                     f.Double("layer_norm_eps", d.layer_norm_eps > 0
                                                    ? d.layer_norm_eps
                                                    : 1e-12));
    if (!(c.layer_norm_eps > 0)) return f.Error("layer_norm_eps", "must be positive");
    ASSIGN_OR_RETURN(c.type_vocab_size,
                     f.Int("type_vocab_size", d.type_vocab_size));
    if (c.type_vocab_size < 0) return f.Error("type_vocab_size", "must be >= 0");
    ASSIGN_OR_RETURN(c.position_embedding_type,
                     f.String("position_embedding_type",
                              d.position_embedding_type.empty()
                                  ? "absolute"
                                  : d.position_embedding_type));
    // Absolute, the family's own kind (nomic_bert: "rotary") or one it
    // also reads (bert: "alibi").
    const std::vector<std::string>& also = parser->position_embedding_types;
    if (c.position_embedding_type != "absolute" &&
        c.position_embedding_type != d.position_embedding_type &&
        std::find(also.begin(), also.end(), c.position_embedding_type) ==
            also.end()) {
      std::vector<std::string> known = {"absolute"};
      if (d.position_embedding_type != "absolute") {
        known.push_back(d.position_embedding_type);
      }
      known.insert(known.end(), also.begin(), also.end());
      return f.Error("position_embedding_type",
                     absl::StrCat("'", c.position_embedding_type,
                                  "' is not supported for model_type ",
                                  c.model_type, " (",
                                  absl::StrJoin(known, ", "), ")"));
    }
    ASSIGN_OR_RETURN(c.tie_word_embeddings,
                     f.Bool("tie_word_embeddings", d.tie_word_embeddings));
  } else {
    ASSIGN_OR_RETURN(c.rms_norm_eps, f.Double("rms_norm_eps",
                                               d.rms_norm_eps > 0 ? d.rms_norm_eps : 1e-6));
    if (!(c.rms_norm_eps > 0)) return f.Error("rms_norm_eps", "must be positive");
    if (!(c.rope_theta > 0)) c.rope_theta = 10000.0;
    if (const nlohmann::json* params = f.Find("rope_parameters")) {
      if (!params->is_object()) {
        return f.Error("rope_parameters", "must be an object");
      }
      JsonFields p(*params, absl::StrCat(source, " rope_parameters"));
      ASSIGN_OR_RETURN(c.rope_theta, p.Double("rope_theta", c.rope_theta));
      ASSIGN_OR_RETURN(c.rope_scaling,
                       ParseRopeScaling(*params, "rope_parameters", source,
                                        parser->rope_type_aliases));
    }
    ASSIGN_OR_RETURN(c.rope_theta, f.Double("rope_theta", c.rope_theta));
    if (!(c.rope_theta > 0)) return f.Error("rope_theta", "must be positive");
    if (const nlohmann::json* rs = f.Find("rope_scaling")) {
      if (!rs->is_object()) {
        return f.Error("rope_scaling", "must be an object or null");
      }
      ASSIGN_OR_RETURN(c.rope_scaling,
                       ParseRopeScaling(*rs, "rope_scaling", source,
                                        parser->rope_type_aliases));
    }
    ASSIGN_OR_RETURN(c.tie_word_embeddings,
                     f.Bool("tie_word_embeddings", d.tie_word_embeddings));
    ASSIGN_OR_RETURN(c.attention_bias,
                     f.Bool("attention_bias", d.attention_bias));
    ASSIGN_OR_RETURN(c.mlp_bias, f.Bool("mlp_bias", d.mlp_bias));
    RETURN_IF_ERROR(ReadLayerTypes(root, source, c));
  }

  // The family's own keys and rules.
  if (parser->read_extra) {
    RETURN_IF_ERROR(parser->read_extra(root, source, c));
  }
  if (c.sliding_window.has_value() && *c.sliding_window <= 0) {
    return f.Error("sliding_window", "must be positive");
  }
  return c;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir) {
  const std::string path = loader_internal::JoinPath(dir, "config.json");
  ASSIGN_OR_RETURN(std::string text, loader_internal::ReadTextFile(path));
  return ParseModelConfig(text, path);
}

}  // namespace inferd
