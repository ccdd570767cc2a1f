// Workflows and architectures (vLLM's Workflow Defined Engine, applied to
// every model inferd serves). A Workflow is a named recipe of component
// names — input processor, scheduler, attention backend, output processor,
// executor — registered under kind "workflow"; CreateEngine assembles the
// engine from the registry by those names. An ArchitectureSpec (kind
// "architecture", keyed by config.json's architectures[0]) names the
// model class and the workflow the architecture gets by default or per
// task; config.json itself was read by its model_type's ConfigParser
// (kind "config_parser"). SelectWorkflow applies them to one model directory.
// Built-ins are registered by RegisterBuiltins (builtins.h); plug-ins add
// their own. Thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_WORKFLOW_H_
#define INFERD_RUNTIME_ENGINE_WORKFLOW_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/common/registry.h"
#include "runtime/engine/model_options.h"
#include "runtime/loader/model_config.h"
#include "runtime/loader/st_config.h"

namespace inferd {

enum class Task { kGenerate, kEmbed, kRerank, kClassify };
absl::string_view TaskName(Task task);
// "generate", "embed", "rerank", "classify"; INVALID_ARGUMENT otherwise.
absl::StatusOr<Task> ParseTask(absl::string_view name);

// The output processor name that stands for "pooling_<the model's
// pooling>" in a recipe (resolved per model: ServedModel).
inline constexpr char kPoolingOutput[] = "pooling";

struct Workflow {
  std::string name;  // reported in ModelInfo.workflow
  std::string description;
  std::vector<Task> tasks;
  std::string input_processor;
  std::string scheduler;
  std::string attention_backend;
  std::string output_processor;  // or kPoolingOutput
  // Prefill workflows: the output stages after the output processor, in
  // order (runtime/engine/output_stages.h); empty = the built-in tail of
  // the recipe's tasks (DefaultOutputStages).
  std::vector<std::string> output_stages;
  // Embedders: the token heads (registry kind token_head,
  // runtime/engine/token_heads.h) whose outputs a request may ask for
  // besides the pooled vector.
  std::vector<std::string> token_heads;
  std::string executor;
  // Embedders: the pooling used when neither the request, the --model
  // options nor the sentence-transformers files choose one.
  std::string default_pooling;
  // The recipe used instead when the model must attend bidirectionally
  // (bidirectional=true, or config.json "is_causal": false); empty when the
  // workflow has no such variant.
  std::string bidirectional_variant;

  // Filled by SelectWorkflow.
  std::string model_class;     // architectures[0]
  bool bidirectional = false;  // the attention backend's mask

  bool Supports(Task task) const;
};

// How an architecture is served. Its config.json is read by the parser of
// the file's model_type (runtime/loader/config_parser.h), as in
// transformers, not by one named here: one architecture class may come
// with several model_types (BertModel configs of model_type "bert" or a
// plug-in's own), and the model class checks the traits it needs
// (encoder or decoder).
struct ArchitectureSpec {
  // The model class (kind "model") that builds it; empty = the
  // architecture's own name.
  std::string model_class;
  std::string default_workflow;
  // Workflow per task override ("embed" -> "encoder_embed", ...). The
  // default workflow serves its own tasks without an entry.
  std::map<std::string, std::string> task_workflows;
  // Optional: the default workflow when it depends on the files (e.g. a
  // 1-label head reranks, an N-label head classifies); "" = default_workflow.
  std::function<std::string(const ModelConfig&,
                            const SentenceTransformersConfig&)>
      choose_default;
  // Optional: refuses a config the chosen workflow cannot serve (e.g.
  // task=rerank on a 3-label head), with a message saying what to change.
  std::function<absl::Status(const std::string& workflow, const ModelConfig&)>
      check;
};

// Chooses the workflow for a model. INVALID_ARGUMENT naming the
// architecture and listing the supported ones when it is unknown, or when an
// override does not fit the architecture (e.g. task=generate on BertModel).
// The recipe's components are not checked here (CheckWorkflowComponents).
absl::StatusOr<Workflow> SelectWorkflow(const ModelConfig& config,
                                        const SentenceTransformersConfig& st,
                                        const ModelOverrides& overrides);

// Every architecture string the registry knows, sorted.
std::vector<std::string> WorkflowArchitectures();

// The workflow kind's registry (recipes by name).
Registry<Workflow>& Workflows();
// The architecture kind's registry (config.json's architectures[0] -> how
// it is served).
Registry<ArchitectureSpec>& Architectures();

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_WORKFLOW_H_
