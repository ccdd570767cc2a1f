// The built-in output processors of the prefill-only workflows (registered
// as components, runtime/engine/components.h): pooling of hidden states
// (cls, mean, last) and the classifier heads' logits (label_scores,
// relevance_scores). What follows them (Dense modules, Matryoshka cut,
// normalization, the score function) are output stages
// (runtime/engine/output_stages.h). Immutable objects; thread-safe.
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

// A classification head's logits, one row per sequence; `name` is the
// registered name ("label_scores", "relevance_scores"). The workflow's
// `scores` stage turns them into scores.
std::unique_ptr<OutputProcessor> CreateLogitsProcessor(std::string name);

// Decoder rerankers ("token_logit_scores"): the last position's LM logits
// of `score_token_ids` (two: logit(second) - logit(first); one: its logit).
// FAILED_PRECONDITION for another count.
absl::StatusOr<std::unique_ptr<OutputProcessor>> CreateTokenLogitScores(
    const std::vector<int32_t>& score_token_ids);

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_OUTPUT_PROCESSOR_H_
