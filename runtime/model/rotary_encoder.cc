#include "runtime/model/rotary_encoder.h"

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

// One family's tensor names: the embedding norm and, per layer (after
// "<layers><i>."), the attention, MLP and the two norms. `qkv` non-empty:
// q|k|v stored as one projection; `up_gate` non-empty: up and gate stored
// as one, up first.
struct RotaryEncoderNames {
  std::string embedding_norm;
  std::string layers;
  std::string qkv, q, k, v, o;
  std::string gate, up, down;
  std::string attention_norm, mlp_norm;
  std::string up_gate;
};

// transformers' own layout (its NomicBertModel and GteModel).
RotaryEncoderNames TransformersNames() {
  return {"embeddings.LayerNorm", "layers.", "", "self_attn.q_proj",
          "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
          "post_attention_layernorm", "post_mlp_layernorm", ""};
}

// nomic's remote code (the NomicBERT checkpoints on the Hub).
RotaryEncoderNames NomicRemoteNames() {
  return {"emb_ln", "encoder.layers.", "attn.Wqkv", "", "", "",
          "attn.out_proj", "mlp.fc12", "mlp.fc11", "mlp.fc2",
          "norm1", "norm2", ""};
}

// Alibaba's remote code for GTE "new" models (gte-base-en-v1.5,
// gte-multilingual-base, snowflake-arctic-embed-m-v2.0).
RotaryEncoderNames GteRemoteNames() {
  return {"embeddings.LayerNorm", "encoder.layer.", "attention.qkv_proj", "",
          "", "", "attention.o_proj", "", "", "mlp.down_proj",
          "attn_ln", "mlp_ln", "mlp.up_gate_proj"};
}

// The layout of the checkpoint: the remote code's when its first tensors
// are there, else transformers'.
RotaryEncoderNames DetectNames(WeightLoader& loader) {
  if (loader.Has(loader.Base("emb_ln.weight"))) return NomicRemoteNames();
  if (loader.Has(loader.Base("encoder.layer.0.attention.qkv_proj.weight"))) {
    return GteRemoteNames();
  }
  return TransformersNames();
}

class RotaryEncoder : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Create(
      const ModelConfig& config, const WeightStore& weights,
      const ModelLoadOptions& options);

  absl::StatusOr<TensorView> Forward(const ForwardContext& ctx) override;

 private:
  struct Block {
    AttentionLayer attention;
    LayerNormLayer attention_norm;
    GatedMlp mlp;
    LayerNormLayer mlp_norm;
  };

  explicit RotaryEncoder(RopeCache rope) : rope_(std::move(rope)) {}
  absl::Status Load(const ModelConfig& config, const WeightStore& weights,
                    const ModelLoadOptions& options);

  RopeCache rope_;
  std::vector<float> cos_sin_;  // [T, rotary_dim] of the current step
  EmbeddingLayer word_;
  EmbeddingLayer token_type_;
  bool has_token_types_ = false;
  LayerNormLayer embedding_norm_;
  std::vector<Block> blocks_;
};

absl::StatusOr<std::unique_ptr<Model>> RotaryEncoder::Create(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options) {
  RETURN_IF_ERROR(CheckEncoderConfig(config));
  ASSIGN_OR_RETURN(RopeConfig rope_config, RopeConfigFromModelConfig(config));
  ASSIGN_OR_RETURN(RopeCache rope, RopeCache::Create(rope_config));
  std::unique_ptr<RotaryEncoder> model(new RotaryEncoder(std::move(rope)));
  RETURN_IF_ERROR(model->Load(config, weights, options));
  return std::unique_ptr<Model>(std::move(model));
}

