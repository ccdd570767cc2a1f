#include "runtime/model/bert.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"
#include "runtime/model/layers.h"

namespace inferd {
namespace {

enum class BertHead { kNone, kPoolerClassifier, kRobertaClassifier };

class BertEncoder : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Create(
      const ModelConfig& config, const WeightStore& weights,
      const ModelLoadOptions& options, BertHead head);

  absl::StatusOr<TensorView> Forward(const ForwardContext& ctx) override;
  absl::Status Classify(const ForwardContext& ctx, const TensorView& rows,
                        const TensorView& out) override;

 private:
  struct Block {
    AttentionLayer attention;
    LayerNormLayer attention_norm;
    GeluMlp mlp;
    LayerNormLayer output_norm;
  };

  BertEncoder() = default;
  absl::Status Load(const ModelConfig& config, const WeightStore& weights,
                    const ModelLoadOptions& options, BertHead head);

  BertHead head_ = BertHead::kNone;
  EmbeddingLayer word_;
  EmbeddingLayer position_;
  EmbeddingLayer token_type_;
  bool has_token_types_ = false;
  LayerNormLayer embedding_norm_;
  std::vector<Block> blocks_;
  // kPoolerClassifier: pooler (tanh) then classifier_.
  // kRobertaClassifier: head_dense_ (tanh) then classifier_ (out_proj).
  LinearLayer head_dense_;
  LinearLayer classifier_;
};

absl::StatusOr<std::unique_ptr<Model>> BertEncoder::Create(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options, BertHead head) {
  if (!config.IsEncoder()) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.architectures[0], " needs an encoder config; model_type ",
        config.model_type, " is parsed as a decoder"));
  }
  std::unique_ptr<BertEncoder> model(new BertEncoder());
  RETURN_IF_ERROR(model->Load(config, weights, options, head));
  return std::unique_ptr<Model>(std::move(model));
}

