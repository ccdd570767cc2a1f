// An inferd plug-in: a config parser for a new model_type, "my_bert" — a
// BERT-style encoder family whose config.json names its LayerNorm epsilon
// "norm_epsilon" (instead of BERT's "layer_norm_eps") and leaves the
// activation and the BERT shapes it does not set to BERT's defaults.
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

// The family's norm key. It runs after the common fields, so it overrides
// "layer_norm_eps" when both are present.
absl::Status ReadNormEpsilon(const nlohmann::json& json,
                             absl::string_view source,
                             inferd::ModelConfig& config) {
  auto it = json.find("norm_epsilon");
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number() || !(it->get<double>() > 0.0)) {
    return absl::InvalidArgumentError(
        std::string(source) + ": field 'norm_epsilon' must be a positive number");
  }
  config.layer_norm_eps = it->get<double>();
  return absl::OkStatus();
}

absl::Status Register(inferd::PluginRegistrar& registrar) {
  // Starts from the built-in BERT parser: its defaults (encoder, gelu,
  // absolute positions, biases, tied embeddings, eps 1e-12, ...) are this
  // family's too; only the architecture prefix and the extra key differ.
  absl::StatusOr<inferd::ConfigParser> bert = registrar.GetConfigParser("bert");
  if (!bert.ok()) return bert.status();
  inferd::ConfigParser parser = *std::move(bert);
  // Lets a config.json without model_type but with architectures
  // ["MyBertModel"] or ["MyBertFor..."] find this parser.
  parser.architecture_prefix = "MyBert";
  parser.read_extra = &ReadNormEpsilon;
  return registrar.AddConfigParser(
      "my_bert", "BERT-style encoder; LayerNorm epsilon from 'norm_epsilon'",
      std::move(parser));
}

}  // namespace

INFERD_PLUGIN(Register)
