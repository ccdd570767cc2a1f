// The registries of the component kinds components.h and token_heads.h
// declare (their built-ins: builtins.cc).
#include "runtime/engine/components.h"

#include "runtime/engine/token_heads.h"
#include "runtime/engine/workflow.h"

namespace inferd {

Registry<InputProcessorFactory>& InputProcessors() {
  static auto* const r = new Registry<InputProcessorFactory>(
      "input_processor", "request text -> token ids");
  return *r;
}

Registry<PrefillSchedulerFactory>& PrefillSchedulers() {
  static auto* const r = new Registry<PrefillSchedulerFactory>(
      "prefill_scheduler",
      "batches whole sequences for prefill-only workflows (no KV cache)");
  return *r;
}

Registry<BatchingSchedulerFactory>& BatchingSchedulers() {
  static auto* const r = new Registry<BatchingSchedulerFactory>(
      "batching_scheduler",
      "schedules generation steps over the paged KV cache");
  return *r;
}

Registry<OutputProcessorFactory>& OutputProcessors() {
  static auto* const r = new Registry<OutputProcessorFactory>(
      "output_processor",
      "a prefill step's result -> a pooled vector or scores");
  return *r;
}

Registry<SamplerFactory>& Samplers() {
  static auto* const r = new Registry<SamplerFactory>(
      "sampler", "a generation step's logits -> the next tokens");
  return *r;
}

Registry<ExecutorFactory>& Executors() {
  static auto* const r = new Registry<ExecutorFactory>(
      "executor", "the engine loop that runs a workflow's components");
  return *r;
}

Registry<TokenHeadFactory>& TokenHeads() {
  static auto* const r = new Registry<TokenHeadFactory>(
      "token_head", "an embed output from every token's hidden state");
  return *r;
}

const RegistryKind& SchedulerKind(const Workflow& workflow) {
  if (workflow.Supports(Task::kGenerate)) return BatchingSchedulers();
  return PrefillSchedulers();
}

const RegistryKind& OutputKind(const Workflow& workflow) {
  if (workflow.Supports(Task::kGenerate)) return Samplers();
  return OutputProcessors();
}

}  // namespace inferd
