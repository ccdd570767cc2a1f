// Workflow registry: a model's config.json (architectures[0]) plus
// request-independent overrides (task, pooling, bidirectional) select the
// Workflow that serves it: input processor, scheduler, attention backend,
// output processor and model class. Immutable tables; thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_WORKFLOW_H_
#define INFERD_RUNTIME_ENGINE_WORKFLOW_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/engine/model_options.h"
#include "runtime/loader/model_config.h"
#include "runtime/loader/st_config.h"

namespace inferd {

enum class Task { kGenerate, kEmbed, kRerank, kClassify };
absl::string_view TaskName(Task task);

enum class WorkflowKind {
  kCausalGenerate,   // decoder LM: paged KV cache, continuous batching
  kEncoderEmbed,     // BERT-like encoder -> pooling -> embedding
  kDecoderEmbed,     // decoder (causal or bidirectional) -> last-token pooling
  kEncoderClassify,  // encoder + classification head -> label scores
  kCrossEncoderRerank,  // encoder + 1-logit head over (query, document) pairs
};

struct Workflow {
  WorkflowKind kind;
  std::string name;  // reported in ServedModelInfo.workflow
  std::vector<Task> tasks;
  std::string input_processor;
  std::string scheduler;
  std::string attention_backend;  // "causal_paged" | "bidirectional_prefill"
  std::string output_processor;
  std::string model_class;        // architectures[0]
  bool bidirectional = false;     // attention without the causal mask

  bool Supports(Task task) const;
};

// Chooses the workflow for a model. INVALID_ARGUMENT naming the
// architecture and listing the supported ones when it is unknown, or when an
// override does not fit the architecture (e.g. task=generate on BertModel).
absl::StatusOr<Workflow> SelectWorkflow(const ModelConfig& config,
                                        const SentenceTransformersConfig& st,
                                        const ModelOverrides& overrides);

// Every architecture string the registry knows, sorted.
std::vector<std::string> WorkflowArchitectures();

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_WORKFLOW_H_
