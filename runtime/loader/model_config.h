// ModelConfig: a typed view of a Hugging Face config.json. How a file is
// read is decided by its model_type's ConfigParser (config_parser.h), a
// registry component: absent fields take the defaults of the corresponding
// transformers config class, so a model behaves as it does there, and
// family rules (sliding windows, forced biases, q/k norms) are resolved into
// plain fields here. Model code reads these fields, never the model_type.
// Plain value type; thread-compatible.
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
  // As in the file, or inferred from architectures[0]; names the
  // ConfigParser that read it (a descriptive label nothing branches on).
  std::string model_type;
  std::vector<std::string> architectures;  // non-empty
  // Bidirectional encoder (BERT-style: LayerNorm, absolute positions,
  // token types) rather than a RoPE decoder. Set by the ConfigParser.
  bool is_encoder = false;

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
  // Absolute position ids start at pad_token_id + 1 (RoBERTa's padding_idx
  // convention) instead of 0.
  bool position_ids_after_padding = false;
  // MPNet: a bias on attention scores by relative position, shared by every
  // layer: relative distances in `relative_attention_buckets` log-spaced
  // buckets (half per direction, exact below a quarter of them, the last
  // from `relative_attention_max_distance`), each bucket a learned value per
  // head. 0 = none.
  int64_t relative_attention_buckets = 0;
  int64_t relative_attention_max_distance = 0;

  // Decoders (Llama, Mistral, Qwen2, Qwen3, SmolLM3).
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
  // Gemma 2 / 3. Embeddings are multiplied by this (sqrt(hidden_size)).
  double embedding_multiplier = 1.0;
  // RMSNorm scales by (offset + weight) (Gemma: 1).
  double rms_norm_weight_offset = 0.0;
  // Blocks with four norms: input, post-attention (on the attention
  // output, before the residual add), pre-feedforward (the MLP input) and
  // post-feedforward (on the MLP output). Without: input and
  // post_attention_layernorm (the MLP input), Llama's layout.
  bool sandwich_norms = false;
  // Attention scores scaled by 1/sqrt(query_pre_attn_scalar); 0 =
  // 1/sqrt(head_dim).
  double query_pre_attn_scalar = 0.0;
  // cap * tanh(x / cap) of attention scores / final logits; 0 = none.
  double attn_logit_softcapping = 0.0;
  double final_logit_softcapping = 0.0;
  // RoPE theta of "sliding_attention" layers (Gemma 3's local base, no
  // rope_scaling); 0 = rope_theta everywhere.
  double rope_local_theta = 0.0;
  // Fraction of each head's dimensions RoPE rotates (the first
  // head_dim * partial_rotary_factor; Phi-4-mini: 0.75).
  double partial_rotary_factor = 1.0;
  // Per-dimension divisors of the RoPE inverse frequencies (head_dim / 2
  // values), applied after rope_scaling: a GGUF file's rope_freqs tensor
  // (llama.cpp's converter writes Llama 3.1-style scaling so), or GTE's
  // fixed NTK scaling (its ConfigParser).
  std::vector<double> rope_freq_factors;
  bool mlp_bias = false;
  // The attention window of layers >= max_window_layers (Mistral: every
  // layer; Qwen2/Qwen3: only when use_sliding_window). nullopt = full
  // attention everywhere. The ConfigParser resolves the family's rule into
  // these three fields. A decoder's window is the last `sliding_window`
  // positions; a bidirectional encoder's (ModernBERT's local layers) the
  // keys with |i - j| < sliding_window.
  absl::optional<int64_t> sliding_window;
  bool use_sliding_window = false;
  int64_t max_window_layers = 0;
  // Per-layer "full_attention" / "sliding_attention" when the file lists
  // them (newer configs); overrides the rules above.
  std::vector<std::string> layer_types;
  // Per layer: whether RoPE rotates its queries and keys (SmolLM3's
  // no_rope_layers, where 0 marks a layer without positions). Empty = every
  // layer.
  std::vector<bool> layer_uses_rope;

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

  bool IsEncoder() const { return is_encoder; }
  bool IsDecoder() const { return !is_encoder; }
  // architectures[0] ends with "ForCausalLM".
  bool IsCausalLM() const;
  // architectures[0] ends with "ForSequenceClassification".
  bool IsSequenceClassification() const;
  // First absolute position id: pad_token_id + 1 when
  // position_ids_after_padding (XLM-RoBERTa, RoBERTa), else 0.
  int64_t position_id_offset() const;
  // Attention window for `layer`; nullopt = full causal attention.
  absl::optional<int64_t> SlidingWindowForLayer(int64_t layer) const;
  // Whether `layer` applies RoPE (layer_uses_rope; true when empty).
  bool LayerUsesRope(int64_t layer) const;
  // Whether `layer` rotates with rope_local_theta (set, and layer_types
  // marks the layer "sliding_attention").
  bool LayerUsesLocalRope(int64_t layer) const;
};

// Parses config.json text with the ConfigParser registered for its
// model_type (or, without one, the parser whose architecture prefix matches
// architectures[0]). `source` names the file in error messages.
// INVALID_ARGUMENT naming the field for missing required fields
// (architectures, vocab_size, hidden_size, num_hidden_layers,
// num_attention_heads), wrong types or inconsistent shapes; for an
// unregistered model_type, naming it, listing the registered ones and
// pointing at --plugin.
absl::StatusOr<ModelConfig> ParseModelConfig(
    absl::string_view json, absl::string_view source = "config.json");

// Reads and parses `dir`/config.json (NOT_FOUND when absent).
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir);

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_MODEL_CONFIG_H_
