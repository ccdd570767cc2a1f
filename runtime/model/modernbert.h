// ModernBERT (answerdotai/ModernBERT, gte-modernbert, modernbert-embed):
// a pre-LayerNorm bidirectional encoder without biases by default:
// token embeddings + LayerNorm, then per layer
//   h += Wo(attention(rope(q), rope(k), v))  on  LN(h) (layer 0: h itself)
//   h += Wo(act(first half of Wi x) * second half)  on  LN(h)
// and a final LayerNorm. Layers alternate global attention (rotary base
// rope_theta) with local attention (|i - j| <= local_attention / 2, rotary
// base rope_local_theta) as ModelConfig::layer_types says.
// Factories only; see model.h for the threading contract.
#ifndef INFERD_RUNTIME_MODEL_MODERNBERT_H_
#define INFERD_RUNTIME_MODEL_MODERNBERT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/loader/model_config.h"
#include "runtime/loader/weights.h"
#include "runtime/model/model.h"

namespace inferd {

absl::StatusOr<std::unique_ptr<Model>> CreateModernBertModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options);

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_MODERNBERT_H_
