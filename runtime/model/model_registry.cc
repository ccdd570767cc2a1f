#include "runtime/model/model_registry.h"

#include <algorithm>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/registry.h"
#include "runtime/common/status_macros.h"
#include "runtime/loader/config_parser.h"
#include "runtime/model/attention_backend.h"
#include "runtime/model/bert.h"
#include "runtime/model/cpu_model_runner.h"
#include "runtime/model/llama.h"
#include "runtime/model/modernbert.h"
#include "runtime/model/rotary_encoder.h"

namespace inferd {
namespace {

struct Builtin {
  const char* architecture;
  ModelFactory factory;
  const char* description;
};

void RegisterModelClasses() {
  const Builtin kModels[] = {
      {"BertModel", &CreateBertModel, "BERT encoder"},
      {"BertForSequenceClassification", &CreateBertForSequenceClassification,
       "BERT encoder + pooler + classification head"},
      {"XLMRobertaModel", &CreateBertModel, "XLM-RoBERTa encoder"},
      {"XLMRobertaForSequenceClassification",
       &CreateXlmRobertaForSequenceClassification,
       "XLM-RoBERTa encoder + classification head"},
      {"RobertaModel", &CreateBertModel,
       "RoBERTa encoder (XLM-RoBERTa's modeling)"},
      {"RobertaForSequenceClassification",
       &CreateXlmRobertaForSequenceClassification,
       "RoBERTa encoder + classification head"},
      {"JinaBertModel", &CreateJinaBertModel,
       "JinaBERT v2 encoder (ALiBi, GEGLU; jina-embeddings-v2)"},
      {"JinaBertForMaskedLM", &CreateJinaBertModel,
       "JinaBERT v2 encoder (its masked-LM head unused)"},
      {"MPNetModel", &CreateMpnetModel,
       "MPNet encoder (relative-position attention bias)"},
      {"MPNetForMaskedLM", &CreateMpnetModel,
       "MPNet encoder (the masked-LM head unused: sentence-transformers' "
       "all-mpnet-base-v2 names it)"},
      {"NomicBertModel", &CreateRotaryEncoderModel,
       "NomicBERT encoder (rotary positions, SwiGLU; nomic-embed-text)"},
      {"NewModel", &CreateRotaryEncoderModel,
       "GTE \"new\" encoder (rotary positions, gated GELU; "
       "gte-base-en-v1.5, gte-multilingual-base)"},
      {"GteModel", &CreateRotaryEncoderModel,
       "GTE encoder in transformers' layout"},
      {"ModernBertModel", &CreateModernBertModel,
       "ModernBERT encoder (pre-norm, local/global attention)"},
      {"ModernBertForMaskedLM", &CreateModernBertModel,
       "ModernBERT encoder (its masked-LM head unused)"},
      {"LlamaForCausalLM", &CreateDecoderForCausalLM,
       "Llama decoder + LM head"},
      {"GemmaForCausalLM", &CreateDecoderForCausalLM,
       "Gemma 1 decoder ((1 + w) norms, scaled embeddings) + LM head"},
      {"MistralForCausalLM", &CreateDecoderForCausalLM,
       "Mistral decoder (sliding window) + LM head"},
      {"Qwen2ForCausalLM", &CreateDecoderForCausalLM,
       "Qwen2 decoder (q/k/v bias) + LM head"},
      {"Qwen3ForCausalLM", &CreateDecoderForCausalLM,
       "Qwen3 decoder (per-head q/k RMSNorm) + LM head"},
      {"SmolLM3ForCausalLM", &CreateDecoderForCausalLM,
       "SmolLM3 decoder (no RoPE on some layers) + LM head"},
      {"Phi3ForCausalLM", &CreateDecoderForCausalLM,
       "Phi-3 / Phi-4-mini decoder (fused projections, partial rotary, "
       "longrope) + LM head"},
      {"Gemma2ForCausalLM", &CreateDecoderForCausalLM,
       "Gemma 2 decoder (soft caps, sandwich norms) + LM head"},
      {"Gemma3ForCausalLM", &CreateDecoderForCausalLM,
       "Gemma 3 text decoder (q/k norms, local/global RoPE) + LM head"},
      {"LlamaModel", &CreateDecoderModel, "Llama decoder, no head"},
      {"Gemma3TextModel", &CreateDecoderModel,
       "Gemma 3 text decoder, no head (EmbeddingGemma: bidirectional)"},
      {"Qwen3Model", &CreateDecoderModel,
       "Qwen3 decoder, no head (Qwen3-Embedding style)"},
      {"MistralModel", &CreateDecoderModel, "Mistral decoder, no head"},
      {"Qwen2Model", &CreateDecoderModel, "Qwen2 decoder, no head"},
  };
  for (const Builtin& b : kModels) {
    absl::Status s =
        ModelClasses().Add(b.architecture, b.description, b.factory);
    (void)s;  // RegisterModelBuiltins' call_once: registered once
  }
}

}  // namespace

Registry<ModelFactory>& ModelClasses() {
  static auto* const registry = new Registry<ModelFactory>(
      "model", "a model class (named like the architecture it builds)");
  return *registry;
}

void RegisterModelBuiltins() {
  RegisterDeviceBuiltins();
  RegisterLoaderBuiltins();
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterModelClasses();
    RegisterBuiltinAttentionBackends();
    // One line per device kind's runner, each defined in its own file.
    RegisterCpuModelRunner();
  });
}

absl::StatusOr<ModelFactory> FindModelFactory(absl::string_view architecture) {
  const ModelFactory* factory = ModelClasses().Find(architecture);
  if (factory == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "unsupported architecture \"", architecture,
        "\"; supported: ", absl::StrJoin(SupportedArchitectures(), ", ")));
  }
  return *factory;
}

std::vector<std::string> SupportedArchitectures() {
  return ModelClasses().Names();
}

absl::StatusOr<std::unique_ptr<Model>> CreateModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options, const std::string& model_class) {
  if (config.architectures.empty()) {
    return absl::InvalidArgumentError("config has no architectures");
  }
  ASSIGN_OR_RETURN(ModelFactory factory,
                   FindModelFactory(model_class.empty() ? config.architectures[0]
                                                        : model_class));
  return factory(config, weights, options);
}

}  // namespace inferd
