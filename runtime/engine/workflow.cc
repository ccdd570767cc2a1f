#include "runtime/engine/workflow.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace inferd {
namespace {

// How an architecture is served by default. Adding a model family is one
// model file in runtime/model plus one line here.
enum class Family { kEncoder, kEncoderHead, kDecoderLm, kDecoderBase };

struct ArchitectureEntry {
  const char* architecture;
  Family family;
};

constexpr ArchitectureEntry kArchitectures[] = {
    {"BertModel", Family::kEncoder},
    {"XLMRobertaModel", Family::kEncoder},
    {"BertForSequenceClassification", Family::kEncoderHead},
    {"XLMRobertaForSequenceClassification", Family::kEncoderHead},
    {"LlamaForCausalLM", Family::kDecoderLm},
    {"MistralForCausalLM", Family::kDecoderLm},
    {"Qwen2ForCausalLM", Family::kDecoderLm},
    {"LlamaModel", Family::kDecoderBase},
    {"MistralModel", Family::kDecoderBase},
    {"Qwen2Model", Family::kDecoderBase},
};

Workflow Make(WorkflowKind kind, const std::string& arch, bool bidirectional) {
  Workflow w;
  w.kind = kind;
  w.model_class = arch;
  w.bidirectional = bidirectional;
  switch (kind) {
    case WorkflowKind::kCausalGenerate:
      w.name = "causal_generate";
      w.tasks = {Task::kGenerate};
      w.input_processor = "prompt_tokenizer";
      w.scheduler = "continuous_batching";
      w.attention_backend = "causal_paged";
      w.output_processor = "sample_detokenize";
      break;
    case WorkflowKind::kEncoderEmbed:
      w.name = "encoder_embed";
      w.tasks = {Task::kEmbed};
      w.input_processor = "embed_tokenizer";
      w.scheduler = "prefill_only";
      w.attention_backend = "bidirectional_prefill";
      w.output_processor = "pooling";
      break;
    case WorkflowKind::kDecoderEmbed:
      w.name = "decoder_embed";
      w.tasks = {Task::kEmbed};
      w.input_processor = "embed_tokenizer_eos";
      w.scheduler = "prefill_only";
      w.attention_backend =
          bidirectional ? "bidirectional_prefill" : "causal_prefill";
      w.output_processor = "pooling";
      break;
    case WorkflowKind::kEncoderClassify:
      w.name = "encoder_classify";
      w.tasks = {Task::kClassify};
      w.input_processor = "classify_tokenizer";
      w.scheduler = "prefill_only";
      w.attention_backend = "bidirectional_prefill";
      w.output_processor = "label_scores";
      break;
    case WorkflowKind::kCrossEncoderRerank:
      w.name = "cross_encoder_rerank";
      w.tasks = {Task::kRerank, Task::kClassify};
      w.input_processor = "pair_tokenizer";
      w.scheduler = "prefill_only";
      w.attention_backend = "bidirectional_prefill";
      w.output_processor = "relevance_scores";
      break;
  }
  return w;
}

absl::Status Unsupported(const std::string& arch, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("architecture ", arch, ": ", why));
}

}  // namespace

absl::string_view TaskName(Task task) {
  switch (task) {
    case Task::kGenerate: return "generate";
    case Task::kEmbed: return "embed";
    case Task::kRerank: return "rerank";
    case Task::kClassify: return "classify";
  }
  return "unknown";
}

bool Workflow::Supports(Task task) const {
  return std::find(tasks.begin(), tasks.end(), task) != tasks.end();
}

std::vector<std::string> WorkflowArchitectures() {
  std::vector<std::string> out;
  for (const ArchitectureEntry& e : kArchitectures) out.push_back(e.architecture);
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<Workflow> SelectWorkflow(const ModelConfig& config,
                                        const SentenceTransformersConfig& st,
                                        const ModelOverrides& overrides) {
  if (config.architectures.empty()) {
    return absl::InvalidArgumentError(
        "config.json has no architectures; supported: " +
        absl::StrJoin(WorkflowArchitectures(), ", "));
  }
  const std::string& arch = config.architectures[0];
  const ArchitectureEntry* entry = nullptr;
  for (const ArchitectureEntry& e : kArchitectures) {
    if (arch == e.architecture) entry = &e;
  }
  if (entry == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported architecture '", arch, "' in config.json; supported: ",
        absl::StrJoin(WorkflowArchitectures(), ", ")));
  }
  const std::string task = overrides.task.value_or("");
  bool bidirectional = overrides.bidirectional.value_or(
      config.is_causal.has_value() ? !*config.is_causal : false);

  switch (entry->family) {
    case Family::kEncoder:
      if (!task.empty() && task != "embed") {
        return Unsupported(arch, absl::StrCat("task=", task,
                                              " needs a model head; this "
                                              "encoder only embeds"));
      }
      if (overrides.bidirectional.has_value() && !*overrides.bidirectional) {
        return Unsupported(arch, "encoders are always bidirectional");
      }
      return Make(WorkflowKind::kEncoderEmbed, arch, true);
    case Family::kEncoderHead: {
      if (task == "generate") {
        return Unsupported(arch, "task=generate needs a causal LM");
      }
      const bool single_logit = config.num_labels == 1;
      if (task == "rerank" && !single_logit) {
        return Unsupported(arch, absl::StrCat("task=rerank needs a 1-label "
                                              "cross-encoder; this head has ",
                                              config.num_labels, " labels"));
      }
      if (task == "embed") {
        return Make(WorkflowKind::kEncoderEmbed, arch, true);
      }
      if (task == "classify" || !single_logit) {
        return Make(WorkflowKind::kEncoderClassify, arch, true);
      }
      return Make(WorkflowKind::kCrossEncoderRerank, arch, true);
    }
    case Family::kDecoderLm:
      // A causal LM that ships sentence-transformers pooling is an embedder
      // (gte-Qwen2 style) unless told otherwise.
      if (task == "embed" || (task.empty() && st.present && st.has_pooling)) {
        return Make(WorkflowKind::kDecoderEmbed, arch, bidirectional);
      }
      if (!task.empty() && task != "generate") {
        return Unsupported(arch, absl::StrCat("task=", task,
                                              " is not available for a "
                                              "causal LM"));
      }
      if (bidirectional) {
        return Unsupported(arch, "generation needs causal attention; "
                                 "bidirectional=true only applies to "
                                 "task=embed");
      }
      return Make(WorkflowKind::kCausalGenerate, arch, false);
    case Family::kDecoderBase:
      if (!task.empty() && task != "embed") {
        return Unsupported(arch, absl::StrCat("task=", task,
                                              " needs an LM head; this "
                                              "base model only embeds"));
      }
      return Make(WorkflowKind::kDecoderEmbed, arch, bidirectional);
  }
  return absl::InternalError("unreachable");
}

}  // namespace inferd
