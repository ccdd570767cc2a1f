#include "runtime/model/modernbert.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"
#include "runtime/model/encoder_common.h"
#include "runtime/model/layers.h"
#include "runtime/model/llama.h"

namespace inferd {
namespace {

class ModernBertEncoder : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Create(
      const ModelConfig& config, const WeightStore& weights,
      const ModelLoadOptions& options);

  absl::StatusOr<TensorView> Forward(const ForwardContext& ctx) override;

 private:
  struct Block {
    bool has_attention_norm = false;  // layer 0 attends to h itself
    LayerNormLayer attention_norm;
    AttentionLayer attention;
    LayerNormLayer mlp_norm;
    GatedMlp mlp;
    bool local = false;  // local window and local rotary base
  };

  ModernBertEncoder(RopeCache global, RopeCache local)
      : global_rope_(std::move(global)), local_rope_(std::move(local)) {}
  absl::Status Load(const ModelConfig& config, const WeightStore& weights,
                    const ModelLoadOptions& options);

  RopeCache global_rope_;
  RopeCache local_rope_;
  std::vector<float> global_cos_sin_, local_cos_sin_;
  EmbeddingLayer embeddings_;
  LayerNormLayer embedding_norm_;
  std::vector<Block> blocks_;
  LayerNormLayer final_norm_;
};

absl::StatusOr<std::unique_ptr<Model>> ModernBertEncoder::Create(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options) {
  RETURN_IF_ERROR(CheckEncoderConfig(config));
  ASSIGN_OR_RETURN(RopeConfig global, RopeConfigFromModelConfig(config));
  RopeConfig local = global;
  if (config.rope_local_theta > 0) local.theta = config.rope_local_theta;
  ASSIGN_OR_RETURN(RopeCache global_rope, RopeCache::Create(global));
  ASSIGN_OR_RETURN(RopeCache local_rope, RopeCache::Create(local));
  std::unique_ptr<ModernBertEncoder> model(
      new ModernBertEncoder(std::move(global_rope), std::move(local_rope)));
  RETURN_IF_ERROR(model->Load(config, weights, options));
  return std::unique_ptr<Model>(std::move(model));
}

absl::Status ModernBertEncoder::Load(const ModelConfig& config,
                                     const WeightStore& weights,
                                     const ModelLoadOptions& options) {
  const int64_t hidden = config.hidden_size;
  const int64_t heads = config.num_attention_heads;
  const float eps = static_cast<float>(config.layer_norm_eps);
  ASSIGN_OR_RETURN(Activation act, ParseActivation(config.hidden_act));

  info_ = EncoderInfo(config);

  WeightLoader loader(&weights, options.device, options.compute_dtype,
                      &weights_);
  ConfigureEncoderLoader(options, loader);
  // ModernBertForMaskedLM stores the encoder under "model.".
  RETURN_IF_ERROR(loader.DetectPrefix("embeddings.tok_embeddings.weight"));
  ASSIGN_OR_RETURN(embeddings_,
                   EmbeddingLayer::Load(
                       loader, loader.Base("embeddings.tok_embeddings.weight"),
                       config.vocab_size, hidden));
  ASSIGN_OR_RETURN(embedding_norm_,
                   LayerNormLayer::Load(loader, loader.Base("embeddings.norm"),
                                        hidden, eps));

  AttentionParams base;
  base.num_heads = static_cast<int>(heads);
  base.num_kv_heads = static_cast<int>(heads);
  base.head_dim = static_cast<int>(config.head_dim);
  base.causal = false;
  base.bf16_products = options.compute_dtype == DType::kBF16 ||
                       options.compute_dtype == DType::kI8;
  blocks_.resize(static_cast<size_t>(config.num_hidden_layers));
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    Block& b = blocks_[static_cast<size_t>(i)];
    const std::string p = loader.Base(absl::StrCat("layers.", i, "."));
    b.has_attention_norm = loader.Has(p + "attn_norm.weight");
    if (b.has_attention_norm) {
      ASSIGN_OR_RETURN(b.attention_norm,
                       LayerNormLayer::Load(loader, p + "attn_norm", hidden,
                                            eps));
    } else if (i > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ModernBERT layer ", i, " has no ", p, "attn_norm.weight (only "
          "layer 0 attends to its input unnormalized)"));
    }
    AttentionParams params = base;
    const absl::optional<int64_t> window = config.SlidingWindowForLayer(i);
    b.local = window.has_value();
    if (b.local) params.sliding_window = static_cast<int>(*window);
    AttentionLayer::Names names;
    names.qkv = p + "attn.Wqkv";
    names.o = p + "attn.Wo";
    ASSIGN_OR_RETURN(b.attention,
                     AttentionLayer::Load(loader, names, hidden,
                                          static_cast<int>(i), params,
                                          BiasMode::kIfPresent,
                                          BiasMode::kIfPresent));
    ASSIGN_OR_RETURN(b.mlp_norm,
                     LayerNormLayer::Load(loader, p + "mlp_norm", hidden, eps));
    ASSIGN_OR_RETURN(b.mlp, GatedMlp::LoadFused(
                                loader, p + "mlp.Wi", p + "mlp.Wo", hidden,
                                config.intermediate_size, act,
                                /*up_first=*/false, BiasMode::kIfPresent));
  }
  ASSIGN_OR_RETURN(final_norm_,
                   LayerNormLayer::Load(loader, loader.Base("final_norm"),
                                        hidden, eps));
  return absl::OkStatus();
}

