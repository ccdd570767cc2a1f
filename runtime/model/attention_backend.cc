#include "runtime/model/attention_backend.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#include "runtime/common/registry.h"
#include "runtime/common/status_macros.h"

namespace inferd {
namespace {

// VarlenAttention over batch.cu_seqlens with one fixed mask.
class PrefillAttentionBackend : public AttentionBackend {
 public:
  PrefillAttentionBackend(absl::string_view name, AttentionMask mask)
      : name_(name), mask_(mask) {}
  absl::string_view name() const override { return name_; }
  bool uses_kv_cache() const override { return false; }
  absl::Status Forward(const ExecutionContext& ctx, const ForwardBatch& batch,
                       int layer, const TensorView& q, const TensorView& k,
                       const TensorView& v, const AttentionParams& params,
                       const TensorView& out) override {
    (void)layer;
    AttentionParams p = params;
    p.causal = mask_ == AttentionMask::kCausal;
    // A window the model set applies with either mask: behind the query
    // when causal, on both sides when bidirectional (local layers of
    // ModernBERT). Decoders run bidirectionally set none.
    return VarlenAttention(ctx, q, k, v, batch.cu_seqlens, p, out);
  }

 private:
  const absl::string_view name_;
  const AttentionMask mask_;
};

class PagedAttentionBackend : public AttentionBackend {
 public:
  explicit PagedAttentionBackend(const KvCacheViews* cache) : cache_(cache) {}
  absl::string_view name() const override { return "causal_paged"; }
  bool uses_kv_cache() const override { return true; }
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

void AddBackend(const char* name, const char* description,
                AttentionBackendRegistration reg) {
  absl::Status s = AttentionBackends().Add(name, description, std::move(reg));
  (void)s;  // RegisterModelBuiltins' call_once: registered once
}

}  // namespace

Registry<AttentionBackendRegistration>& AttentionBackends() {
  static auto* const registry = new Registry<AttentionBackendRegistration>(
      "attention_backend",
      "how a layer's attention runs (mask, KV cache or none)");
  return *registry;
}

void RegisterBuiltinAttentionBackends() {
  AddBackend("bidirectional_prefill",
             "no KV cache; packed sequences, each token attends to its whole "
             "sequence (encoders, bidirectional decoder embedders)",
             {AttentionMask::kBidirectional, false, [](const KvCacheViews*) {
                return std::unique_ptr<AttentionBackend>(
                    new PrefillAttentionBackend("bidirectional_prefill",
                                                AttentionMask::kBidirectional));
              }});
  AddBackend("causal_prefill",
             "no KV cache; packed sequences, each token attends to the ones "
             "before it (causal decoder embedders)",
             {AttentionMask::kCausal, false, [](const KvCacheViews*) {
                return std::unique_ptr<AttentionBackend>(
                    new PrefillAttentionBackend("causal_prefill",
                                                AttentionMask::kCausal));
              }});
  AddBackend("causal_paged",
             "PagedAttention over a block-paged KV cache; prefill chunks and "
             "decodes in one batch (generation)",
             {AttentionMask::kCausal, true, [](const KvCacheViews* cache) {
                return std::unique_ptr<AttentionBackend>(
                    new PagedAttentionBackend(cache));
              }});
}

absl::StatusOr<AttentionBackendRegistration> FindAttentionBackend(
    absl::string_view name) {
  return AttentionBackends().Get(name);
}

}  // namespace inferd
