// An inferd plug-in: a config parser for a new model_type, "my_bert" — a
// BERT-style encoder family whose config.json names its LayerNorm epsilon
// "norm_epsilon" (instead of BERT's "layer_norm_eps") and leaves the
// activation and the BERT shapes it does not set to this family's defaults.
// Its models use the built-in BertModel class (architectures: ["BertModel"]);
// a family with its own modeling would also register a model class
// (PluginRegistrar::AddModelClass) and an architecture.
//
// Built with the project (target inferd_my_bert_config) and loaded with
//   inferd --plugin build/examples/plugin/libinferd_my_bert_config.so
//          --model NAME=PATH
// Without it, a model whose config.json says "model_type": "my_bert" fails
// at startup naming the model_type and --plugin. See docs/plugins.md.
#include <string>

#include "nlohmann/json.hpp"
#include "runtime/engine/plugin_api.h"

namespace {

// Every default is spelled out here: nothing is inherited from a built-in
// parser (PluginRegistrar::GetConfigParser would give one to start from).
inferd::ConfigParser MyBertParser() {
  inferd::ConfigParser p;
  // Lets a config.json without model_type but with architectures
  // ["MyBertModel"] or ["MyBertFor..."] find this parser.
  p.architecture_prefix = "MyBert";
  inferd::ModelConfig& d = p.defaults;
  d.is_encoder = true;
  d.hidden_act = "gelu";
  d.intermediate_size = 3072;
  d.max_position_embeddings = 512;
  d.pad_token_id = 0;
  d.layer_norm_eps = 1e-12;
  d.type_vocab_size = 2;
  d.position_embedding_type = "absolute";
  d.attention_bias = true;
  d.mlp_bias = true;
  d.tie_word_embeddings = true;
  // The family's own key. It runs after the common fields, so it overrides
  // "layer_norm_eps" when both are present.
  p.read_extra = [](const nlohmann::json& json, absl::string_view source,
                    inferd::ModelConfig& config) -> absl::Status {
    auto it = json.find("norm_epsilon");
    if (it == json.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_number() || !(it->get<double>() > 0.0)) {
      return absl::InvalidArgumentError(
          std::string(source) +
          ": field 'norm_epsilon' must be a positive number");
    }
    config.layer_norm_eps = it->get<double>();
    return absl::OkStatus();
  };
  return p;
}

absl::Status Register(inferd::PluginRegistrar& registrar) {
  return registrar.AddConfigParser(
      "my_bert",
      "BERT-style encoder; LayerNorm epsilon from 'norm_epsilon'",
      MyBertParser());
}

}  // namespace

INFERD_PLUGIN(Register)
