// The built-in output processors of the prefill-only workflows (registered
// as components, runtime/engine/components.h): pooling of hidden states
// (cls, mean, last), label scores and relevance scores; and the embedding
// tail every pooling shares: Dense modules, Matryoshka cut, normalization.
// Pure functions and immutable objects; thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_OUTPUT_PROCESSOR_H_
#define INFERD_RUNTIME_ENGINE_OUTPUT_PROCESSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/engine/components.h"
#include "runtime/model/batch_plan.h"

namespace inferd {

// The pooling modes built into inferd. Others come from plug-ins.
enum class Pooling { kCls, kMean, kLast };

// Built-in pooling as an output processor named PoolingComponent(mode):
// kCls and kMean read every row's hidden state (kMean averages rows
// [pool_start, rows)); kLast asks the runner for the last row only.
std::unique_ptr<OutputProcessor> CreatePoolingProcessor(Pooling pooling);

// Classification logits -> scores with `fn` (raw when the request asks);
// `name` is the registered name ("label_scores", "relevance_scores").
std::unique_ptr<OutputProcessor> CreateScoresProcessor(std::string name,
                                                       ScoreFunction fn);

// A sentence-transformers Dense module applied after pooling:
// y = act(W x + b), W [out x in] row-major.
struct DenseLayer {
  int64_t in_features = 0;
  int64_t out_features = 0;
  std::vector<float> weight;
  std::vector<float> bias;  // empty = no bias
  bool tanh = false;        // else identity
};

struct EmbedOutputOptions {
  bool normalize = true;
  int64_t dimensions = 0;  // 0 = all
  // Dense modules, in order (not owned; may be null).
  const std::vector<DenseLayer>* dense = nullptr;
};

// The tail after pooling, in sentence-transformers' order: Dense modules ->
// Matryoshka cut -> normalize.
absl::StatusOr<std::vector<float>> FinishEmbedding(
    const std::vector<float>& pooled, const EmbedOutputOptions& o);

// Applies `fn` to one sequence's classifier logits.
std::vector<float> ScoreLogits(const std::vector<float>& logits,
                               ScoreFunction fn);

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_OUTPUT_PROCESSOR_H_
