// AttentionBackend: how a layer's attention reads keys and values. A
// registered component (runtime/common/registry.h, kind "attention_backend");
// the built-ins:
// - "bidirectional_prefill": no cache; packed variable-length sequences, each
//   attending to all of itself (encoders, LLM2Vec-style decoder embedders).
// - "causal_prefill": no cache; packed sequences, each token attending to
//   the tokens before it (decoder embedders in causal mode).
// - "causal_paged": PagedAttention (Kwon et al., 2023): new keys/values are
//   written into a block-paged KV cache, then new queries attend over the
//   cached context; prefill chunks and decodes share one batch.
// The backend's mask decides how the model runs (a decoder under
// bidirectional_prefill drops its causal mask).
// Not thread-safe; owned by a model runner and used by one step at a time.
#ifndef INFERD_RUNTIME_MODEL_ATTENTION_BACKEND_H_
#define INFERD_RUNTIME_MODEL_ATTENTION_BACKEND_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "device/ops.h"
#include "device/tensor.h"
#include "runtime/model/forward_batch.h"

namespace inferd {

// Which tokens a query may attend to.
enum class AttentionMask { kCausal, kBidirectional };

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
  // Its registered name.
  virtual absl::string_view name() const = 0;
  // Whether it keeps keys/values in the runner's paged KV cache.
  virtual bool uses_kv_cache() const = 0;

  // Attention of layer `layer`: q [T, heads*head_dim]; k, v [T,
  // kv_heads*head_dim] (already rotated); out [T, heads*head_dim].
  virtual absl::Status Forward(const ExecutionContext& ctx,
                               const ForwardBatch& batch, int layer,
                               const TensorView& q, const TensorView& k,
                               const TensorView& v,
                               const AttentionParams& params,
                               const TensorView& out) = 0;
};

// The registry value of kind "attention_backend". `create` gets the
// runner's KV cache views (which outlive the backend; their contents may be
// replaced when the cache is allocated); backends without a cache ignore
// them.
struct AttentionBackendRegistration {
  AttentionMask mask = AttentionMask::kBidirectional;
  bool uses_kv_cache = false;
  std::function<std::unique_ptr<AttentionBackend>(const KvCacheViews* cache)>
      create;
};

// The attention_backend kind's registry.
Registry<AttentionBackendRegistration>& AttentionBackends();

// Registers the built-in backends (RegisterModelBuiltins calls it once).
void RegisterBuiltinAttentionBackends();

// The registration of `name`; NOT_FOUND listing the registered ones.
absl::StatusOr<AttentionBackendRegistration> FindAttentionBackend(
    absl::string_view name);

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_ATTENTION_BACKEND_H_
