#include "runtime/loader/model_config.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/common/registry.h"
#include "runtime/common/status_macros.h"
#include "runtime/loader/json_util.h"

namespace inferd {
namespace {

using loader_internal::AsInt;
using loader_internal::JsonFields;

struct FamilyName {
  absl::string_view model_type;
  absl::string_view arch_prefix;
  ModelFamily family;
};

// RoBERTa shares XLM-RoBERTa's modeling code and config defaults.
constexpr FamilyName kFamilies[] = {
    {"bert", "Bert", ModelFamily::kBert},
    {"xlm-roberta", "XLMRoberta", ModelFamily::kXlmRoberta},
    {"roberta", "Roberta", ModelFamily::kXlmRoberta},
    {"llama", "Llama", ModelFamily::kLlama},
    {"mistral", "Mistral", ModelFamily::kMistral},
    {"qwen2", "Qwen2", ModelFamily::kQwen2},
    {"qwen3", "Qwen3", ModelFamily::kQwen3},
};

// Defaults of the transformers config classes (BertConfig,
// XLMRobertaConfig, LlamaConfig, MistralConfig, Qwen2Config).
struct FamilyDefaults {
  std::string hidden_act;
  int64_t intermediate_size;
  int64_t max_position_embeddings;
  absl::optional<int64_t> num_key_value_heads;  // nullopt = attention heads
  absl::optional<int64_t> bos, eos, pad;
  bool attention_bias;
};

FamilyDefaults DefaultsFor(ModelFamily family) {
  switch (family) {
    case ModelFamily::kBert:
      return {"gelu", 3072, 512, absl::nullopt, absl::nullopt, absl::nullopt,
              0, true};
    case ModelFamily::kXlmRoberta:
      return {"gelu", 3072, 512, absl::nullopt, 0, 2, 1, true};
    case ModelFamily::kLlama:
      return {"silu", 11008, 2048, absl::nullopt, 1, 2, absl::nullopt, false};
    case ModelFamily::kMistral:
      return {"silu", 14336, 4096 * 32, 8, 1, 2, absl::nullopt, false};
    case ModelFamily::kQwen2:
      return {"silu", 22016, 32768, 32, absl::nullopt, absl::nullopt,
              absl::nullopt, true};
    case ModelFamily::kQwen3:
      return {"silu", 22016, 32768, 32, absl::nullopt, absl::nullopt,
              absl::nullopt, false};
  }
  return {};
}

absl::StatusOr<absl::optional<RopeScalingConfig>> ParseRopeScaling(
    const nlohmann::json& obj, absl::string_view field,
    absl::string_view source) {
  const std::string where = absl::StrCat(source, " ", field);
  JsonFields f(obj, where);
  std::string type;
  if (f.Has("rope_type")) {
    ASSIGN_OR_RETURN(type, f.String("rope_type", ""));
  } else {
    ASSIGN_OR_RETURN(type, f.String("type", ""));
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

absl::string_view ModelFamilyName(ModelFamily family) {
  for (const FamilyName& f : kFamilies) {
    if (f.family == family) return f.model_type;
  }
  return "unknown";
}

bool ModelConfig::IsCausalLM() const {
  return !architectures.empty() &&
         absl::EndsWith(architectures[0], "ForCausalLM");
}

bool ModelConfig::IsSequenceClassification() const {
  return !architectures.empty() &&
         absl::EndsWith(architectures[0], "ForSequenceClassification");
}

int64_t ModelConfig::position_id_offset() const {
  if (family == ModelFamily::kXlmRoberta) return pad_token_id.value_or(1) + 1;
  return 0;
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
  switch (family) {
    case ModelFamily::kMistral:
      return sliding_window;
    case ModelFamily::kQwen2:
    case ModelFamily::kQwen3:
      if (use_sliding_window && layer >= max_window_layers) {
        return sliding_window;
      }
      return absl::nullopt;
    default:
      return absl::nullopt;
  }
}

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json,
                                             absl::string_view source) {
  ASSIGN_OR_RETURN(nlohmann::json root,
                   loader_internal::ParseJsonObject(json, source));
  JsonFields f(root, source);
  ModelConfig c;

  const nlohmann::json* arch = f.Find("architectures");
  if (arch == nullptr) return f.Error("architectures", "is required but missing");
  if (!arch->is_array() || arch->empty()) {
    return f.Error("architectures", "must be a non-empty list of strings");
  }
  for (const auto& a : *arch) {
    if (!a.is_string()) {
      return f.Error("architectures", "must be a non-empty list of strings");
    }
    c.architectures.push_back(a.get<std::string>());
  }

  ASSIGN_OR_RETURN(c.model_type, f.String("model_type", ""));
  bool found = false;
  for (const FamilyName& fam : kFamilies) {
    // Without model_type, "<Prefix>Model" / "<Prefix>For..." identify the
    // family (so "Qwen2MoeForCausalLM" is not taken for Qwen2).
    const std::string& a0 = c.architectures[0];
    const bool match =
        c.model_type.empty()
            ? a0 == absl::StrCat(fam.arch_prefix, "Model") ||
                  absl::StartsWith(a0, absl::StrCat(fam.arch_prefix, "For"))
            : c.model_type == fam.model_type;
    if (match) {
      c.family = fam.family;
      if (c.model_type.empty()) c.model_type = std::string(fam.model_type);
      found = true;
      break;
    }
  }
  if (!found && !c.model_type.empty()) {
    // A plug-in may let another model_type parse like a built-in one.
    auto based_on = Registry::Global().Get<std::string>(
        registry_kind::kConfigParser, c.model_type);
    if (based_on.ok()) {
      for (const FamilyName& fam : kFamilies) {
        if (*based_on == fam.model_type) {
          c.family = fam.family;
          found = true;
          break;
        }
      }
    }
  }
  if (!found) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": unsupported model_type '", c.model_type, "' (architecture ",
        c.architectures[0],
        "); supported: bert, xlm-roberta, roberta, llama, mistral, qwen2, "
        "qwen3"));
  }
  const FamilyDefaults d = DefaultsFor(c.family);

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
      f.Int("num_key_value_heads",
            d.num_key_value_heads.value_or(c.num_attention_heads)));
  if (c.num_key_value_heads <= 0 ||
      c.num_attention_heads % c.num_key_value_heads != 0) {
    return f.Error("num_key_value_heads",
                   absl::StrCat("(", c.num_key_value_heads,
                                ") must be positive and divide "
                                "num_attention_heads (",
                                c.num_attention_heads, ")"));
  }
  ASSIGN_OR_RETURN(absl::optional<int64_t> head_dim, f.OptionalInt("head_dim"));
  // Qwen3Config's head_dim defaults to 128 whatever hidden_size / heads is.
  if (!head_dim.has_value() && c.family == ModelFamily::kQwen3) head_dim = 128;
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

  // Token ids.
  ASSIGN_OR_RETURN(c.bos_token_id, f.OptionalInt("bos_token_id"));
  ASSIGN_OR_RETURN(c.pad_token_id, f.OptionalInt("pad_token_id"));
  if (!root.contains("bos_token_id")) c.bos_token_id = d.bos;
  if (!root.contains("pad_token_id")) c.pad_token_id = d.pad;
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
  } else if (!root.contains("eos_token_id") && d.eos.has_value()) {
    c.eos_token_ids.push_back(*d.eos);
  }

  ASSIGN_OR_RETURN(c.torch_dtype, f.String("torch_dtype", ""));
  if (c.torch_dtype.empty()) {
    ASSIGN_OR_RETURN(c.torch_dtype, f.String("dtype", ""));
  }
  ASSIGN_OR_RETURN(c.is_causal, f.OptionalBool("is_causal"));
  RETURN_IF_ERROR(ParseLabels(f, c));

  if (c.IsEncoder()) {
    ASSIGN_OR_RETURN(c.layer_norm_eps, f.Double("layer_norm_eps", 1e-12));
    if (!(c.layer_norm_eps > 0)) return f.Error("layer_norm_eps", "must be positive");
    ASSIGN_OR_RETURN(c.type_vocab_size, f.Int("type_vocab_size", 2));
    if (c.type_vocab_size < 0) return f.Error("type_vocab_size", "must be >= 0");
    ASSIGN_OR_RETURN(c.position_embedding_type,
                     f.String("position_embedding_type", "absolute"));
    if (c.position_embedding_type != "absolute") {
      return f.Error("position_embedding_type",
                     absl::StrCat("'", c.position_embedding_type,
                                  "' is not supported (only 'absolute')"));
    }
    c.attention_bias = true;
    c.mlp_bias = true;
    // PretrainedConfig's default; encoders here have no LM head.
    ASSIGN_OR_RETURN(c.tie_word_embeddings, f.Bool("tie_word_embeddings", true));
    return c;
  }

  // Decoders.
  ASSIGN_OR_RETURN(c.rms_norm_eps, f.Double("rms_norm_eps", 1e-6));
  if (!(c.rms_norm_eps > 0)) return f.Error("rms_norm_eps", "must be positive");
  c.rope_theta = 10000.0;
  if (const nlohmann::json* params = f.Find("rope_parameters")) {
    if (!params->is_object()) return f.Error("rope_parameters", "must be an object");
    JsonFields p(*params, absl::StrCat(source, " rope_parameters"));
    ASSIGN_OR_RETURN(c.rope_theta, p.Double("rope_theta", c.rope_theta));
    ASSIGN_OR_RETURN(c.rope_scaling,
                     ParseRopeScaling(*params, "rope_parameters", source));
  }
  ASSIGN_OR_RETURN(c.rope_theta, f.Double("rope_theta", c.rope_theta));
  if (!(c.rope_theta > 0)) return f.Error("rope_theta", "must be positive");
  if (const nlohmann::json* rs = f.Find("rope_scaling")) {
    if (!rs->is_object()) return f.Error("rope_scaling", "must be an object or null");
    ASSIGN_OR_RETURN(c.rope_scaling, ParseRopeScaling(*rs, "rope_scaling", source));
  }
  ASSIGN_OR_RETURN(c.tie_word_embeddings, f.Bool("tie_word_embeddings", false));
  ASSIGN_OR_RETURN(c.attention_bias, f.Bool("attention_bias", d.attention_bias));
  if (c.family == ModelFamily::kQwen2) c.attention_bias = true;  // q/k/v always
  c.qk_norm = c.family == ModelFamily::kQwen3;
  ASSIGN_OR_RETURN(c.mlp_bias, f.Bool("mlp_bias", false));

  if (c.family == ModelFamily::kMistral) {
    // An explicit null means full attention (Mistral v0.2+).
    if (!root.contains("sliding_window")) {
      c.sliding_window = 4096;
    } else {
      ASSIGN_OR_RETURN(c.sliding_window, f.OptionalInt("sliding_window"));
    }
    c.use_sliding_window = c.sliding_window.has_value();
  } else if (c.family == ModelFamily::kQwen2 ||
             c.family == ModelFamily::kQwen3) {
    ASSIGN_OR_RETURN(c.use_sliding_window, f.Bool("use_sliding_window", false));
    if (!root.contains("sliding_window")) {
      c.sliding_window = 4096;
    } else {
      ASSIGN_OR_RETURN(c.sliding_window, f.OptionalInt("sliding_window"));
    }
    ASSIGN_OR_RETURN(c.max_window_layers, f.Int("max_window_layers", 28));
    if (!c.use_sliding_window) c.sliding_window = absl::nullopt;
  }
  if (c.sliding_window.has_value() && *c.sliding_window <= 0) {
    return f.Error("sliding_window", "must be positive");
  }
  if (const nlohmann::json* lt = f.Find("layer_types")) {
    if (!lt->is_array() ||
        static_cast<int64_t>(lt->size()) != c.num_hidden_layers) {
      return f.Error("layer_types", "must list one type per hidden layer");
    }
    for (const auto& t : *lt) {
      if (!t.is_string() || (t != "full_attention" && t != "sliding_attention")) {
        return f.Error("layer_types",
                       "entries must be full_attention or sliding_attention");
      }
      c.layer_types.push_back(t.get<std::string>());
    }
  }
  return c;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir) {
  const std::string path = loader_internal::JoinPath(dir, "config.json");
  ASSIGN_OR_RETURN(std::string text, loader_internal::ReadTextFile(path));
  return ParseModelConfig(text, path);
}

}  // namespace inferd
