#include "runtime/model/llama.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"
#include "runtime/model/layers.h"

namespace inferd {
namespace {

class DecoderModel : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Create(
      const ModelConfig& config, const WeightStore& weights,
      const ModelLoadOptions& options, bool lm_head);

  absl::StatusOr<TensorView> Forward(const ForwardContext& ctx) override;
  absl::Status ComputeLogits(const ForwardContext& ctx, const TensorView& rows,
                             const TensorView& out) override;

 private:
  struct Block {
    RmsNormLayer input_norm;
    AttentionLayer attention;
    // Llama: the MLP input. Sandwich norms (Gemma): on the attention
    // output; pre_ff_norm is then the MLP input, post_ff_norm its output.
    RmsNormLayer post_attention_norm;
    RmsNormLayer pre_ff_norm, post_ff_norm;
    GatedMlp mlp;
    bool rope = true;  // false: no positions in this layer (SmolLM3)
    bool local_rope = false;  // rotates with local_rope_ (Gemma 3)
  };

  explicit DecoderModel(RopeCache rope) : rope_(std::move(rope)) {}
  absl::Status Load(const ModelConfig& config, const WeightStore& weights,
                    const ModelLoadOptions& options, bool lm_head);
  // cos_sin_ for the step's tokens.
  absl::Status ComputeCosSin(const ForwardBatch& batch);

  RopeCache rope_;
  std::vector<float> cos_sin_;  // [T, rotary_dim] of the current step
  bool has_local_rope_ = false;
  RopeCache local_rope_;
  std::vector<float> local_cos_sin_;
  bool sandwich_norms_ = false;
  float embedding_multiplier_ = 1.0f;
  float final_logit_softcap_ = 0.0f;
  EmbeddingLayer embed_;
  std::vector<Block> blocks_;
  RmsNormLayer final_norm_;
  LinearLayer lm_head_;
};

absl::StatusOr<std::unique_ptr<Model>> DecoderModel::Create(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options, bool lm_head) {
  if (!config.IsDecoder()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.architectures[0], " needs a decoder config; ",
                     "model_type is ", config.model_type));
  }
  if (options.compute_dtype == DType::kI8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dtype int8 is for encoder models (BERT, XLM-RoBERTa); ",
        config.architectures[0], " is a decoder: use q8_0 for 8-bit weights"));
  }
  ASSIGN_OR_RETURN(RopeConfig rope_config, RopeConfigFromModelConfig(config));
  ASSIGN_OR_RETURN(RopeCache rope, RopeCache::Create(rope_config));
  std::unique_ptr<DecoderModel> model(new DecoderModel(std::move(rope)));
  if (config.rope_local_theta > 0) {
    // Gemma 3's sliding layers: their own base, no scaling.
    RopeConfig local = rope_config;
    local.theta = config.rope_local_theta;
    local.scaling = RopeScaling();
    local.scaling.freq_factors = rope_config.scaling.freq_factors;
    ASSIGN_OR_RETURN(model->local_rope_, RopeCache::Create(local));
    model->has_local_rope_ = true;
  }
  RETURN_IF_ERROR(model->Load(config, weights, options, lm_head));
  return std::unique_ptr<Model>(std::move(model));
}

