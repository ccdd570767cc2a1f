#include "runtime/engine/workflow.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/registry.h"
#include "runtime/common/status_macros.h"
#include "runtime/engine/components.h"
#include "runtime/engine/rerank_format.h"
#include "runtime/model/attention_backend.h"

namespace inferd {
namespace {

absl::Status Unsupported(const std::string& arch, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("architecture ", arch, ": ", why));
}

std::string TaskList(const Workflow& w) {
  std::vector<std::string> names;
  for (Task t : w.tasks) names.emplace_back(TaskName(t));
  return absl::StrJoin(names, ", ");
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

absl::StatusOr<Task> ParseTask(absl::string_view name) {
  for (Task t : {Task::kGenerate, Task::kEmbed, Task::kRerank, Task::kClassify}) {
    if (TaskName(t) == name) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown task '", name, "' (generate, embed, rerank, classify)"));
}

bool Workflow::Supports(Task task) const {
  return std::find(tasks.begin(), tasks.end(), task) != tasks.end();
}

Registry<Workflow>& Workflows() {
  static auto* const registry = new Registry<Workflow>(
      "workflow", "a recipe of component names a model is served by");
  return *registry;
}

Registry<ArchitectureSpec>& Architectures() {
  static auto* const registry = new Registry<ArchitectureSpec>(
      "architecture",
      "config.json's architectures[0] -> model class and workflows");
  return *registry;
}

std::vector<std::string> WorkflowArchitectures() {
  return Architectures().Names();
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
  const ArchitectureSpec* found = Architectures().Find(arch);
  if (found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported architecture '", arch, "' in config.json; supported: ",
        absl::StrJoin(WorkflowArchitectures(), ", "),
        " (plug-ins can add more: --plugin)"));
  }
  const ArchitectureSpec& spec = *found;

  // The recipe: the task override's, else the architecture's default.
  const std::string task = overrides.task.value_or("");
  std::string name;
  if (!task.empty()) {
    RETURN_IF_ERROR(ParseTask(task).status());
    auto it = spec.task_workflows.find(task);
    if (it != spec.task_workflows.end()) name = it->second;
  }
  if (name.empty() && spec.choose_default) name = spec.choose_default(config, st);
  if (name.empty()) name = spec.default_workflow;
  ASSIGN_OR_RETURN(Workflow w, Workflows().Get(name));
  if (!task.empty() && !w.Supports(*ParseTask(task))) {
    std::vector<std::string> offered;
    for (const auto& [t, wf] : spec.task_workflows) offered.push_back(t);
    return Unsupported(arch, absl::StrCat(
        "task=", task, " is not available (this architecture serves: ",
        offered.empty() ? TaskList(w) : absl::StrJoin(offered, ", "), ")"));
  }
  if (spec.check) RETURN_IF_ERROR(spec.check(w.name, config));

  // Attention direction: the override, else config.json's "is_causal":
  // false. A causal recipe switches to its bidirectional variant.
  ASSIGN_OR_RETURN(AttentionBackendRegistration backend,
                   FindAttentionBackend(w.attention_backend));
  bool bidirectional = backend.mask == AttentionMask::kBidirectional;
  const bool want_bidirectional = overrides.bidirectional.value_or(
      config.is_causal.has_value() && !*config.is_causal);
  if (want_bidirectional && !bidirectional) {
    if (w.bidirectional_variant.empty()) {
      return Unsupported(arch, absl::StrCat(
          "workflow ", w.name, " needs causal attention (", w.attention_backend,
          "); bidirectional=true only applies to embedding workflows"));
    }
    ASSIGN_OR_RETURN(w, Workflows().Get(w.bidirectional_variant));
    ASSIGN_OR_RETURN(backend, FindAttentionBackend(w.attention_backend));
    bidirectional = backend.mask == AttentionMask::kBidirectional;
  } else if (overrides.bidirectional.has_value() && !*overrides.bidirectional &&
             bidirectional) {
    return Unsupported(arch, absl::StrCat("workflow ", w.name, " (",
                                          w.attention_backend,
                                          ") is always bidirectional"));
  }
  if (overrides.sampler.has_value()) {
    if (!w.Supports(Task::kGenerate)) {
      return Unsupported(arch, absl::StrCat(
          "sampler=", *overrides.sampler, " only applies to generation; "
          "workflow ", w.name, " serves ", TaskList(w)));
    }
    w.output_processor = *overrides.sampler;
  }
  if (overrides.rerank_format.has_value() &&
      !UsesRerankFormat(config, w)) {
    return Unsupported(arch, absl::StrCat(
        "rerank_format=", *overrides.rerank_format,
        " only applies to a causal LM served with task=rerank; workflow ",
        w.name, " serves ", TaskList(w)));
  }
  w.model_class = spec.model_class.empty() ? arch : spec.model_class;
  w.bidirectional = bidirectional;
  return w;
}

}  // namespace inferd
