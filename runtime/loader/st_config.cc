#include "runtime/loader/st_config.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/common/status_macros.h"
#include "runtime/loader/json_util.h"

namespace inferd {
namespace {

using loader_internal::JoinPath;
using loader_internal::JsonFields;

// The class name after the last '.', e.g. "Pooling".
absl::string_view ModuleClass(absl::string_view type) {
  const size_t dot = type.rfind('.');
  return dot == absl::string_view::npos ? type : type.substr(dot + 1);
}

}  // namespace

absl::string_view PoolingModeName(PoolingMode mode) {
  switch (mode) {
    case PoolingMode::kCls: return "cls";
    case PoolingMode::kMean: return "mean";
    case PoolingMode::kMax: return "max";
    case PoolingMode::kMeanSqrtLen: return "mean_sqrt_len_tokens";
    case PoolingMode::kWeightedMean: return "weightedmean";
    case PoolingMode::kLastToken: return "lasttoken";
  }
  return "unknown";
}

absl::StatusOr<PoolingMode> ParsePoolingMode(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "cls" || n == "cls_token") return PoolingMode::kCls;
  if (n == "mean" || n == "mean_tokens") return PoolingMode::kMean;
  if (n == "max" || n == "max_tokens") return PoolingMode::kMax;
  if (n == "mean_sqrt_len_tokens") return PoolingMode::kMeanSqrtLen;
  if (n == "weightedmean" || n == "weightedmean_tokens") {
    return PoolingMode::kWeightedMean;
  }
  if (n == "lasttoken" || n == "last" || n == "last_token") {
    return PoolingMode::kLastToken;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown pooling mode '", name,
      "' (expected cls, mean, max, mean_sqrt_len_tokens, weightedmean, "
      "lasttoken)"));
}

absl::Status ParseStModules(absl::string_view json, absl::string_view source,
                            SentenceTransformersConfig& config) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(json.begin(), json.end());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, " is not valid JSON: ", e.what()));
  }
  if (!root.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, " must be a list of modules"));
  }
  config.present = true;
  config.modules.clear();
  for (const auto& m : root) {
    if (!m.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": each module must be an object"));
    }
    JsonFields f(m, source);
    StModule mod;
    ASSIGN_OR_RETURN(mod.idx, f.Int("idx", static_cast<int64_t>(config.modules.size())));
    ASSIGN_OR_RETURN(mod.name, f.String("name", ""));
    ASSIGN_OR_RETURN(mod.path, f.String("path", ""));
    ASSIGN_OR_RETURN(mod.type, f.String("type", ""));
    if (mod.type.empty()) return f.Error("type", "is required for every module");
    if (absl::StrContains(mod.path, "..") || absl::StartsWith(mod.path, "/")) {
      return f.Error("path", absl::StrCat("'", mod.path,
                                          "' leaves the model directory"));
    }
    const absl::string_view cls = ModuleClass(mod.type);
    if (cls == "Pooling") config.has_pooling = true;
    if (cls == "Normalize") config.has_normalize = true;
    if (cls == "Dense") config.has_dense = true;
    config.modules.push_back(std::move(mod));
  }
  std::stable_sort(config.modules.begin(), config.modules.end(),
                   [](const StModule& a, const StModule& b) {
                     return a.idx < b.idx;
                   });
  return absl::OkStatus();
}

absl::Status ParseStPooling(absl::string_view json, absl::string_view source,
                            SentenceTransformersConfig& config) {
  ASSIGN_OR_RETURN(nlohmann::json root,
                   loader_internal::ParseJsonObject(json, source));
  JsonFields f(root, source);
  struct Flag {
    absl::string_view key;
    PoolingMode mode;
  };
  static constexpr Flag kFlags[] = {
      {"pooling_mode_cls_token", PoolingMode::kCls},
      {"pooling_mode_mean_tokens", PoolingMode::kMean},
      {"pooling_mode_max_tokens", PoolingMode::kMax},
      {"pooling_mode_mean_sqrt_len_tokens", PoolingMode::kMeanSqrtLen},
      {"pooling_mode_weightedmean_tokens", PoolingMode::kWeightedMean},
      {"pooling_mode_lasttoken", PoolingMode::kLastToken},
  };
  std::vector<std::string> set;
  absl::optional<PoolingMode> mode;
  for (const Flag& flag : kFlags) {
    ASSIGN_OR_RETURN(bool on, f.Bool(flag.key, false));
    if (on) {
      set.emplace_back(flag.key);
      mode = flag.mode;
    }
  }
  if (set.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": several pooling modes are enabled (",
        absl::StrJoin(set, ", "),
        "); inferd supports exactly one"));
  }
  if (!mode.has_value() && f.Has("pooling_mode")) {
    ASSIGN_OR_RETURN(std::string name, f.String("pooling_mode", ""));
    auto parsed = ParsePoolingMode(name);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": ", parsed.status().message()));
    }
    mode = *parsed;
  }
  if (!mode.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no pooling mode is enabled"));
  }
  config.pooling = *mode;
  ASSIGN_OR_RETURN(config.include_prompt, f.Bool("include_prompt", true));
  ASSIGN_OR_RETURN(config.word_embedding_dimension,
                   f.Int("word_embedding_dimension", 0));
  return absl::OkStatus();
}

