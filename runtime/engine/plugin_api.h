// The inferd plug-in API: what a shared library loaded with
// `inferd --plugin PATH.so` includes to add entries to any registry kind
// (runtime/common/registry.h): config parsers, architectures, model
// classes, workflows, components, tool-call and reasoning formats. (Devices
// and model runners are registry kinds too, but inferd has no option that
// selects another device yet, so the registrar does not offer them.)
//
// A plug-in defines one registration function and exports it with
// INFERD_PLUGIN:
//
//   #include "runtime/engine/plugin_api.h"
//
//   absl::Status Register(inferd::PluginRegistrar& r) {
//     return r.AddOutputProcessor("pooling_max", "max over tokens", ...);
//   }
//   INFERD_PLUGIN(Register)
//
// inferd refuses, at startup, a plug-in built against another
// INFERD_PLUGIN_API_VERSION, and any registration whose name is taken. The
// interfaces a plug-in implements (components.h, attention_backend.h,
// model.h) are header-only or virtual, and every registration goes through
// the PluginRegistrar's virtual methods, so a plug-in links no inferd
// library; it must be built with the same compiler, standard library and
// abseil as the inferd binary (docs/plugins.md).
#ifndef INFERD_RUNTIME_ENGINE_PLUGIN_API_H_
#define INFERD_RUNTIME_ENGINE_PLUGIN_API_H_

#include <string>

#include "absl/status/status.h"
#include "runtime/chat/tool_parser.h"
#include "runtime/engine/components.h"
#include "runtime/engine/output_stages.h"
#include "runtime/engine/rerank_format.h"
#include "runtime/engine/token_heads.h"
#include "runtime/engine/workflow.h"
#include "runtime/gen/sampler.h"
#include "runtime/gen/scheduler.h"
#include "runtime/loader/config_parser.h"
#include "runtime/model/attention_backend.h"
#include "runtime/model/model_registry.h"

// Bumped whenever a type or signature a plug-in sees changes.
// 2: AddConfigParser registers a full ConfigParser (defaults + hook) instead
//    of an alias of a built-in model_type; GetConfigParser;
//    ArchitectureSpec has no config_parser.
// 3: GenerateParams.speculative; StepOutput::kAllLogits.
// 4: SamplingParams.n and prompt_logprobs; GenerateChunk.sample_index,
//    more_samples and prompt_logprobs.
// 5: AddSampler (TokenSampler over a SamplingContext) and
//    AddBatchingScheduler (GenerationScheduler); InputProcessorOptions.chat
//    (a ChatFormat) replaces render_chat.
// 6: Workflow::output_stages (the prefill tail after the output processor,
//    registry kind "output_stage"); the built-in label_scores and
//    relevance_scores processors give logits, the `scores` stage applies
//    softmax / sigmoid.
// 7: ExecutionContext::decode_rows (a decode-only step; set by the model
//    runner, read by the device's kernels).
// 8: ModelConfig gained rope_freq_factors, layer_uses_rope,
//    partial_rotary_factor and the Gemma fields (embedding_multiplier,
//    rms_norm_weight_offset, sandwich_norms, query_pre_attn_scalar,
//    attn_logit_softcapping, final_logit_softcapping, rope_local_theta);
//    RopeScaling gained freq_factors and LongRoPE's short/long factors
//    (RopeScalingType::kLongRope).
// 9: ExecutionContext::activations (ActivationPrecision, the model's
//    `activations=` policy; set by the model runner, read by the device's
//    kernels); ModelRunnerOptions::activations.
// 10: ModelLoadOptions::activations; WeightStore shares repacked weights
//    (FindOrPack) and releases stored pages (ReleaseStored);
//    WeightBuffers::shared; WeightLoader::set_int8_panels and a public
//    WithPacked; PackedFormat::kInt8Panels.
// 11: AttentionParams::bf16_products; Device::fast_bf16_products;
//    PackedFormat::kBf16Pairs; EngineOptions::dtype defaults to "auto"
//    (resolved per model when it opens).
// 12: token heads (runtime/engine/token_heads.h: TokenHead, TokenHeadRun,
//    registry kind "token_head", AddTokenHead; Workflow::token_heads names
//    them; BGE-M3's heads are the built-in bge_m3_sparse / bge_m3_colbert)
//    and Engine::EmbedOutputs; StepRunner moved to step_runner.h;
//    GenerateParams::return_prompt_token_ids and
//    GenerateChunk::prompt_token_ids; ChatTool::strict.
// 13: one typed registry per kind (runtime/common/registry.h: Registry<T>,
//    no std::any): schedulers are two kinds (prefill_scheduler,
//    batching_scheduler) and samplers their own kind (sampler, no longer
//    under output_processor); AddOutputStage, AddToolParser and
//    AddReasoningParser (ReasoningParserFormat); DeviceRegistry::Register
//    takes a description and origin; ConfigParser::rope_type_aliases;
//    decoder rerankers (RerankFormat, AddRerankFormat,
//    OutputProcessorContext::score_token_ids,
//    InputProcessorOptions::rerank_format).
// 14: encoder families: ConfigParser::key_aliases and
//    ::position_embedding_types; ModelConfig::relative_attention_buckets /
//    ::relative_attention_max_distance; AttentionParams::relative_bias /
//    ::relative_bias_radius and bidirectional sliding windows; GatedMlp's
//    LoadNamed / LoadFused; RerankFormat text markers {split} and {bos}.
#define INFERD_PLUGIN_API_VERSION 14

