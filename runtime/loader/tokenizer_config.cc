#include "runtime/loader/tokenizer_config.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/status_macros.h"
#include "runtime/loader/json_util.h"

namespace inferd {
namespace {

using loader_internal::JsonFields;

// transformers writes model_max_length = int(1e30) to mean "no limit";
// anything this large is no real context length.
constexpr double kUnlimitedLength = 1e15;

absl::StatusOr<absl::optional<std::string>> TokenContent(
    const JsonFields& f, absl::string_view key) {
  const nlohmann::json* v = f.Find(key);
  if (v == nullptr) return absl::optional<std::string>();
  if (v->is_string()) return absl::optional<std::string>(v->get<std::string>());
  if (v->is_object()) {
    auto content = v->find("content");
    if (content != v->end() && content->is_string()) {
      return absl::optional<std::string>(content->get<std::string>());
    }
  }
  return f.Error(key, "must be a string or an object with a string \"content\"");
}

}  // namespace

absl::StatusOr<TokenizerConfig> ParseTokenizerConfig(absl::string_view json,
                                                     absl::string_view source) {
  ASSIGN_OR_RETURN(nlohmann::json root,
                   loader_internal::ParseJsonObject(json, source));
  JsonFields f(root, source);
  TokenizerConfig c;
  c.present = true;
  ASSIGN_OR_RETURN(c.tokenizer_class, f.String("tokenizer_class", ""));
  ASSIGN_OR_RETURN(c.bos_token, TokenContent(f, "bos_token"));
  ASSIGN_OR_RETURN(c.eos_token, TokenContent(f, "eos_token"));
  ASSIGN_OR_RETURN(c.pad_token, TokenContent(f, "pad_token"));
  ASSIGN_OR_RETURN(c.unk_token, TokenContent(f, "unk_token"));
  ASSIGN_OR_RETURN(c.sep_token, TokenContent(f, "sep_token"));
  ASSIGN_OR_RETURN(c.cls_token, TokenContent(f, "cls_token"));
  ASSIGN_OR_RETURN(c.mask_token, TokenContent(f, "mask_token"));
  ASSIGN_OR_RETURN(c.add_bos_token, f.OptionalBool("add_bos_token"));
  ASSIGN_OR_RETURN(c.add_eos_token, f.OptionalBool("add_eos_token"));

  if (const nlohmann::json* v = f.Find("model_max_length")) {
    if (!v->is_number()) return f.Error("model_max_length", "must be a number");
    const double d = v->get<double>();
    if (d <= 0) return f.Error("model_max_length", "must be positive");
    if (d < kUnlimitedLength) {
      absl::optional<int64_t> i = loader_internal::AsInt(*v);
      if (!i.has_value()) return f.Error("model_max_length", "must be an integer");
      c.model_max_length = *i;
    }
  }

  if (const nlohmann::json* v = f.Find("chat_template")) {
    if (v->is_string()) {
      c.chat_template = v->get<std::string>();
    } else if (v->is_array()) {
      for (const auto& t : *v) {
        if (!t.is_object() || !t.contains("name") || !t["name"].is_string() ||
            !t.contains("template") || !t["template"].is_string()) {
          return f.Error("chat_template",
                         "list entries must be {\"name\": ..., \"template\": ...}");
        }
        c.named_chat_templates[t["name"].get<std::string>()] =
            t["template"].get<std::string>();
      }
      auto def = c.named_chat_templates.find("default");
      if (def != c.named_chat_templates.end()) c.chat_template = def->second;
    } else {
      return f.Error("chat_template", "must be a string or a list of templates");
    }
  }

  ASSIGN_OR_RETURN(c.padding_side, f.String("padding_side", "right"));
  ASSIGN_OR_RETURN(c.truncation_side, f.String("truncation_side", "right"));
  for (auto [key, value] : {std::make_pair("padding_side", &c.padding_side),
                            std::make_pair("truncation_side", &c.truncation_side)}) {
    if (*value != "left" && *value != "right") {
      return f.Error(key, "must be \"left\" or \"right\"");
    }
  }
  ASSIGN_OR_RETURN(c.do_lower_case, f.Bool("do_lower_case", false));
  ASSIGN_OR_RETURN(c.clean_up_tokenization_spaces,
                   f.OptionalBool("clean_up_tokenization_spaces"));
  return c;
}

absl::StatusOr<TokenizerConfig> LoadTokenizerConfig(const std::string& dir) {
  TokenizerConfig c;
  const std::string path = loader_internal::JoinPath(dir, "tokenizer_config.json");
  if (loader_internal::IsRegularFile(path)) {
    ASSIGN_OR_RETURN(std::string text, loader_internal::ReadTextFile(path));
    ASSIGN_OR_RETURN(c, ParseTokenizerConfig(text, path));
  }
  const std::string jinja = loader_internal::JoinPath(dir, "chat_template.jinja");
  if (c.chat_template.empty() && loader_internal::IsRegularFile(jinja)) {
    ASSIGN_OR_RETURN(c.chat_template, loader_internal::ReadTextFile(jinja));
  }
  return c;
}

}  // namespace inferd