absl::StatusOr<TensorView> ModernBertEncoder::Forward(
    const ForwardContext& ctx) {
  const ForwardBatch& batch = *ctx.batch;
  const int64_t tokens = batch.num_tokens;
  const int64_t hidden = info_.hidden_size;
  ASSIGN_OR_RETURN(TensorView h, ctx.ws->Get(WsSlot::kResidual, tokens, hidden));
  ASSIGN_OR_RETURN(TensorView x, ctx.ws->Get(WsSlot::kHidden, tokens, hidden));
  ASSIGN_OR_RETURN(TensorView tmp, ctx.ws->Get(WsSlot::kProj, tokens, hidden));
  // Both rotary tables once per step (host memory: the runner drives
  // host-accessible devices only).
  RETURN_IF_ERROR(
      global_rope_.ComputeCosSin(batch.rope_positions, &global_cos_sin_));
  RETURN_IF_ERROR(
      local_rope_.ComputeCosSin(batch.rope_positions, &local_cos_sin_));
  const TensorView global_cs = TensorView::Contiguous(
      global_cos_sin_.data(), DType::kF32, {tokens, global_rope_.rotary_dim()});
  const TensorView local_cs = TensorView::Contiguous(
      local_cos_sin_.data(), DType::kF32, {tokens, local_rope_.rotary_dim()});

  RETURN_IF_ERROR(embeddings_.Forward(ctx.exec, batch.token_ids, h));
  RETURN_IF_ERROR(embedding_norm_.Forward(ctx.exec, h, h));
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    // x = the attention's input: LN(h), or h itself (layer 0).
    const TensorView& in = b.has_attention_norm ? x : h;
    if (b.has_attention_norm && i == 0) {
      RETURN_IF_ERROR(b.attention_norm.Forward(ctx.exec, h, x));
    }
    RETURN_IF_ERROR(b.attention.Forward(ctx, in, b.local ? local_cs : global_cs,
                                        global_rope_.config().style, tmp));
    // h += attention; x = LN(h) for the MLP.
    RETURN_IF_ERROR(b.mlp_norm.AddForward(ctx.exec, tmp, h, x));
    RETURN_IF_ERROR(b.mlp.Forward(ctx, x, tmp));
    // h += MLP; x = the next layer's LN(h), or the final norm.
    const bool last = i + 1 == blocks_.size();
    if (!last && !blocks_[i + 1].has_attention_norm) {
      return absl::InternalError("ModernBERT: a layer past 0 without attn_norm");
    }
    const LayerNormLayer& next =
        last ? final_norm_ : blocks_[i + 1].attention_norm;
    RETURN_IF_ERROR(next.AddForward(ctx.exec, tmp, h, x));
  }
  if (blocks_.empty()) RETURN_IF_ERROR(final_norm_.Forward(ctx.exec, h, x));
  return x;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateModernBertModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options) {
  return ModernBertEncoder::Create(config, weights, options);
}

}  // namespace inferd
