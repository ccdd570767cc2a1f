// ConfigParser: the registry component (runtime/common/registry.h, kind
// "config_parser", keyed by config.json's model_type) that says how one
// model family's config.json is read. It is data plus an optional hook:
//   - `defaults`: a ModelConfig holding the family's transformers-config
//     defaults and fixed traits (is_encoder, qk_norm, default head_dim,
//     position_ids_after_padding, token ids, ...). ParseModelConfig starts
//     from it and overwrites every field the file sets;
//   - `read_extra`: family-specific keys and rules (Mistral's and Qwen2's
//     sliding-window keys, Qwen2's always-on q/k/v bias), run after the
//     common fields are read.
// Model code then reads ModelConfig fields only; nothing branches on the
// model_type. A new family is one ConfigParser registration (built-ins in
// config_parser.cc; plug-ins via PluginRegistrar::AddConfigParser) plus its
// model class. Registration and lookup are thread-safe.
#ifndef INFERD_RUNTIME_LOADER_CONFIG_PARSER_H_
#define INFERD_RUNTIME_LOADER_CONFIG_PARSER_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runtime/common/registry.h"
#include "runtime/loader/model_config.h"

namespace inferd {

struct ConfigParser {
  // Identifies this model_type from architectures[0] when config.json has
  // no model_type: "<prefix>Model" or "<prefix>For..." (so
  // "Qwen2MoeForCausalLM" is not taken for "Qwen2"). Empty = only an
  // explicit model_type selects this parser.
  std::string architecture_prefix;

  // The starting point of every config of this model_type. Shapes
  // (vocab_size, hidden_size, layers, heads) are always read from the file;
  // num_key_value_heads = 0 means "num_attention_heads" and head_dim = 0
  // means "hidden_size / num_attention_heads" when the file has none;
  // eos_token_ids, bos_token_id and pad_token_id are kept only when the file
  // does not mention the key. model_type and architectures are ignored.
  ModelConfig defaults;

  // position_embedding_type values the family reads besides "absolute"
  // and its default's (BERT: "alibi", JinaBERT v2's configs).
  std::vector<std::string> position_embedding_types;

  // Keys some of the family's files spell differently (nomic-bert's
  // GPT-2 style "n_embd" for "hidden_size"): older key -> the key inferd
  // reads, used when the file has the older key and not the newer one.
  std::map<std::string, std::string> key_aliases;

  // The family's older names of rope scaling types and the type each
  // means, applied before the type is checked (Phi-3: "su" and "yarn" are
  // "longrope", as transformers' Phi3Config reads them).
  std::map<std::string, std::string> rope_type_aliases;

  // Optional: reads the family's own keys from `json` (the whole
  // config.json object) into `config`, after the common fields. Errors are
  // INVALID_ARGUMENT naming `source` and the key.
  std::function<absl::Status(const nlohmann::json& json,
                             absl::string_view source, ModelConfig& config)>
      read_extra;
};

// config.json's "layer_types" (one "full_attention" / "sliding_attention"
// per hidden layer) into config.layer_types when the file has it; the
// family's parsers and the common decoder keys share it.
absl::Status ReadLayerTypes(const nlohmann::json& json,
                            absl::string_view source, ModelConfig& config);

// The config_parser kind's registry (model_type -> parser).
Registry<ConfigParser>& ConfigParsers();

// Registers the loader's built-ins: inferd's own parsers (bert, roberta,
// xlm-roberta, mpnet, nomic_bert, new, gte, modernbert, llama, gemma,
// mistral, qwen2, qwen3, smollm3, phi3, gemma2, gemma3_text). Called once at
// start-up (RegisterBuiltins, or the main of a tool that links only the
// loader); idempotent.
void RegisterLoaderBuiltins();

// Adds `parser` for `model_type` with `origin` ("builtin" or a plug-in's
// path). INVALID_ARGUMENT for an empty model_type; ALREADY_EXISTS (naming
// both origins) when the model_type has a parser.
absl::Status AddConfigParser(const std::string& model_type,
                             const std::string& description,
                             ConfigParser parser, const std::string& origin);

// The parser of `model_type`. INVALID_ARGUMENT naming it, listing the
// registered model_types and pointing at --plugin when there is none.
absl::StatusOr<ConfigParser> FindConfigParser(absl::string_view model_type);

// The model_type whose architecture_prefix matches `architecture`, or
// NOT_FOUND.
absl::StatusOr<std::string> ModelTypeForArchitecture(
    absl::string_view architecture);

// Every registered model_type, sorted.
std::vector<std::string> ConfigParserModelTypes();

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_CONFIG_PARSER_H_
