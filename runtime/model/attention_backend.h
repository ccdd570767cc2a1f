// AttentionBackend: how a layer's attention reads keys and values.
// - "bidirectional_prefill": no cache; packed variable-length sequences, each
//   attending within itself (full mask, or causal when the model asks for
//   it, e.g. a decoder embedder in causal mode).
// - "causal_paged": PagedAttention (Kwon et al., 2023): new keys/values are
//   written into a block-paged KV cache, then new queries attend over the
//   cached context; prefill chunks and decodes share one batch.
// Not thread-safe; owned by a model runner and used by one step at a time.
#ifndef INFERD_RUNTIME_MODEL_ATTENTION_BACKEND_H_
#define INFERD_RUNTIME_MODEL_ATTENTION_BACKEND_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "device/ops.h"
#include "device/tensor.h"
#include "runtime/model/forward_batch.h"

namespace inferd {

enum class AttentionBackendKind {
  kAuto,                  // causal_paged for causal LMs, else prefill
  kBidirectionalPrefill,  // "bidirectional_prefill"
  kCausalPaged,           // "causal_paged"
};

// "auto", "bidirectional_prefill", "causal_paged".
absl::string_view AttentionBackendName(AttentionBackendKind kind);
// INVALID_ARGUMENT for an unknown name.
absl::StatusOr<AttentionBackendKind> ParseAttentionBackend(
    absl::string_view name);

// The per-layer key/value caches, [num_blocks, block_size, kv_heads,
// head_dim] each. Views into buffers the runner owns.
struct KvCacheViews {
  std::vector<TensorView> k;
  std::vector<TensorView> v;
  int block_size = 0;
  int64_t num_blocks = 0;
};

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual AttentionBackendKind kind() const = 0;
  bool uses_kv_cache() const {
    return kind() == AttentionBackendKind::kCausalPaged;
  }

  // Attention of layer `layer`: q [T, heads*head_dim]; k, v [T,
  // kv_heads*head_dim] (already rotated); out [T, heads*head_dim].
  virtual absl::Status Forward(const ExecutionContext& ctx,
                               const ForwardBatch& batch, int layer,
                               const TensorView& q, const TensorView& k,
                               const TensorView& v,
                               const AttentionParams& params,
                               const TensorView& out) = 0;
};

// VarlenAttention over batch.cu_seqlens.
std::unique_ptr<AttentionBackend> CreatePrefillAttentionBackend();

// ReshapeAndCache + PagedAttention over `cache` (which must outlive the
// backend; its contents may be replaced, e.g. when the cache is allocated).
std::unique_ptr<AttentionBackend> CreatePagedAttentionBackend(
    const KvCacheViews* cache);

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_ATTENTION_BACKEND_H_
