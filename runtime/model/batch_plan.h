// BatchPlan: the plain description of one engine step that a scheduler hands
// to a model runner (which sequences, which new tokens, their positions and
// KV block tables), and BatchResult, what the runner hands back. Schedulers
// build these without knowing the device. Plain value types.
#ifndef INFERD_RUNTIME_MODEL_BATCH_PLAN_H_
#define INFERD_RUNTIME_MODEL_BATCH_PLAN_H_

#include <cstdint>
#include <vector>

namespace inferd {

// What the runner returns for one sequence of the step.
enum class StepOutput : uint8_t {
  kNone,              // nothing (a prefill chunk that does not sample yet)
  kLastLogits,        // LM-head logits of the sequence's last new token [V]
  kHiddenStates,      // final hidden states of every new token [n x H]
  kLastHiddenState,   // final hidden state of the last new token [H]
  kClassifierLogits,  // sequence-classification head output [num_labels]
  // LM-head logits of every new token [n x V] (speculative decoding: row i
  // predicts the token after token_ids[i]).
  kAllLogits,
  // Pooled on the device, one row each [H]: the first new token's final
  // hidden state (CLS pooling), and the mean of rows [pool_start, n) (mean
  // pooling; accumulated in double, in row order).
  kFirstHiddenState,
  kMeanHiddenState,
};

struct SequencePlan {
  int64_t seq_id = 0;                 // caller's id, echoed in the result
  std::vector<int32_t> token_ids;     // the new tokens computed this step
  std::vector<int32_t> token_type_ids;  // encoders only; empty = all 0
  // Position of token_ids[0] in the sequence (= tokens already in the KV
  // cache). 0 for prefill-only workflows.
  int32_t start_pos = 0;
  // KV cache blocks of the whole sequence so far (causal paged attention
  // only; empty for prefill-only). Must cover start_pos + token_ids.size()
  // tokens.
  std::vector<int32_t> block_table;
  StepOutput output = StepOutput::kNone;
  // kMeanHiddenState: the first row the mean takes (prompt tokens an
  // embedder leaves out); clamped to [0, n - 1].
  int32_t pool_start = 0;
};

struct BatchPlan {
  std::vector<SequencePlan> seqs;
  int64_t num_tokens() const {
    int64_t n = 0;
    for (const SequencePlan& s : seqs) n += static_cast<int64_t>(s.token_ids.size());
    return n;
  }
};

struct SequenceResult {
  int64_t seq_id = 0;
  StepOutput output = StepOutput::kNone;
  int32_t rows = 0;           // 1, or n for kHiddenStates and kAllLogits
  int32_t cols = 0;           // V, H or num_labels
  std::vector<float> values;  // rows x cols, row-major
};

struct BatchResult {
  std::vector<SequenceResult> seqs;  // same order as BatchPlan::seqs
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_BATCH_PLAN_H_