absl::Status DecoderModel::Load(const ModelConfig& config,
                                const WeightStore& weights,
                                const ModelLoadOptions& options, bool lm_head) {
  const int64_t hidden = config.hidden_size;
  const int64_t vocab = config.vocab_size;
  const float eps = static_cast<float>(config.rms_norm_eps);
  const float norm_offset = static_cast<float>(config.rms_norm_weight_offset);
  ASSIGN_OR_RETURN(Activation act, ParseActivation(config.hidden_act));
  sandwich_norms_ = config.sandwich_norms;
  embedding_multiplier_ = static_cast<float>(config.embedding_multiplier);
  final_logit_softcap_ = static_cast<float>(config.final_logit_softcapping);

  info_.architecture = config.architectures[0];
  info_.is_encoder = false;
  info_.causal = !options.bidirectional;
  info_.has_lm_head = lm_head;
  info_.hidden_size = hidden;
  info_.vocab_size = vocab;
  info_.max_positions = config.max_position_embeddings;
  info_.num_layers = config.num_hidden_layers;
  info_.num_heads = config.num_attention_heads;
  info_.num_kv_heads = config.num_key_value_heads;
  info_.head_dim = config.head_dim;
  info_.intermediate_size = config.intermediate_size;

  WeightLoader loader(&weights, options.device, options.compute_dtype,
                      &weights_);
  loader.set_int8_panels(options.activations == ActivationPrecision::kInt8);
  RETURN_IF_ERROR(loader.DetectPrefix("embed_tokens.weight"));
  const std::string embed_name = loader.Base("embed_tokens.weight");
  const bool tied = lm_head && !loader.Has("lm_head.weight");
  // A tied table doubles as the LM head's GEMM weight: load it once in the
  // GEMM dtype.
  absl::optional<DType> table_dtype;
  if (tied) table_dtype = options.compute_dtype;
  ASSIGN_OR_RETURN(embed_, EmbeddingLayer::Load(loader, embed_name, vocab,
                                                hidden, table_dtype));

  AttentionParams base;
  base.num_heads = static_cast<int>(config.num_attention_heads);
  base.num_kv_heads = static_cast<int>(config.num_key_value_heads);
  base.head_dim = static_cast<int>(config.head_dim);
  base.causal = info_.causal;
  if (config.query_pre_attn_scalar > 0) {
    base.scale =
        static_cast<float>(1.0 / std::sqrt(config.query_pre_attn_scalar));
  }
  base.logits_soft_cap = static_cast<float>(config.attn_logit_softcapping);
  blocks_.resize(static_cast<size_t>(config.num_hidden_layers));
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    Block& b = blocks_[static_cast<size_t>(i)];
    const std::string p = loader.Base(absl::StrCat("layers.", i, "."));
    AttentionParams params = base;
    b.rope = config.LayerUsesRope(i);
    b.local_rope = config.LayerUsesLocalRope(i);
    // A causal model's window, or the window of a model defined
    // bidirectional (is_causal false: EmbeddingGemma, keys with
    // |i - j| < window); a causal model run bidirectionally keeps none.
    const absl::optional<int64_t> window = config.SlidingWindowForLayer(i);
    const bool defined_bidirectional =
        config.is_causal.has_value() && !*config.is_causal;
    if (window.has_value() && (info_.causal || defined_bidirectional)) {
      params.sliding_window = static_cast<int>(*window);
    }
    ASSIGN_OR_RETURN(
        b.input_norm,
        RmsNormLayer::Load(loader, absl::StrCat(p, "input_layernorm"), hidden,
                           eps, norm_offset));
    AttentionLayer::Names names;
    names.q = absl::StrCat(p, "self_attn.q_proj");
    names.k = absl::StrCat(p, "self_attn.k_proj");
    names.v = absl::StrCat(p, "self_attn.v_proj");
    names.o = absl::StrCat(p, "self_attn.o_proj");
    // Phi-3 checkpoints store q|k|v as one projection.
    if (loader.Has(absl::StrCat(p, "self_attn.qkv_proj.weight"))) {
      names.qkv = absl::StrCat(p, "self_attn.qkv_proj");
    }
    if (config.qk_norm) {
      names.q_norm = absl::StrCat(p, "self_attn.q_norm");
      names.k_norm = absl::StrCat(p, "self_attn.k_norm");
      names.qk_norm_eps = eps;
      names.qk_norm_weight_offset = norm_offset;
    }
    ASSIGN_OR_RETURN(
        b.attention,
        AttentionLayer::Load(loader, names, hidden, static_cast<int>(i), params,
                             BiasMode::kIfPresent, BiasMode::kIfPresent));
    ASSIGN_OR_RETURN(
        b.post_attention_norm,
        RmsNormLayer::Load(loader, absl::StrCat(p, "post_attention_layernorm"),
                           hidden, eps, norm_offset));
    if (sandwich_norms_) {
      ASSIGN_OR_RETURN(b.pre_ff_norm,
                       RmsNormLayer::Load(
                           loader, absl::StrCat(p, "pre_feedforward_layernorm"),
                           hidden, eps, norm_offset));
      ASSIGN_OR_RETURN(
          b.post_ff_norm,
          RmsNormLayer::Load(loader,
                             absl::StrCat(p, "post_feedforward_layernorm"),
                             hidden, eps, norm_offset));
    }
    ASSIGN_OR_RETURN(b.mlp, GatedMlp::Load(loader, absl::StrCat(p, "mlp."),
                                           hidden, config.intermediate_size,
                                           act, BiasMode::kIfPresent));
  }
  ASSIGN_OR_RETURN(final_norm_, RmsNormLayer::Load(loader, loader.Base("norm"),
                                                   hidden, eps, norm_offset));
  if (lm_head) {
    if (tied) {
      ASSIGN_OR_RETURN(TensorView head, loader.WithPacked(embed_.table()));
      lm_head_ = LinearLayer::FromViews(head, TensorView{});
    } else {
      ASSIGN_OR_RETURN(lm_head_, LinearLayer::Load(loader, "lm_head", vocab,
                                                   hidden, BiasMode::kNone));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorView> DecoderModel::Forward(const ForwardContext& ctx) {
  const ForwardBatch& batch = *ctx.batch;
  const int64_t tokens = batch.num_tokens;
  const int64_t hidden = info_.hidden_size;
  ASSIGN_OR_RETURN(TensorView residual,
                   ctx.ws->Get(WsSlot::kResidual, tokens, hidden));
  ASSIGN_OR_RETURN(TensorView x, ctx.ws->Get(WsSlot::kHidden, tokens, hidden));
  ASSIGN_OR_RETURN(TensorView tmp, ctx.ws->Get(WsSlot::kProj, tokens, hidden));

  // RoPE angles once per step, shared by every layer. Host memory: the
  // runner only drives host-accessible devices.
  RETURN_IF_ERROR(ComputeCosSin(batch));
  const TensorView cos_sin = TensorView::Contiguous(
      cos_sin_.data(), DType::kF32, {tokens, rope_.rotary_dim()});
  TensorView local_cos_sin;
  if (has_local_rope_) {
    RETURN_IF_ERROR(
        local_rope_.ComputeCosSin(batch.rope_positions, &local_cos_sin_));
    local_cos_sin = TensorView::Contiguous(local_cos_sin_.data(), DType::kF32,
                                           {tokens, local_rope_.rotary_dim()});
  }

  RETURN_IF_ERROR(embed_.Forward(ctx.exec, batch.token_ids, residual));
  if (embedding_multiplier_ != 1.0f) {
    // Gemma: embeddings times sqrt(hidden) (host memory, see above).
    float* r = residual.as<float>();
    for (int64_t i = 0; i < tokens * hidden; ++i) r[i] *= embedding_multiplier_;
  }
  if (blocks_.empty()) {
    RETURN_IF_ERROR(final_norm_.Forward(ctx.exec, residual, x));
    return x;
  }
  RETURN_IF_ERROR(blocks_[0].input_norm.Forward(ctx.exec, residual, x));
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    const TensorView& rot = b.local_rope ? local_cos_sin : cos_sin;
    RETURN_IF_ERROR(b.attention.Forward(ctx, x, b.rope ? rot : TensorView{},
                                        rope_.config().style, tmp));
    if (sandwich_norms_) {
      RETURN_IF_ERROR(b.post_attention_norm.Forward(ctx.exec, tmp, tmp));
      RETURN_IF_ERROR(b.pre_ff_norm.AddForward(ctx.exec, tmp, residual, x));
      RETURN_IF_ERROR(b.mlp.Forward(ctx, x, tmp));
      RETURN_IF_ERROR(b.post_ff_norm.Forward(ctx.exec, tmp, tmp));
    } else {
      RETURN_IF_ERROR(
          b.post_attention_norm.AddForward(ctx.exec, tmp, residual, x));
      RETURN_IF_ERROR(b.mlp.Forward(ctx, x, tmp));
    }
    const RmsNormLayer& next_norm =
        i + 1 < blocks_.size() ? blocks_[i + 1].input_norm : final_norm_;
    RETURN_IF_ERROR(next_norm.AddForward(ctx.exec, tmp, residual, x));
  }
  return x;
}

absl::Status DecoderModel::ComputeCosSin(const ForwardBatch& batch) {
  const RopeScalingType type = rope_.config().scaling.type;
  if (type != RopeScalingType::kDynamicNtk &&
      type != RopeScalingType::kLongRope) {
    return rope_.ComputeCosSin(batch.rope_positions, &cos_sin_);
  }
  // Frequencies that depend on the length (dynamic NTK, LongRoPE) follow
  // each sequence's own length (its largest position in the step + 1), as
  // that sequence decoded alone would; a batch-wide length would make one
  // long sequence switch the others' frequencies.
  const int64_t dim = rope_.rotary_dim();
  cos_sin_.resize(static_cast<size_t>(batch.num_tokens * dim));
  const int32_t* cu = batch.cu_seqlens.as<const int32_t>();
  std::vector<float> part;
  for (int64_t s = 0; s < batch.num_seqs; ++s) {
    const int32_t begin = cu[s];
    const int32_t end = cu[s + 1];
    if (end <= begin) continue;
    RETURN_IF_ERROR(rope_.ComputeCosSin(
        batch.rope_positions.subspan(static_cast<size_t>(begin),
                                     static_cast<size_t>(end - begin)),
        &part));
    std::copy(part.begin(), part.end(),
              cos_sin_.begin() + static_cast<int64_t>(begin) * dim);
  }
  return absl::OkStatus();
}

absl::Status DecoderModel::ComputeLogits(const ForwardContext& ctx,
                                         const TensorView& rows,
                                         const TensorView& out) {
  if (!info_.has_lm_head) return Model::ComputeLogits(ctx, rows, out);
  RETURN_IF_ERROR(lm_head_.Forward(ctx.exec, rows, out));
  if (final_logit_softcap_ > 0) {
    // Gemma 2: cap * tanh(logits / cap) (host memory, as in Forward).
    const float cap = final_logit_softcap_;
    for (int64_t r = 0; r < out.shape[0]; ++r) {
      float* l = out.as<float>() + r * out.strides[0];
      for (int64_t j = 0; j < out.shape[1]; ++j) {
        l[j] = cap * std::tanh(l[j] / cap);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RopeConfig> RopeConfigFromModelConfig(
    const ModelConfig& config) {
  RopeConfig rope;
  rope.head_dim = static_cast<int>(config.head_dim);
  // transformers: int(head_dim * partial_rotary_factor).
  rope.rotary_dim = static_cast<int>(static_cast<double>(config.head_dim) *
                                     config.partial_rotary_factor);
  rope.theta = config.rope_theta > 0 ? config.rope_theta : 10000.0;
  rope.max_position_embeddings = config.max_position_embeddings;
  rope.style =
      config.rope_interleaved ? RopeStyle::kGptJ : RopeStyle::kNeox;
  rope.scaling.freq_factors = config.rope_freq_factors;
  if (!config.rope_scaling.has_value()) return rope;
  const RopeScalingConfig& in = *config.rope_scaling;
  RopeScaling& s = rope.scaling;
  if (in.type == "linear") {
    s.type = RopeScalingType::kLinear;
  } else if (in.type == "dynamic") {
    s.type = RopeScalingType::kDynamicNtk;
  } else if (in.type == "llama3") {
    s.type = RopeScalingType::kLlama3;
  } else if (in.type == "yarn") {
    s.type = RopeScalingType::kYarn;
  } else if (in.type == "longrope") {
    s.type = RopeScalingType::kLongRope;
    s.short_factors = in.short_factor;
    s.long_factors = in.long_factor;
  } else if (in.type.empty() || in.type == "default") {
    return rope;
  } else {
    return absl::UnimplementedError(
        absl::StrCat("rope_scaling type \"", in.type, "\" is not supported"));
  }
  s.factor = in.factor;
  s.original_max_position_embeddings = in.original_max_position_embeddings;
  s.low_freq_factor = in.low_freq_factor;
  s.high_freq_factor = in.high_freq_factor;
  s.beta_fast = in.beta_fast;
  s.beta_slow = in.beta_slow;
  s.mscale = in.mscale.value_or(0.0);
  s.mscale_all_dim = in.mscale_all_dim.value_or(0.0);
  s.attention_factor = in.attention_factor.value_or(0.0);
  return rope;
}

absl::StatusOr<std::unique_ptr<Model>> CreateDecoderForCausalLM(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options) {
  return DecoderModel::Create(config, weights, options, /*lm_head=*/true);
}

absl::StatusOr<std::unique_ptr<Model>> CreateDecoderModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options) {
  return DecoderModel::Create(config, weights, options, /*lm_head=*/false);
}

}  // namespace inferd
