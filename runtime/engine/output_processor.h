// Output processors of the prefill-only workflows: hidden states -> pooled,
// cut (Matryoshka) and normalized embeddings; classifier logits -> label
// scores; cross-encoder logits -> relevance scores. Pure functions;
// thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_OUTPUT_PROCESSOR_H_
#define INFERD_RUNTIME_ENGINE_OUTPUT_PROCESSOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/loader/st_config.h"
#include "runtime/model/batch_plan.h"

namespace inferd {

enum class Pooling { kCls, kMean, kLast };

// Parses "cls" / "mean" / "last".
absl::StatusOr<Pooling> ParsePooling(absl::string_view name);

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
  Pooling pooling = Pooling::kCls;
  bool normalize = true;
  int64_t dimensions = 0;  // 0 = all
  // Dense modules, in order (not owned; may be null).
  const std::vector<DenseLayer>* dense = nullptr;
};

// Order as in sentence-transformers: pooling -> Dense modules -> Matryoshka
// cut -> normalize.
// `result` holds the final hidden states of the sequence's tokens
// (kHiddenStates, rows = tokens) or of its last token (kLastHiddenState).
// Mean pooling averages rows [pool_start, rows).
absl::StatusOr<std::vector<float>> PoolEmbedding(const SequenceResult& result,
                                                 int32_t pool_start,
                                                 const EmbedOutputOptions& o);

enum class ScoreFunction { kSoftmax, kSigmoid, kRaw };

// Applies `fn` to one sequence's classifier logits.
std::vector<float> ScoreLogits(const std::vector<float>& logits,
                               ScoreFunction fn);

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_OUTPUT_PROCESSOR_H_
