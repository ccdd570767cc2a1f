// SentenceTransformersConfig: the sentence-transformers files of an embedding
// model directory (modules.json, <n>_Pooling/config.json,
// config_sentence_transformers.json, sentence_bert_config.json,
// <n>_Dense/config.json). Plain value type; thread-compatible.
#ifndef INFERD_RUNTIME_LOADER_ST_CONFIG_H_
#define INFERD_RUNTIME_LOADER_ST_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace inferd {

enum class PoolingMode { kCls, kMean, kMax, kMeanSqrtLen, kWeightedMean, kLastToken };

// "cls", "mean", "max", "mean_sqrt_len_tokens", "weightedmean", "lasttoken".
absl::string_view PoolingModeName(PoolingMode mode);
// Accepts the names above (and "last", "mean_tokens", "cls_token").
absl::StatusOr<PoolingMode> ParsePoolingMode(absl::string_view name);

struct StModule {
  int64_t idx = 0;
  std::string name;
  std::string path;  // relative to the model directory; "" for the root
  std::string type;  // e.g. "sentence_transformers.models.Pooling"
};

// A Dense projection module (weights in `<path>/model.safetensors`).
struct StDenseConfig {
  std::string path;  // relative to the model directory
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = true;
  // e.g. "torch.nn.modules.linear.Identity", "torch.nn.modules.activation.Tanh"
  std::string activation_function;
};

struct SentenceTransformersConfig {
  // False when the directory has no modules.json: not a sentence-transformers
  // model; the other fields keep their defaults.
  bool present = false;
  std::vector<StModule> modules;
  bool has_pooling = false;
  bool has_normalize = false;
  bool has_dense = false;

  PoolingMode pooling = PoolingMode::kCls;
  // Whether prompt tokens take part in pooling (sentence-transformers'
  // include_prompt; false for e.g. INSTRUCTOR-style models).
  bool include_prompt = true;
  int64_t word_embedding_dimension = 0;  // 0 = not stated

  std::vector<StDenseConfig> dense;

  // config_sentence_transformers.json.
  std::map<std::string, std::string> prompts;
  std::string default_prompt_name;  // "" = none
  std::string similarity_fn_name;   // "cosine", "dot", ... or ""

  // sentence_bert_config.json.
  absl::optional<int64_t> max_seq_length;
  bool do_lower_case = false;
};

// Reads whatever sentence-transformers files exist under `dir`. A directory
// without modules.json yields present=false. INVALID_ARGUMENT naming the
// file for malformed content (including several pooling modes at once,
// which inferd does not support).
absl::StatusOr<SentenceTransformersConfig> LoadSentenceTransformersConfig(
    const std::string& dir);

// The parsers behind it, one per file (`source` names it in errors).
absl::Status ParseStModules(absl::string_view json, absl::string_view source,
                            SentenceTransformersConfig& config);
absl::Status ParseStPooling(absl::string_view json, absl::string_view source,
                            SentenceTransformersConfig& config);
absl::Status ParseStPrompts(absl::string_view json, absl::string_view source,
                            SentenceTransformersConfig& config);
absl::Status ParseStBertConfig(absl::string_view json, absl::string_view source,
                               SentenceTransformersConfig& config);

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_ST_CONFIG_H_