absl::Status ParseStPrompts(absl::string_view json, absl::string_view source,
                            SentenceTransformersConfig& config) {
  ASSIGN_OR_RETURN(nlohmann::json root,
                   loader_internal::ParseJsonObject(json, source));
  JsonFields f(root, source);
  if (const nlohmann::json* prompts = f.Find("prompts")) {
    if (!prompts->is_object()) return f.Error("prompts", "must be an object");
    for (auto it = prompts->begin(); it != prompts->end(); ++it) {
      if (!it.value().is_string()) {
        return f.Error("prompts", absl::StrCat("entry '", it.key(),
                                               "' must be a string"));
      }
      config.prompts[it.key()] = it.value().get<std::string>();
    }
  }
  ASSIGN_OR_RETURN(config.default_prompt_name,
                   f.String("default_prompt_name", ""));
  if (!config.default_prompt_name.empty() &&
      !config.prompts.count(config.default_prompt_name)) {
    return f.Error("default_prompt_name",
                   absl::StrCat("names '", config.default_prompt_name,
                                "', which is not in prompts"));
  }
  ASSIGN_OR_RETURN(config.similarity_fn_name,
                   f.String("similarity_fn_name", ""));
  return absl::OkStatus();
}

absl::Status ParseStBertConfig(absl::string_view json, absl::string_view source,
                               SentenceTransformersConfig& config) {
  ASSIGN_OR_RETURN(nlohmann::json root,
                   loader_internal::ParseJsonObject(json, source));
  JsonFields f(root, source);
  ASSIGN_OR_RETURN(config.max_seq_length, f.OptionalInt("max_seq_length"));
  if (config.max_seq_length.has_value() && *config.max_seq_length <= 0) {
    return f.Error("max_seq_length", "must be positive");
  }
  ASSIGN_OR_RETURN(config.do_lower_case, f.Bool("do_lower_case", false));
  return absl::OkStatus();
}

absl::StatusOr<SentenceTransformersConfig> LoadSentenceTransformersConfig(
    const std::string& dir) {
  SentenceTransformersConfig config;
  const std::string modules_path = JoinPath(dir, "modules.json");
  if (!loader_internal::IsRegularFile(modules_path)) return config;
  ASSIGN_OR_RETURN(std::string text, loader_internal::ReadTextFile(modules_path));
  RETURN_IF_ERROR(ParseStModules(text, modules_path, config));

  for (const StModule& mod : config.modules) {
    const absl::string_view cls = ModuleClass(mod.type);
    const std::string mod_dir = JoinPath(dir, mod.path);
    const std::string mod_config = JoinPath(mod_dir, "config.json");
    if (cls == "Pooling") {
      if (!loader_internal::IsRegularFile(mod_config)) {
        return absl::InvalidArgumentError(absl::StrCat(
            modules_path, " lists a Pooling module, but ", mod_config,
            " is missing"));
      }
      ASSIGN_OR_RETURN(std::string pooling, loader_internal::ReadTextFile(mod_config));
      RETURN_IF_ERROR(ParseStPooling(pooling, mod_config, config));
    } else if (cls == "Dense") {
      ASSIGN_OR_RETURN(std::string dense_text,
                       loader_internal::ReadTextFile(mod_config));
      ASSIGN_OR_RETURN(nlohmann::json root,
                       loader_internal::ParseJsonObject(dense_text, mod_config));
      JsonFields f(root, mod_config);
      StDenseConfig dense;
      dense.path = mod.path;
      ASSIGN_OR_RETURN(dense.in_features, f.RequiredInt("in_features"));
      ASSIGN_OR_RETURN(dense.out_features, f.RequiredInt("out_features"));
      ASSIGN_OR_RETURN(dense.bias, f.Bool("bias", true));
      ASSIGN_OR_RETURN(dense.activation_function,
                       f.String("activation_function",
                                "torch.nn.modules.activation.Tanh"));
      config.dense.push_back(std::move(dense));
    }
  }

  const std::string prompts_path =
      JoinPath(dir, "config_sentence_transformers.json");
  if (loader_internal::IsRegularFile(prompts_path)) {
    ASSIGN_OR_RETURN(std::string t, loader_internal::ReadTextFile(prompts_path));
    RETURN_IF_ERROR(ParseStPrompts(t, prompts_path, config));
  }
  const std::string sbert_path = JoinPath(dir, "sentence_bert_config.json");
  if (loader_internal::IsRegularFile(sbert_path)) {
    ASSIGN_OR_RETURN(std::string t, loader_internal::ReadTextFile(sbert_path));
    RETURN_IF_ERROR(ParseStBertConfig(t, sbert_path, config));
  }
  return config;
}

}  // namespace inferd
