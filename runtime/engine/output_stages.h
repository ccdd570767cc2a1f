// Output stages: the prefill tail after the output processor, over the rows
// of one request (one row per sequence: a pooled embedding or a head's
// logits) with device ops. Built-ins (registry kind "output_stage"):
//   dense       the model's sentence-transformers Dense modules, in order:
//               Linear, then tanh or identity (nothing without modules);
//   matryoshka  the request's `dimensions`: the first columns;
//   normalize   L2 normalization (device op L2Normalize) when the request
//               normalizes;
//   scores      softmax (single-label) or sigmoid (multi-label, 1-logit
//               relevance) of classifier logits (device op Scores) unless
//               the request asks for raw scores.
// A workflow recipe names its stages (Workflow::output_stages; empty = its
// task's built-in tail, DefaultOutputStages); a plug-in adds its own
// (PluginRegistrar::AddOutputStage). Stages are immutable after
// construction; thread-safe (replica loops share them).
#ifndef INFERD_RUNTIME_ENGINE_OUTPUT_STAGES_H_
#define INFERD_RUNTIME_ENGINE_OUTPUT_STAGES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "device/ops.h"
#include "runtime/engine/components.h"
#include "runtime/engine/workflow.h"
#include "runtime/common/registry.h"

namespace inferd {

// A request's rows: `rows` x `cols` F32, row-major, host memory.
struct OutputRows {
  std::vector<float> values;
  int64_t rows = 0;
  int64_t cols = 0;

  TensorView view();
  // Row `r` as a vector.
  std::vector<float> Row(int64_t r) const;
};

// What a stage may read of the request.
struct StageRequest {
  bool normalize = true;
  int64_t dimensions = 0;  // 0 = every column
  bool raw_scores = false;
};

class OutputStage {
 public:
  virtual ~OutputStage() = default;
  virtual absl::string_view name() const = 0;
  // Transforms `rows` in place (the column count may change). INTERNAL when
  // the rows do not fit the stage (e.g. a Dense module's input width).
  virtual absl::Status Run(const ExecutionContext& ctx,
                           const StageRequest& request,
                           OutputRows* rows) const = 0;
};

// A sentence-transformers Dense module: y = act(W x + b), W [out x in]
// row-major.
struct DenseLayer {
  int64_t in_features = 0;
  int64_t out_features = 0;
  std::vector<float> weight;
  std::vector<float> bias;  // empty = no bias
  bool tanh = false;        // else identity
};

// What the model offers the stages.
struct OutputStageContext {
  // The model's Dense modules, in order (empty: none).
  std::shared_ptr<const std::vector<DenseLayer>> dense;
  // Classifier heads: softmax (single label) or sigmoid.
  ScoreFunction scores = ScoreFunction::kSoftmax;
};

using OutputStageFactory =
    std::function<absl::StatusOr<std::unique_ptr<OutputStage>>(
        const OutputStageContext& context)>;

// The stages of workflow `w`: its recipe's output_stages, or when it names
// none the built-in tail of its tasks (embed: dense, matryoshka, normalize;
// rerank and classify: scores).
std::vector<std::string> DefaultOutputStages(const Workflow& w);

// Builds the named stages from the registry, in order. INVALID_ARGUMENT
// naming an unknown stage (and the registered ones).
absl::StatusOr<std::vector<std::unique_ptr<OutputStage>>> CreateOutputStages(
    const std::vector<std::string>& names, const OutputStageContext& context);

// Runs `stages` over `rows` in order.
absl::Status RunOutputStages(const ExecutionContext& ctx,
                             const StageRequest& request,
                             const std::vector<const OutputStage*>& stages,
                             OutputRows* rows);

// The output_stage kind's registry.
Registry<OutputStageFactory>& OutputStages();

// Registers the built-in stages (RegisterBuiltins calls it once).
void RegisterBuiltinOutputStages();

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_OUTPUT_STAGES_H_