absl::Status RotaryEncoder::Load(const ModelConfig& config,
                                 const WeightStore& weights,
                                 const ModelLoadOptions& options) {
  const int64_t hidden = config.hidden_size;
  const int64_t heads = config.num_attention_heads;
  const int64_t head_dim = config.head_dim;
  const float eps = static_cast<float>(config.layer_norm_eps);
  ASSIGN_OR_RETURN(Activation act, ParseActivation(config.hidden_act));

  // Rotary positions have no table: the trained context bounds them.
  info_ = EncoderInfo(config);

  WeightLoader loader(&weights, options.device, options.compute_dtype,
                      &weights_);
  ConfigureEncoderLoader(options, loader);
  loader.set_fuse_qkv(true);
  RETURN_IF_ERROR(loader.DetectPrefix("embeddings.word_embeddings.weight"));
  const RotaryEncoderNames names = DetectNames(loader);
  ASSIGN_OR_RETURN(word_,
                   EmbeddingLayer::Load(
                       loader, loader.Base("embeddings.word_embeddings.weight"),
                       config.vocab_size, hidden));
  const std::string type_name =
      loader.Base("embeddings.token_type_embeddings.weight");
  has_token_types_ = config.type_vocab_size > 0 && loader.Has(type_name);
  if (has_token_types_) {
    ASSIGN_OR_RETURN(token_type_,
                     EmbeddingLayer::Load(loader, type_name,
                                          config.type_vocab_size, hidden));
  }
  ASSIGN_OR_RETURN(embedding_norm_,
                   LayerNormLayer::Load(loader,
                                        loader.Base(names.embedding_norm),
                                        hidden, eps));

  AttentionParams params;
  params.num_heads = static_cast<int>(heads);
  params.num_kv_heads = static_cast<int>(config.num_key_value_heads);
  params.head_dim = static_cast<int>(head_dim);
  params.causal = false;
  params.bf16_products = options.compute_dtype == DType::kBF16 ||
                         options.compute_dtype == DType::kI8;
  blocks_.resize(static_cast<size_t>(config.num_hidden_layers));
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    Block& b = blocks_[static_cast<size_t>(i)];
    const std::string p = loader.Base(absl::StrCat(names.layers, i, "."));
    AttentionLayer::Names an;
    if (!names.qkv.empty()) {
      an.qkv = p + names.qkv;
    } else {
      an.q = p + names.q;
      an.k = p + names.k;
      an.v = p + names.v;
    }
    an.o = p + names.o;
    ASSIGN_OR_RETURN(b.attention,
                     AttentionLayer::Load(loader, an, hidden,
                                          static_cast<int>(i), params,
                                          BiasMode::kIfPresent,
                                          BiasMode::kIfPresent));
    ASSIGN_OR_RETURN(b.attention_norm,
                     LayerNormLayer::Load(loader, p + names.attention_norm,
                                          hidden, eps));
    if (!names.up_gate.empty()) {
      ASSIGN_OR_RETURN(
          b.mlp, GatedMlp::LoadFused(loader, p + names.up_gate, p + names.down,
                                     hidden, config.intermediate_size, act,
                                     /*up_first=*/true, BiasMode::kIfPresent));
    } else {
      ASSIGN_OR_RETURN(
          b.mlp, GatedMlp::LoadNamed(loader, p + names.gate, p + names.up,
                                     p + names.down, hidden,
                                     config.intermediate_size, act,
                                     BiasMode::kIfPresent));
    }
    ASSIGN_OR_RETURN(b.mlp_norm, LayerNormLayer::Load(
                                     loader, p + names.mlp_norm, hidden, eps));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorView> RotaryEncoder::Forward(const ForwardContext& ctx) {
  const ForwardBatch& batch = *ctx.batch;
  const int64_t tokens = batch.num_tokens;
  const int64_t hidden = info_.hidden_size;
  ASSIGN_OR_RETURN(TensorView h, ctx.ws->Get(WsSlot::kHidden, tokens, hidden));
  ASSIGN_OR_RETURN(TensorView tmp, ctx.ws->Get(WsSlot::kProj, tokens, hidden));
  // RoPE angles once per step (host memory: the runner drives
  // host-accessible devices only), shared by every layer.
  RETURN_IF_ERROR(rope_.ComputeCosSin(batch.rope_positions, &cos_sin_));
  const TensorView cos_sin = TensorView::Contiguous(
      cos_sin_.data(), DType::kF32, {tokens, rope_.rotary_dim()});

  RETURN_IF_ERROR(word_.Forward(ctx.exec, batch.token_ids, h));
  if (has_token_types_) {
    RETURN_IF_ERROR(token_type_.Forward(ctx.exec, batch.token_type_ids, tmp));
    RETURN_IF_ERROR(embedding_norm_.AddForward(ctx.exec, tmp, h, h));
  } else {
    RETURN_IF_ERROR(embedding_norm_.Forward(ctx.exec, h, h));
  }
  for (const Block& b : blocks_) {
    RETURN_IF_ERROR(
        b.attention.Forward(ctx, h, cos_sin, rope_.config().style, tmp));
    RETURN_IF_ERROR(b.attention_norm.AddForward(ctx.exec, tmp, h, h));
    RETURN_IF_ERROR(b.mlp.Forward(ctx, h, tmp));
    RETURN_IF_ERROR(b.mlp_norm.AddForward(ctx.exec, tmp, h, h));
  }
  return h;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateRotaryEncoderModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options) {
  return RotaryEncoder::Create(config, weights, options);
}

}  // namespace inferd
