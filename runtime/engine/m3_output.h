// The BGE-M3 embedding outputs besides the dense vector, computed from the
// final hidden states of one forward pass (StepOutput::kHiddenStates):
// - sparse (lexical weights): w_t = ReLU(sparse_linear(h_t)) per token; per
//   token id the largest weight over the input's positions; special tokens
//   (CLS, EOS, PAD, UNK) and zero weights dropped;
// - multi-vector (ColBERT): colbert_linear(h_t) for every token after the
//   first (CLS), each L2-normalized when the request normalizes.
// Also the ColBERT late-interaction score of two such sets of vectors, and
// both heads as token heads (token_heads.h) a workflow names.
// Immutable after construction; thread-safe (replica loops share it).
#ifndef INFERD_RUNTIME_ENGINE_M3_OUTPUT_H_
#define INFERD_RUNTIME_ENGINE_M3_OUTPUT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "device/ops.h"
#include "runtime/engine/requests.h"
#include "runtime/engine/token_heads.h"
#include "runtime/loader/m3_heads.h"
#include "runtime/model/batch_plan.h"

namespace inferd {

struct M3Heads {
  std::optional<LinearWeights> sparse;
  std::optional<LinearWeights> colbert;
  // For FAILED_PRECONDITION when a request asks for an absent head: the
  // files that were looked for (M3HeadMissing).
  std::string sparse_missing;
  std::string colbert_missing;
  // Token ids the sparse output never reports (CLS, EOS, PAD, UNK).
  std::vector<int32_t> special_ids;
  // Token id -> vocabulary string (sparse tokens on request); may be unset.
  std::function<std::string(int32_t)> id_to_token;

  // FAILED_PRECONDITION naming the missing file unless the heads the
  // request asks for are present.
  absl::Status Check(const EmbedParams& params) const;
};

// The heads in model directory `dir` (FindM3HeadFiles) for an encoder of
// width `hidden`; `special_ids` and `id_to_token` are set by the caller.
// Absent files leave their head unset; a present but malformed file is an
// error.
absl::StatusOr<M3Heads> LoadM3Heads(const std::string& dir, int64_t hidden);

// Sparse output of one sequence: `ids` are its token ids, `hidden` its
// hidden states [ids.size() x H]. Pairs sorted by token id. The head runs
// as device ops (Linear, then Activate kRelu) on `ctx`.
absl::StatusOr<SparseVector> SparseWeights(const ExecutionContext& ctx,
                                           const SequenceResult& hidden,
                                           const std::vector<int32_t>& ids,
                                           const M3Heads& heads,
                                           bool with_tokens);

// ColBERT vectors of one sequence: [(rows - 1) x dims] row-major; device
// ops (Linear, then L2Normalize when `normalize`) on `ctx`.
absl::StatusOr<std::vector<float>> ColbertVectors(const ExecutionContext& ctx,
                                                  const SequenceResult& hidden,
                                                  const LinearWeights& head,
                                                  bool normalize);

// The built-in token heads (token_heads.h): BGE-M3's sparse lexical
// weights (`bge_m3_sparse`, output "sparse") and ColBERT vectors
// (`bge_m3_colbert`, output "multi_vector") from sparse_linear /
// colbert_linear in the model directory; absent files give an absent head.
absl::StatusOr<std::unique_ptr<TokenHead>> NewM3SparseHead(
    const TokenHeadContext& ctx);
absl::StatusOr<std::unique_ptr<TokenHead>> NewM3ColbertHead(
    const TokenHeadContext& ctx);

// Late-interaction (MaxSim) score: the mean over query vectors of the best
// dot product with any document vector. Both are row-major [n x dims].
float ColbertScore(const std::vector<float>& query,
                   const std::vector<float>& doc, int64_t dims);

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_M3_OUTPUT_H_