absl::Status BertEncoder::Load(const ModelConfig& config,
                               const WeightStore& weights,
                               const ModelLoadOptions& options, BertHead head) {
  head_ = head;
  const int64_t hidden = config.hidden_size;
  const int64_t heads = config.num_attention_heads;
  if (heads <= 0 || hidden % heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden_size ", hidden,
                     " is not a multiple of num_attention_heads ", heads));
  }
  const float eps = static_cast<float>(config.layer_norm_eps);
  ASSIGN_OR_RETURN(Activation act, ParseActivation(config.hidden_act));

  info_.architecture = config.architectures[0];
  info_.is_encoder = true;
  info_.causal = false;
  info_.hidden_size = hidden;
  info_.vocab_size = config.vocab_size;
  info_.max_positions =
      config.max_position_embeddings - config.position_id_offset();
  info_.type_vocab_size = config.type_vocab_size;
  info_.position_offset = config.position_id_offset();
  info_.num_layers = config.num_hidden_layers;
  info_.num_heads = heads;
  info_.num_kv_heads = heads;
  info_.head_dim = hidden / heads;
  info_.intermediate_size = config.intermediate_size;

  WeightLoader loader(&weights, options.device, options.compute_dtype,
                      &weights_);
  // Packed GEMM weights (no repacking per forward pass: ~10% of a small
  // encoder's time) for up to 1 GiB of copies; larger models pack the
  // first layers only.
  loader.set_pack_linear_budget(int64_t{1} << 30);
  loader.set_fuse_qkv(true);
  loader.set_int8_panels(options.activations == ActivationPrecision::kInt8);
  RETURN_IF_ERROR(loader.DetectPrefix("embeddings.word_embeddings.weight"));
  ASSIGN_OR_RETURN(word_,
                   EmbeddingLayer::Load(
                       loader, loader.Base("embeddings.word_embeddings.weight"),
                       config.vocab_size, hidden));
  ASSIGN_OR_RETURN(
      position_,
      EmbeddingLayer::Load(loader,
                           loader.Base("embeddings.position_embeddings.weight"),
                           config.max_position_embeddings, hidden));
  const std::string type_name =
      loader.Base("embeddings.token_type_embeddings.weight");
  has_token_types_ = loader.Has(type_name);
  if (has_token_types_) {
    ASSIGN_OR_RETURN(token_type_,
                     EmbeddingLayer::Load(loader, type_name,
                                          config.type_vocab_size, hidden));
  }
  ASSIGN_OR_RETURN(
      embedding_norm_,
      LayerNormLayer::Load(loader, loader.Base("embeddings.LayerNorm"), hidden,
                           eps));

  AttentionParams params;
  params.num_heads = static_cast<int>(heads);
  params.num_kv_heads = static_cast<int>(heads);
  params.head_dim = static_cast<int>(hidden / heads);
  params.causal = false;
  // BF16 weights: attention's products in BF16 too (vdpbf16ps where the
  // CPU has it), as the Linear layers' activations already are.
  params.bf16_products = options.compute_dtype == DType::kBF16 || options.compute_dtype == DType::kI8;
  blocks_.resize(static_cast<size_t>(config.num_hidden_layers));
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    Block& b = blocks_[static_cast<size_t>(i)];
    const std::string p = loader.Base(absl::StrCat("encoder.layer.", i, "."));
    AttentionLayer::Names names;
    names.q = absl::StrCat(p, "attention.self.query");
    names.k = absl::StrCat(p, "attention.self.key");
    names.v = absl::StrCat(p, "attention.self.value");
    names.o = absl::StrCat(p, "attention.output.dense");
    ASSIGN_OR_RETURN(
        b.attention,
        AttentionLayer::Load(loader, names, hidden, static_cast<int>(i), params,
                             BiasMode::kIfPresent, BiasMode::kIfPresent));
    ASSIGN_OR_RETURN(b.attention_norm,
                     LayerNormLayer::Load(
                         loader, absl::StrCat(p, "attention.output.LayerNorm"),
                         hidden, eps));
    ASSIGN_OR_RETURN(
        b.mlp, GeluMlp::Load(loader, absl::StrCat(p, "intermediate.dense"),
                             absl::StrCat(p, "output.dense"), hidden,
                             config.intermediate_size, act));
    ASSIGN_OR_RETURN(
        b.output_norm,
        LayerNormLayer::Load(loader, absl::StrCat(p, "output.LayerNorm"),
                             hidden, eps));
  }

  const int64_t labels = config.num_labels;
  switch (head) {
    case BertHead::kNone:
      break;
    case BertHead::kPoolerClassifier: {
      ASSIGN_OR_RETURN(head_dense_,
                       LinearLayer::Load(loader, loader.Base("pooler.dense"),
                                         hidden, hidden, BiasMode::kRequired));
      ASSIGN_OR_RETURN(classifier_,
                       LinearLayer::Load(loader, "classifier", labels, hidden,
                                         BiasMode::kIfPresent));
      break;
    }
    case BertHead::kRobertaClassifier: {
      ASSIGN_OR_RETURN(head_dense_,
                       LinearLayer::Load(loader, "classifier.dense", hidden,
                                         hidden, BiasMode::kRequired));
      ASSIGN_OR_RETURN(classifier_,
                       LinearLayer::Load(loader, "classifier.out_proj", labels,
                                         hidden, BiasMode::kIfPresent));
      break;
    }
  }
  if (head != BertHead::kNone) {
    info_.has_classifier = true;
    info_.num_labels = labels;
    info_.classifier_token = ClassifierToken::kFirst;
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorView> BertEncoder::Forward(const ForwardContext& ctx) {
  const ForwardBatch& batch = *ctx.batch;
  const int64_t tokens = batch.num_tokens;
  const int64_t hidden = info_.hidden_size;
  ASSIGN_OR_RETURN(TensorView h, ctx.ws->Get(WsSlot::kHidden, tokens, hidden));
  ASSIGN_OR_RETURN(TensorView tmp, ctx.ws->Get(WsSlot::kProj, tokens, hidden));

  RETURN_IF_ERROR(word_.Forward(ctx.exec, batch.token_ids, h));
  RETURN_IF_ERROR(position_.Forward(ctx.exec, batch.positions, tmp));
  if (has_token_types_) {
    RETURN_IF_ERROR(Add(ctx.exec, h, tmp, h));
    RETURN_IF_ERROR(token_type_.Forward(ctx.exec, batch.token_type_ids, tmp));
  }
  RETURN_IF_ERROR(embedding_norm_.AddForward(ctx.exec, tmp, h, h));

  const TensorView no_rope;
  for (const Block& b : blocks_) {
    RETURN_IF_ERROR(
        b.attention.Forward(ctx, h, no_rope, RopeStyle::kNeox, tmp));
    RETURN_IF_ERROR(b.attention_norm.AddForward(ctx.exec, tmp, h, h));
    RETURN_IF_ERROR(b.mlp.Forward(ctx, h, tmp));
    RETURN_IF_ERROR(b.output_norm.AddForward(ctx.exec, tmp, h, h));
  }
  return h;
}

absl::Status BertEncoder::Classify(const ForwardContext& ctx,
                                   const TensorView& rows,
                                   const TensorView& out) {
  if (head_ == BertHead::kNone) return Model::Classify(ctx, rows, out);
  ASSIGN_OR_RETURN(TensorView tmp, ctx.ws->Get(WsSlot::kHeadTmp, rows.shape[0],
                                               info_.hidden_size));
  RETURN_IF_ERROR(head_dense_.Forward(ctx.exec, rows, tmp));
  RETURN_IF_ERROR(Activate(ctx.exec, Activation::kTanh, tmp, tmp));
  return classifier_.Forward(ctx.exec, tmp, out);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateBertModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options) {
  return BertEncoder::Create(config, weights, options, BertHead::kNone);
}

absl::StatusOr<std::unique_ptr<Model>> CreateBertForSequenceClassification(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options) {
  return BertEncoder::Create(config, weights, options,
                             BertHead::kPoolerClassifier);
}

absl::StatusOr<std::unique_ptr<Model>>
CreateXlmRobertaForSequenceClassification(const ModelConfig& config,
                                          const WeightStore& weights,
                                          const ModelLoadOptions& options) {
  return BertEncoder::Create(config, weights, options,
                             BertHead::kRobertaClassifier);
}

}  // namespace inferd
