// TokenizerConfig: the parts of a Hugging Face tokenizer_config.json that
// drive inference (special tokens, BOS/EOS insertion, length limit, chat
// template, padding/truncation sides). Plain value type; thread-compatible.
#ifndef INFERD_RUNTIME_LOADER_TOKENIZER_CONFIG_H_
#define INFERD_RUNTIME_LOADER_TOKENIZER_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace inferd {

struct TokenizerConfig {
  // False when the directory has no tokenizer_config.json.
  bool present = false;
  std::string tokenizer_class;

  // Special tokens by content; given either as strings or as AddedToken
  // objects {"content": ...}. nullopt when absent or null.
  absl::optional<std::string> bos_token;
  absl::optional<std::string> eos_token;
  absl::optional<std::string> pad_token;
  absl::optional<std::string> unk_token;
  absl::optional<std::string> sep_token;
  absl::optional<std::string> cls_token;
  absl::optional<std::string> mask_token;

  // Llama-style tokenizers: whether encoding adds BOS/EOS. nullopt = the
  // tokenizer.json post-processor decides.
  absl::optional<bool> add_bos_token;
  absl::optional<bool> add_eos_token;

  // nullopt when absent or set to transformers' "unlimited" sentinel
  // (VERY_LARGE_INTEGER, 1e30).
  absl::optional<int64_t> model_max_length;

  // Jinja source of the default chat template ("" = none), and any named
  // templates (e.g. "tool_use") when the file holds a list of them. Also
  // read from chat_template.jinja beside the file by LoadTokenizerConfig.
  std::string chat_template;
  std::map<std::string, std::string> named_chat_templates;

  std::string padding_side = "right";
  std::string truncation_side = "right";
  bool do_lower_case = false;
  absl::optional<bool> clean_up_tokenization_spaces;
};

// Parses tokenizer_config.json text; `source` names it in errors.
absl::StatusOr<TokenizerConfig> ParseTokenizerConfig(
    absl::string_view json, absl::string_view source = "tokenizer_config.json");

// Reads `dir`/tokenizer_config.json (present=false when absent) and
// `dir`/chat_template.jinja when the config has no template.
absl::StatusOr<TokenizerConfig> LoadTokenizerConfig(const std::string& dir);

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_TOKENIZER_CONFIG_H_
