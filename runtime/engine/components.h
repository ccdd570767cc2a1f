// The component interfaces a workflow is assembled from, and the registry of
// each kind (runtime/common/registry.h), where implementations are
// registered by name:
//
//   kind / accessor                  value type                built-ins
//   input_processor                  InputProcessorFactory     embed_tokenizer,
//     InputProcessors()                                        embed_tokenizer_eos,
//                                                              classify_tokenizer,
//                                                              pair_tokenizer,
//                                                              prompt_tokenizer
//   prefill_scheduler                PrefillSchedulerFactory   prefill_only
//     PrefillSchedulers()
//   batching_scheduler               BatchingSchedulerFactory  continuous_batching
//     BatchingSchedulers()
//   attention_backend                AttentionBackendRegistration (runtime/model)
//   output_processor                 OutputProcessorFactory    pooling_cls,
//     OutputProcessors()                                       pooling_mean,
//                                                              pooling_last,
//                                                              label_scores,
//                                                              relevance_scores
//   sampler  Samplers()              SamplerFactory            sample_detokenize
//   output_stage  (output_stages.h)  OutputStageFactory        dense, matryoshka,
//                                                              normalize, scores
//   token_head  (token_heads.h)      TokenHeadFactory          bge_m3_sparse,
//                                                              bge_m3_colbert
//   executor  Executors()            ExecutorFactory           prefill_loop,
//                                                              continuous_batching_loop
//
// A workflow's `scheduler` names a batching scheduler and its
// `output_processor` a sampler when the workflow generates, else a prefill
// scheduler and an output processor (SchedulerKind, OutputKind).
//
// An executor is the engine loop: it reads the model's resolved workflow,
// builds each component from the registry by name and runs them. Plug-ins
// register more implementations (runtime/engine/plugin_api.h). Every
// interface here is header-only, so a plug-in needs no inferd symbols to
// implement one.
#ifndef INFERD_RUNTIME_ENGINE_COMPONENTS_H_
#define INFERD_RUNTIME_ENGINE_COMPONENTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "runtime/chat/chat_format.h"
#include "runtime/common/registry.h"
#include "runtime/engine/prefill_scheduler.h"
#include "runtime/engine/requests.h"
#include "runtime/model/batch_plan.h"

namespace inferd {

class GenerationScheduler;
struct RerankFormat;
struct SchedulerConfig;
class TokenSampler;
class Engine;
class ServedModel;
class Tokenizer;
class WeightStore;
struct Workflow;

// ------------------------------------------------------------ input

struct InputProcessorOptions {
  int64_t max_input_tokens = 512;
  // Decoder embedders: make every input end with this id (EOS), as
  // gte-Qwen2 / e5-mistral style models are trained.
  std::optional<int32_t> append_eos;
  bool include_prompt_in_pooling = true;
  std::map<std::string, std::string> prompts;  // name -> prefix
  std::string default_prompt_name;
  // Generation: the model's chat format (its template and special tokens),
  // which renders GenerateParams.messages; null for models that generate
  // nothing.
  std::shared_ptr<const ChatFormat> chat;
  // Decoder rerankers: the prompt a (query, document) pair is judged in
  // (rerank_format.h); null otherwise.
  std::shared_ptr<const RerankFormat> rerank_format;
};

// Request text -> token ids. One instance per engine, called from any
// thread: implementations must be thread-safe (const and stateless).
class InputProcessor {
 public:
  virtual ~InputProcessor() = default;
  virtual absl::string_view name() const = 0;

  // Each task a processor does not take is FAILED_PRECONDITION.
  virtual absl::StatusOr<std::vector<PrefillSequence>> ProcessEmbed(
      const EmbedParams& params) const {
    (void)params;
    return Refuse("embed");
  }
  virtual absl::StatusOr<std::vector<PrefillSequence>> ProcessClassify(
      const ClassifyParams& params) const {
    (void)params;
    return Refuse("classify");
  }
  virtual absl::StatusOr<std::vector<PrefillSequence>> ProcessRerank(
      const RerankParams& params) const {
    (void)params;
    return Refuse("rerank");
  }
  // Generation: the prompt's ids (checked against the vocabulary by the
  // executor).
  virtual absl::StatusOr<std::vector<int32_t>> ProcessPrompt(
      const GenerateParams& params) const {
    (void)params;
    return Refuse("generate");
  }

