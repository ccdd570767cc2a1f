// Model: the forward pass of one architecture (an encoder, a decoder, with or
// without an LM head or a classification head), built from layers.h. A model
// computes final hidden states for a ForwardBatch and applies its heads to
// rows the runner selects; it does not know about BatchPlan.
// Not thread-safe; owned by a model runner.
#ifndef INFERD_RUNTIME_MODEL_MODEL_H_
#define INFERD_RUNTIME_MODEL_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device/device.h"
#include "device/ops.h"
#include "device/tensor.h"
#include "runtime/loader/weights.h"
#include "runtime/model/attention_backend.h"
#include "runtime/model/forward_batch.h"
#include "runtime/model/weight_loader.h"
#include "runtime/model/workspace.h"

namespace inferd {

// What a model needs while it loads.
struct ModelLoadOptions {
  Device* device = nullptr;
  // F32: every weight computes in F32. BF16: GEMM weights are BF16 (F32
  // accumulation); norms and embedding tables stay as loaded.
  DType compute_dtype = DType::kF32;
  // Decoders only: attend without the causal mask (LLM2Vec-style
  // embedders). Encoders are always bidirectional.
  bool bidirectional = false;
  // The model's activation precision (ops.h): under kInt8 the
  // block-quantized GEMM weights are repacked at load into the layout the
  // int8 kernels read at every M (WeightLoader::set_int8_panels).
  ActivationPrecision activations = ActivationPrecision::kExact;
};

// Which token's hidden state feeds the classification head.
enum class ClassifierToken { kFirst, kLast };

struct ModelInfo {
  std::string architecture;
  bool is_encoder = false;
  bool causal = false;  // attention mask the model runs with
  bool has_lm_head = false;
  bool has_classifier = false;
  ClassifierToken classifier_token = ClassifierToken::kFirst;
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t num_labels = 0;  // 0 without a classifier
  int64_t max_positions = 0;
  int64_t type_vocab_size = 0;  // encoders
  int64_t position_offset = 0;  // first absolute position id
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
};

// Per-step state a model's forward pass runs with.
struct ForwardContext {
  ExecutionContext exec;
  const ForwardBatch* batch = nullptr;
  Workspace* ws = nullptr;
  AttentionBackend* attention = nullptr;
};

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelInfo& info() const { return info_; }

  // Final hidden states [T, H] of every token of ctx.batch, in a workspace
  // slot (valid until the workspace is used again).
  virtual absl::StatusOr<TensorView> Forward(const ForwardContext& ctx) = 0;

  // LM head: rows [S, H] -> logits out [S, vocab]. FAILED_PRECONDITION for a
  // model without one.
  virtual absl::Status ComputeLogits(const ForwardContext& ctx,
                                     const TensorView& rows,
                                     const TensorView& out);

  // Classification head on the ClassifierToken rows [S, H] -> out [S,
  // num_labels]. FAILED_PRECONDITION for a model without one.
  virtual absl::Status Classify(const ForwardContext& ctx,
                                const TensorView& rows, const TensorView& out);

  // Weight memory: converted copies this model owns, and checkpoint bytes
  // it uses in place from the mapping.
  int64_t weight_bytes_allocated() const { return weights_.bytes_allocated; }
  int64_t weight_bytes_mapped() const { return weights_.bytes_mapped; }

 protected:
  Model() = default;

  ModelInfo info_;
  WeightBuffers weights_;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_MODEL_H_
