#include "runtime/model/model_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/status_macros.h"
#include "runtime/model/bert.h"
#include "runtime/model/llama.h"

namespace inferd {
namespace {

struct Registration {
  absl::string_view architecture;
  ModelFactory factory;
};

// One line per architecture.
constexpr Registration kModels[] = {
    {"BertModel", &CreateBertModel},
    {"BertForSequenceClassification", &CreateBertForSequenceClassification},
    {"XLMRobertaModel", &CreateXlmRobertaModel},
    {"XLMRobertaForSequenceClassification",
     &CreateXlmRobertaForSequenceClassification},
    {"LlamaForCausalLM", &CreateDecoderForCausalLM},
    {"MistralForCausalLM", &CreateDecoderForCausalLM},
    {"Qwen2ForCausalLM", &CreateDecoderForCausalLM},
    {"LlamaModel", &CreateDecoderModel},
    {"MistralModel", &CreateDecoderModel},
    {"Qwen2Model", &CreateDecoderModel},
};

}  // namespace

absl::StatusOr<ModelFactory> FindModelFactory(absl::string_view architecture) {
  for (const Registration& r : kModels) {
    if (r.architecture == architecture) return r.factory;
  }
  return absl::NotFoundError(absl::StrCat(
      "unsupported architecture \"", architecture,
      "\"; supported: ", absl::StrJoin(SupportedArchitectures(), ", ")));
}

std::vector<std::string> SupportedArchitectures() {
  std::vector<std::string> names;
  for (const Registration& r : kModels) names.emplace_back(r.architecture);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::unique_ptr<Model>> CreateModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options) {
  if (config.architectures.empty()) {
    return absl::InvalidArgumentError("config has no architectures");
  }
  ASSIGN_OR_RETURN(ModelFactory factory,
                   FindModelFactory(config.architectures[0]));
  return factory(config, weights, options);
}

}  // namespace inferd
