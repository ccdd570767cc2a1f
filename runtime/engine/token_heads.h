// Token heads: embedding outputs computed from every token's final hidden
// state of an embed request, beside (or instead of) the pooled vector, all
// from the same forward pass. BGE-M3's sparse lexical weights and ColBERT
// multi-vectors are the built-in ones (m3_output.h: `bge_m3_sparse`,
// `bge_m3_colbert`). A workflow names its token heads (Workflow::
// token_heads); each is built from the model directory when the model
// loads (registry kind `token_head`), and a plug-in can register more. A
// head whose files are absent is still built: it refuses requests for its
// output, naming what it needs.
// TokenHead: immutable after construction, thread-safe (replicas share it).
// TokenHeadRun: one request's, filled by its completion path (one thread
// at a time).
#ifndef INFERD_RUNTIME_ENGINE_TOKEN_HEADS_H_
#define INFERD_RUNTIME_ENGINE_TOKEN_HEADS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "device/ops.h"
#include "runtime/common/registry.h"
#include "runtime/engine/requests.h"
#include "runtime/model/batch_plan.h"

namespace inferd {

// One embed request's output of one head, sequence by sequence.
class TokenHeadRun {
 public:
  virtual ~TokenHeadRun() = default;
  // Sequence `index` (`ids` its tokens) finished with every token's hidden
  // state (StepOutput::kHiddenStates).
  virtual absl::Status Add(size_t index, const std::vector<int32_t>& ids,
                           const SequenceResult& hidden) = 0;
  // The request's output into its result.
  virtual void MoveInto(EmbedResult* result) = 0;
};

class TokenHead {
 public:
  virtual ~TokenHead() = default;
  // The name of its output in EmbedOutputs / ModelInfo.embed_outputs
  // ("sparse", "multi_vector").
  virtual std::string output() const = 0;
  // Whether the model has it (its files were found).
  virtual bool present() const = 0;
  // Whether `params` asks for its output.
  virtual bool Wanted(const EmbedParams& params) const = 0;
  // FAILED_PRECONDITION naming what is missing when the output is wanted
  // but the head is absent.
  virtual absl::Status Check(const EmbedParams& params) const = 0;
  // A wanted output's run for one request; `normalize` is the request's;
  // the head's ops run on `ctx`.
  virtual std::unique_ptr<TokenHeadRun> Start(
      const EmbedParams& params, bool normalize,
      const ExecutionContext& ctx) const = 0;
};

// What a token head is built from.
struct TokenHeadContext {
  std::string model_dir;
  int64_t hidden_size = 0;
  // Token ids no per-token output reports (CLS, EOS, PAD, UNK).
  std::vector<int32_t> special_ids;
  // Token id -> vocabulary string.
  std::function<std::string(int32_t)> id_to_token;
};

// The registry value of kind `token_head`.
using TokenHeadFactory =
    std::function<absl::StatusOr<std::unique_ptr<TokenHead>>(
        const TokenHeadContext& ctx)>;

// The token_head kind's registry.
Registry<TokenHeadFactory>& TokenHeads();

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_TOKEN_HEADS_H_
