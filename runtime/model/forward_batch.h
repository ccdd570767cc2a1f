// ForwardBatch: one engine step flattened for the forward pass: the packed
// tokens of all sequences, their positions, and the attention metadata both
// attention backends read. Built by ModelRunnerBase from a BatchPlan; the
// views point at memory the runner owns for the duration of the step.
// Plain value type.
#ifndef INFERD_RUNTIME_MODEL_FORWARD_BATCH_H_
#define INFERD_RUNTIME_MODEL_FORWARD_BATCH_H_

#include <cstdint>

#include "absl/types/span.h"
#include "device/ops.h"
#include "device/tensor.h"

namespace inferd {

struct ForwardBatch {
  int64_t num_tokens = 0;
  int64_t num_seqs = 0;
  TensorView token_ids;       // I32 [T]
  TensorView positions;       // I32 [T] (model position ids, offset applied)
  TensorView token_type_ids;  // I32 [T]
  // Rotary positions (0-based token positions) as host values, for
  // RopeCache::ComputeCosSin.
  absl::Span<const int32_t> rope_positions;
  // I32 [S + 1]: tokens of sequence i are rows [cu_seqlens[i],
  // cu_seqlens[i+1]). Also the paged metadata's query_start_loc.
  TensorView cu_seqlens;
  int32_t max_query_len = 0;

  // Paged KV cache metadata (causal_paged backend only).
  TensorView slot_mapping;  // I32 [T]
  PagedAttentionMetadata paged;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_FORWARD_BATCH_H_