namespace inferd {

// Each Add* registers under the plug-in's path as origin. ALREADY_EXISTS
// when the name is taken (built-ins cannot be replaced);
// INVALID_ARGUMENT for an empty name or factory.
class PluginRegistrar {
 public:
  virtual ~PluginRegistrar() = default;

  virtual absl::Status AddInputProcessor(const std::string& name,
                                         const std::string& description,
                                         InputProcessorFactory factory) = 0;
  virtual absl::Status AddOutputProcessor(const std::string& name,
                                          const std::string& description,
                                          OutputProcessorFactory factory) = 0;
  virtual absl::Status AddPrefillScheduler(const std::string& name,
                                           const std::string& description,
                                           PrefillSchedulerFactory factory) = 0;
  // Generation: a sampler (kind "sampler"), which a model runs with
  // `--model NAME=PATH,sampler=<name>`; and a scheduler (kind
  // "batching_scheduler") a generation workflow names.
  virtual absl::Status AddSampler(const std::string& name,
                                  const std::string& description,
                                  SamplerFactory factory) = 0;
  virtual absl::Status AddBatchingScheduler(
      const std::string& name, const std::string& description,
      BatchingSchedulerFactory factory) = 0;
  virtual absl::Status AddAttentionBackend(
      const std::string& name, const std::string& description,
      AttentionBackendRegistration backend) = 0;
  virtual absl::Status AddExecutor(const std::string& name,
                                   const std::string& description,
                                   ExecutorFactory factory) = 0;
  // A step of the prefill tail after the output processor (kind
  // "output_stage"), which a workflow names in its output_stages.
  virtual absl::Status AddOutputStage(const std::string& name,
                                      const std::string& description,
                                      OutputStageFactory factory) = 0;
  // An embed output from every token's hidden state (kind "token_head"),
  // which a workflow names in its token_heads.
  virtual absl::Status AddTokenHead(const std::string& name,
                                    const std::string& description,
                                    TokenHeadFactory factory) = 0;
  // A model class (kind "model"), named like the architecture it builds.
  virtual absl::Status AddModelClass(const std::string& name,
                                     const std::string& description,
                                     ModelFactory factory) = 0;
  // A tool-call format (kind "tool_parser", `tool_parser=<name>`) and a
  // reasoning format (kind "reasoning_parser", `reasoning_parser=<name>`);
  // a template the format's matches_template recognizes picks it.
  virtual absl::Status AddToolParser(const std::string& name,
                                     const std::string& description,
                                     ToolParserFormat format) = 0;
  virtual absl::Status AddReasoningParser(const std::string& name,
                                          const std::string& description,
                                          ReasoningParserFormat format) = 0;
  // A decoder reranker's prompt and score tokens (kind "rerank_format"),
  // which a model names with `rerank_format=<name>`.
  virtual absl::Status AddRerankFormat(const std::string& name,
                                       const std::string& description,
                                       RerankFormat format) = 0;
  // A workflow recipe; its components may come from this plug-in or any
  // other registration.
  virtual absl::Status AddWorkflow(Workflow workflow) = 0;
  virtual absl::Status AddArchitecture(const std::string& architecture,
                                       const std::string& description,
                                       ArchitectureSpec spec) = 0;
  // How config.json files whose model_type is `model_type` are read: the
  // family's defaults and its optional read_extra hook
  // (runtime/loader/config_parser.h). Built-in model_types cannot be
  // replaced.
  virtual absl::Status AddConfigParser(const std::string& model_type,
                                       const std::string& description,
                                       ConfigParser parser) = 0;
  // A copy of the parser registered for `model_type` (built-in or from a
  // plug-in loaded earlier), to start a new family from. INVALID_ARGUMENT
  // naming it and listing the registered ones when there is none.
  virtual absl::StatusOr<ConfigParser> GetConfigParser(
      const std::string& model_type) = 0;
};

}  // namespace inferd

// The symbols inferd looks up in a plug-in.
#define INFERD_PLUGIN(register_function)                                     \
  extern "C" __attribute__((visibility("default"))) int                      \
  inferd_plugin_api_version() {                                              \
    return INFERD_PLUGIN_API_VERSION;                                        \
  }                                                                          \
  extern "C" __attribute__((visibility("default"))) void                     \
  inferd_plugin_register(::inferd::PluginRegistrar* registrar,               \
                         ::absl::Status* status) {                           \
    *status = register_function(*registrar);                                 \
  }

#endif  // INFERD_RUNTIME_ENGINE_PLUGIN_API_H_