 protected:
  absl::Status Refuse(absl::string_view task) const {
    return absl::FailedPreconditionError(absl::StrCat(
        "input processor ", name(), " does not prepare ", task, " requests"));
  }
};

struct InputProcessorContext {
  const Tokenizer* tokenizer = nullptr;  // the model's; null in some tests
  InputProcessorOptions options;
  // The model's EOS ids (config.json, then the tokenizer config's).
  std::vector<int32_t> eos_token_ids;
};

using InputProcessorFactory =
    std::function<absl::StatusOr<std::unique_ptr<InputProcessor>>(
        const InputProcessorContext& context)>;

// ------------------------------------------------------------ output

// What the output processor needs about one sequence besides its step
// result.
struct OutputRequest {
  // First row that takes part in pooling (prompt rows excluded).
  int32_t pool_start = 0;
  // Classification heads: logits as they are, no softmax/sigmoid.
  bool raw_scores = false;
};

// Step results of prefill workflows -> per-sequence vectors: a pooled
// embedding (before Dense modules, Matryoshka cut and normalization, which
// the executor applies), label scores or a relevance score. Thread-safe
// (const and stateless): replica loops call it concurrently.
class OutputProcessor {
 public:
  virtual ~OutputProcessor() = default;
  virtual absl::string_view name() const = 0;
  // What the model runner must return for each sequence.
  virtual StepOutput step_output() const = 0;
  virtual absl::StatusOr<std::vector<float>> Process(
      const SequenceResult& result, const OutputRequest& request) const = 0;
};

enum class ScoreFunction { kSoftmax, kSigmoid, kRaw };

struct OutputProcessorContext {
  // Classifiers: how the model's logits become scores (single-label
  // softmax, multi-label or 1-label sigmoid).
  ScoreFunction scores = ScoreFunction::kSoftmax;
  // Decoder rerankers: the vocabulary ids of the rerank format's
  // score_tokens, in its order.
  std::vector<int32_t> score_token_ids;
};

using OutputProcessorFactory =
    std::function<absl::StatusOr<std::unique_ptr<OutputProcessor>>(
        const OutputProcessorContext& context)>;

// Generation's output processor: samples each step's logits (the engine
// then detokenizes incrementally and checks stops).
using SamplerFactory =
    std::function<std::unique_ptr<TokenSampler>(int32_t vocab_size)>;

// Pooling output processors are registered as "pooling_<mode>" (cls, mean,
// last; max from examples/plugin).
inline std::string PoolingComponent(absl::string_view pooling) {
  return absl::StrCat("pooling_", pooling);
}

// ------------------------------------------------------------ schedulers

using PrefillSchedulerFactory = std::function<std::unique_ptr<PrefillScheduler>(
    const PrefillSchedulerOptions& options)>;
using BatchingSchedulerFactory =
    std::function<std::unique_ptr<GenerationScheduler>(
        const SchedulerConfig& config)>;

// ------------------------------------------------------------ executors

struct EngineBuildContext {
  const ServedModel* model = nullptr;
  // The model's opened weights (shared by every replica's runner).
  std::shared_ptr<const WeightStore> weights;
};

using ExecutorFactory = std::function<absl::StatusOr<std::unique_ptr<Engine>>(
    const EngineBuildContext& context)>;

// ------------------------------------------------------------ registries
Registry<InputProcessorFactory>& InputProcessors();
Registry<PrefillSchedulerFactory>& PrefillSchedulers();
Registry<BatchingSchedulerFactory>& BatchingSchedulers();
Registry<OutputProcessorFactory>& OutputProcessors();
Registry<SamplerFactory>& Samplers();
Registry<ExecutorFactory>& Executors();

// The registries a workflow's `scheduler` and `output_processor` name
// components in: batching scheduler and sampler for a workflow that
// generates, prefill scheduler and output processor otherwise.
const RegistryKind& SchedulerKind(const Workflow& workflow);
const RegistryKind& OutputKind(const Workflow& workflow);

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_COMPONENTS_H_
