#include "runtime/model/encoder_common.h"

#include "absl/strings/str_cat.h"

namespace inferd {

absl::Status CheckEncoderConfig(const ModelConfig& config) {
  if (config.IsEncoder()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      config.architectures[0], " needs an encoder config; model_type ",
      config.model_type, " is parsed as a decoder"));
}

ModelInfo EncoderInfo(const ModelConfig& config) {
  ModelInfo info;
  info.architecture = config.architectures[0];
  info.is_encoder = true;
  info.causal = false;
  info.hidden_size = config.hidden_size;
  info.vocab_size = config.vocab_size;
  info.max_positions =
      config.max_position_embeddings - config.position_id_offset();
  info.type_vocab_size = config.type_vocab_size;
  info.position_offset = config.position_id_offset();
  info.num_layers = config.num_hidden_layers;
  info.num_heads = config.num_attention_heads;
  info.num_kv_heads = config.num_key_value_heads;
  info.head_dim = config.head_dim;
  info.intermediate_size = config.intermediate_size;
  return info;
}

void ConfigureEncoderLoader(const ModelLoadOptions& options,
                            WeightLoader& loader) {
  loader.set_pack_linear_budget(int64_t{1} << 30);
  loader.set_int8_panels(options.activations == ActivationPrecision::kInt8);
}

}  // namespace inferd
