// ModelConfig: a typed view of a Hugging Face config.json for the families
// inferd serves (BERT, XLM-RoBERTa, Llama, Mistral, Qwen2, Qwen3). Absent fields
// take the defaults of the corresponding transformers config class, so a
// model behaves as it does there. Plain value type; thread-compatible.
#ifndef INFERD_RUNTIME_LOADER_MODEL_CONFIG_H_
#define INFERD_RUNTIME_LOADER_MODEL_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace inferd {

enum class ModelFamily { kBert, kXlmRoberta, kLlama, kMistral, kQwen2, kQwen3 };

// "bert", "xlm-roberta", "llama", "mistral", "qwen2", "qwen3".
absl::string_view ModelFamilyName(ModelFamily family);

// RoPE frequency scaling (rope_scaling / rope_parameters). Fields a type does
// not use keep their transformers defaults.
struct RopeScalingConfig {
  // "linear", "dynamic", "llama3", "yarn" or "longrope"; read from
  // "rope_type" or the older "type" key.
  std::string type;
  double factor = 1.0;
  // Context length the model was trained with before scaling; 0 = use
  // max_position_embeddings (transformers' fallback).
  int64_t original_max_position_embeddings = 0;
  // llama3.
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // yarn.
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  absl::optional<double> attention_factor;
  absl::optional<double> mscale;
  absl::optional<double> mscale_all_dim;
  // longrope.
  std::vector<double> short_factor;
  std::vector<double> long_factor;
};

struct ModelConfig {
  ModelFamily family = ModelFamily::kLlama;
  std::string model_type;                  // as in the file (or inferred)
  std::vector<std::string> architectures;  // non-empty

  // Shapes.
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // == num_attention_heads without GQA
  int64_t head_dim = 0;             // hidden_size / heads unless given
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;
  std::string hidden_act;  // "gelu", "silu", ...

  // Encoders (BERT, XLM-RoBERTa).
  double layer_norm_eps = 0.0;
  int64_t type_vocab_size = 0;
  std::string position_embedding_type;  // "absolute"

  // Decoders (Llama, Mistral, Qwen2).
  double rms_norm_eps = 0.0;
  double rope_theta = 0.0;
  absl::optional<RopeScalingConfig> rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v (and o for Llama) projections
  // Per-head RMSNorm of queries and keys before RoPE (Qwen3).
  bool qk_norm = false;
  // The rows of each head's q/k projections are interleaved (GGUF files of
  // llama.cpp's `llama` architecture): rotary pairs are (2i, 2i+1) instead
  // of (i, i + head_dim/2). Never set by config.json.
  bool rope_interleaved = false;
  bool mlp_bias = false;
  // Mistral: window for every layer; Qwen2: window when use_sliding_window
  // for layers >= max_window_layers. nullopt = full attention.
  absl::optional<int64_t> sliding_window;
  bool use_sliding_window = false;
  int64_t max_window_layers = 0;
  // Per-layer "full_attention" / "sliding_attention" when the file lists
  // them (newer configs); overrides the rules above.
  std::vector<std::string> layer_types;

  // Special token ids (from config.json; the tokenizer may know more).
  absl::optional<int64_t> bos_token_id;
  absl::optional<int64_t> pad_token_id;
  std::vector<int64_t> eos_token_ids;  // "eos_token_id" may be int or list

  // Classification heads.
  int64_t num_labels = 2;
  std::map<int64_t, std::string> id2label;
  std::map<std::string, int64_t> label2id;
  // "regression", "single_label_classification",
  // "multi_label_classification" or empty.
  std::string problem_type;

  std::string torch_dtype;  // "float32", "bfloat16", ... or empty
  // Explicit attention-direction hint ("is_causal"), when the file has one.
  absl::optional<bool> is_causal;

  bool IsEncoder() const {
    return family == ModelFamily::kBert || family == ModelFamily::kXlmRoberta;
  }
  bool IsDecoder() const { return !IsEncoder(); }
  // architectures[0] ends with "ForCausalLM".
  bool IsCausalLM() const;
  // architectures[0] ends with "ForSequenceClassification".
  bool IsSequenceClassification() const;
  // First absolute position id: XLM-RoBERTa numbers positions from
  // pad_token_id + 1; BERT from 0.
  int64_t position_id_offset() const;
  // Attention window for `layer`; nullopt = full causal attention.
  absl::optional<int64_t> SlidingWindowForLayer(int64_t layer) const;
};

// Parses config.json text. `source` names the file in error messages.
// INVALID_ARGUMENT naming the field for missing required fields
// (architectures, vocab_size, hidden_size, num_hidden_layers,
// num_attention_heads), wrong types, inconsistent shapes or an unsupported
// model_type.
absl::StatusOr<ModelConfig> ParseModelConfig(
    absl::string_view json, absl::string_view source = "config.json");

// Reads and parses `dir`/config.json (NOT_FOUND when absent).
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir);

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_MODEL_CONFIG_H_
