#include "runtime/model/attention_backend.h"

#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"

namespace inferd {
namespace {

class PrefillAttentionBackend : public AttentionBackend {
 public:
  AttentionBackendKind kind() const override {
    return AttentionBackendKind::kBidirectionalPrefill;
  }
  absl::Status Forward(const ExecutionContext& ctx, const ForwardBatch& batch,
                       int layer, const TensorView& q, const TensorView& k,
                       const TensorView& v, const AttentionParams& params,
                       const TensorView& out) override {
    AttentionParams p = params;
    if (!p.causal) p.sliding_window = 0;  // windows only restrict causal masks
    return VarlenAttention(ctx, q, k, v, batch.cu_seqlens, p, out);
  }
};

class PagedAttentionBackend : public AttentionBackend {
 public:
  explicit PagedAttentionBackend(const KvCacheViews* cache) : cache_(cache) {}
  AttentionBackendKind kind() const override {
    return AttentionBackendKind::kCausalPaged;
  }
  absl::Status Forward(const ExecutionContext& ctx, const ForwardBatch& batch,
                       int layer, const TensorView& q, const TensorView& k,
                       const TensorView& v, const AttentionParams& params,
                       const TensorView& out) override {
    if (layer < 0 || layer >= static_cast<int>(cache_->k.size())) {
      return absl::FailedPreconditionError(
          absl::StrCat("causal_paged attention: no KV cache for layer ", layer,
                       " (AllocateKvCache not called?)"));
    }
    if (!params.causal) {
      return absl::InvalidArgumentError(
          "causal_paged attention cannot run bidirectionally");
    }
    RETURN_IF_ERROR(ReshapeAndCache(ctx, k, v, batch.slot_mapping,
                                    cache_->k[layer], cache_->v[layer]));
    return PagedAttention(ctx, q, cache_->k[layer], cache_->v[layer],
                          batch.paged, params, out);
  }

 private:
  const KvCacheViews* cache_;
};

}  // namespace

absl::string_view AttentionBackendName(AttentionBackendKind kind) {
  switch (kind) {
    case AttentionBackendKind::kAuto:
      return "auto";
    case AttentionBackendKind::kBidirectionalPrefill:
      return "bidirectional_prefill";
    case AttentionBackendKind::kCausalPaged:
      return "causal_paged";
  }
  return "unknown";
}

absl::StatusOr<AttentionBackendKind> ParseAttentionBackend(
    absl::string_view name) {
  for (AttentionBackendKind kind : {AttentionBackendKind::kAuto,
                                    AttentionBackendKind::kBidirectionalPrefill,
                                    AttentionBackendKind::kCausalPaged}) {
    if (name == AttentionBackendName(kind)) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown attention backend \"", name,
      "\" (expected auto, bidirectional_prefill or causal_paged)"));
}

std::unique_ptr<AttentionBackend> CreatePrefillAttentionBackend() {
  return std::make_unique<PrefillAttentionBackend>();
}

std::unique_ptr<AttentionBackend> CreatePagedAttentionBackend(
    const KvCacheViews* cache) {
  return std::make_unique<PagedAttentionBackend>(cache);
}

}  // namespace inferd
