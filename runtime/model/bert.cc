#include "runtime/model/bert.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"
#include "runtime/model/encoder_common.h"
#include "runtime/model/layers.h"

namespace inferd {
namespace {

enum class BertHead { kNone, kPoolerClassifier, kRobertaClassifier };

// Where a family keeps its tensors (names under the base prefix; a layer's
// under "encoder.layer.<i>.").
struct EncoderNames {
  const char* q;
  const char* k;
  const char* v;
  const char* o;
  const char* attention_norm;
  // The relative-position bias table [buckets, heads], or null.
  const char* relative_bias;
  // The MLP: up (BERT's intermediate.dense, or JinaBERT's gated_layers:
  // gate | up stacked, gate first), down and the norm after it.
  const char* mlp_up;
  const char* mlp_down;
  const char* mlp_norm;
  bool gated_mlp;
};

constexpr EncoderNames kBertNames = {
    "attention.self.query", "attention.self.key", "attention.self.value",
    "attention.output.dense", "attention.output.LayerNorm", nullptr,
    "intermediate.dense", "output.dense", "output.LayerNorm", false};
constexpr EncoderNames kMpnetNames = {
    "attention.attn.q",    "attention.attn.k", "attention.attn.v",
    "attention.attn.o",    "attention.LayerNorm",
    "encoder.relative_attention_bias.weight",
    "intermediate.dense", "output.dense", "output.LayerNorm", false};
// JinaBERT v2 (jina-embeddings-v2): BERT's attention, a GEGLU MLP.
constexpr EncoderNames kJinaNames = {
    "attention.self.query", "attention.self.key", "attention.self.value",
    "attention.output.dense", "attention.output.LayerNorm", nullptr,
    "mlp.gated_layers", "mlp.wo", "mlp.layernorm", true};

// ALiBi's slope per head (Press et al.): for a power of two n, the
// geometric series starting at 2^(-8/n); otherwise the nearest lower power
// of two's slopes, then every other slope of twice that many.
std::vector<double> AlibiSlopes(int64_t heads) {
  auto power_of_2 = [](int64_t n) {
    const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(n)) - 3.0)));
    std::vector<double> out;
    for (int64_t i = 0; i < n; ++i) out.push_back(start * std::pow(start, static_cast<double>(i)));
    return out;
  };
  int64_t lower = 1;
  while (lower * 2 <= heads) lower *= 2;
  std::vector<double> slopes = power_of_2(lower);
  if (lower == heads) return slopes;
  const std::vector<double> twice = power_of_2(2 * lower);
  for (size_t i = 0; i < twice.size() && static_cast<int64_t>(slopes.size()) < heads; i += 2) {
    slopes.push_back(twice[i]);
  }
  return slopes;
}

// MPNet's bucket of the relative position `rel` (key minus query): half the
// buckets per direction (keys after the query in the upper half), exact
// distances below a quarter of them, log-spaced ones up to `max_distance`,
// the last bucket beyond. Computed in float32 as transformers does, so
// distances on a bucket boundary land where they land there.
int64_t RelativeBucket(int64_t rel, int64_t buckets, int64_t max_distance) {
  const int64_t half = buckets / 2;
  const int64_t base = rel > 0 ? half : 0;
  const int64_t n = std::abs(rel);
  const int64_t exact = half / 2;
  if (n < exact) return base + n;
  const float log_ratio = std::log(static_cast<float>(n) / static_cast<float>(exact));
  const float log_range = static_cast<float>(
      std::log(static_cast<double>(max_distance) / static_cast<double>(exact)));
  const float scaled = log_ratio / log_range * static_cast<float>(half - exact);
  return base + std::min<int64_t>(exact + static_cast<int64_t>(scaled), half - 1);
}

class BertEncoder : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Create(
      const ModelConfig& config, const WeightStore& weights,
      const ModelLoadOptions& options, BertHead head,
      const EncoderNames& names = kBertNames);

  absl::StatusOr<TensorView> Forward(const ForwardContext& ctx) override;
  absl::Status Classify(const ForwardContext& ctx, const TensorView& rows,
                        const TensorView& out) override;

 private:
  struct Block {
    AttentionLayer attention;
    LayerNormLayer attention_norm;
    GeluMlp mlp;
    GatedMlp gated_mlp;  // EncoderNames::gated_mlp
    LayerNormLayer output_norm;
  };

  BertEncoder() = default;
  absl::Status Load(const ModelConfig& config, const WeightStore& weights,
                    const ModelLoadOptions& options, BertHead head,
                    const EncoderNames& names);
  // The relative-position bias of every layer (AttentionParams'
  // relative_bias) from the table `name` [buckets, heads].
  absl::Status LoadRelativeBias(const ModelConfig& config,
                                const WeightStore& store, WeightLoader& loader,
                                const std::string& name, int64_t heads);

  BertHead head_ = BertHead::kNone;
  EmbeddingLayer word_;
  EmbeddingLayer position_;
  bool has_positions_ = true;  // false with ALiBi
  bool gated_mlp_ = false;
  EmbeddingLayer token_type_;
  bool has_token_types_ = false;
  LayerNormLayer embedding_norm_;
  std::vector<Block> blocks_;
  // kPoolerClassifier: pooler (tanh) then classifier_.
  // kRobertaClassifier: head_dense_ (tanh) then classifier_ (out_proj).
  LinearLayer head_dense_;
  LinearLayer classifier_;
  // [heads][2 * radius + 1] (AttentionParams::relative_bias); empty without.
  std::vector<float> relative_bias_;
  int relative_radius_ = 0;
};

absl::StatusOr<std::unique_ptr<Model>> BertEncoder::Create(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options, BertHead head,
    const EncoderNames& names) {
  RETURN_IF_ERROR(CheckEncoderConfig(config));
  std::unique_ptr<BertEncoder> model(new BertEncoder());
  RETURN_IF_ERROR(model->Load(config, weights, options, head, names));
  return std::unique_ptr<Model>(std::move(model));
}

absl::Status BertEncoder::Load(const ModelConfig& config,
                               const WeightStore& weights,
                               const ModelLoadOptions& options, BertHead head,
                               const EncoderNames& layer_names) {
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

  info_ = EncoderInfo(config);

  WeightLoader loader(&weights, options.device, options.compute_dtype,
                      &weights_);
  ConfigureEncoderLoader(options, loader);
  loader.set_fuse_qkv(true);
  RETURN_IF_ERROR(loader.DetectPrefix("embeddings.word_embeddings.weight"));
  ASSIGN_OR_RETURN(word_,
                   EmbeddingLayer::Load(
                       loader, loader.Base("embeddings.word_embeddings.weight"),
                       config.vocab_size, hidden));
  // ALiBi (JinaBERT): no position table; a bias by distance instead.
  has_positions_ = config.position_embedding_type != "alibi";
  if (has_positions_) {
    ASSIGN_OR_RETURN(
        position_,
        EmbeddingLayer::Load(
            loader, loader.Base("embeddings.position_embeddings.weight"),
            config.max_position_embeddings, hidden));
  }
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
  if (layer_names.relative_bias != nullptr) {
    RETURN_IF_ERROR(LoadRelativeBias(config, weights, loader,
                                     loader.Base(layer_names.relative_bias),
                                     heads));
  } else if (!has_positions_) {
    // Symmetric ALiBi: -slope * |j - i| up to the longest input.
    const std::vector<double> slopes = AlibiSlopes(heads);
    relative_radius_ = static_cast<int>(config.max_position_embeddings - 1);
    const int64_t width = 2 * int64_t{relative_radius_} + 1;
    relative_bias_.assign(static_cast<size_t>(heads * width), 0.0f);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t rel = -relative_radius_; rel <= relative_radius_; ++rel) {
        relative_bias_[static_cast<size_t>(h * width + rel + relative_radius_)] =
            static_cast<float>(-slopes[static_cast<size_t>(h)] *
                               static_cast<double>(std::abs(rel)));
      }
    }
  }
  if (!relative_bias_.empty()) {
    params.relative_bias = relative_bias_.data();
    params.relative_bias_radius = relative_radius_;
  }
  gated_mlp_ = layer_names.gated_mlp;
  if (loader.Has(loader.Base("encoder.layer.0.attention.self.layer_norm_q.weight"))) {
    return absl::InvalidArgumentError(
        "this JinaBERT checkpoint normalizes queries and keys (layer_norm_q / "
        "layer_norm_k: the qk-post-norm code models), which inferd does not "
        "run yet");
  }
  blocks_.resize(static_cast<size_t>(config.num_hidden_layers));
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    Block& b = blocks_[static_cast<size_t>(i)];
    const std::string p = loader.Base(absl::StrCat("encoder.layer.", i, "."));
    AttentionLayer::Names names;
    names.q = absl::StrCat(p, layer_names.q);
    names.k = absl::StrCat(p, layer_names.k);
    names.v = absl::StrCat(p, layer_names.v);
    names.o = absl::StrCat(p, layer_names.o);
    ASSIGN_OR_RETURN(
        b.attention,
        AttentionLayer::Load(loader, names, hidden, static_cast<int>(i), params,
                             BiasMode::kIfPresent, BiasMode::kIfPresent));
    ASSIGN_OR_RETURN(b.attention_norm,
                     LayerNormLayer::Load(
                         loader, absl::StrCat(p, layer_names.attention_norm),
                         hidden, eps));
    if (gated_mlp_) {
      ASSIGN_OR_RETURN(b.gated_mlp,
                       GatedMlp::LoadFused(loader, p + layer_names.mlp_up,
                                           p + layer_names.mlp_down, hidden,
                                           config.intermediate_size, act,
                                           /*up_first=*/false,
                                           BiasMode::kIfPresent));
    } else {
      ASSIGN_OR_RETURN(
          b.mlp, GeluMlp::Load(loader, p + layer_names.mlp_up,
                               p + layer_names.mlp_down, hidden,
                               config.intermediate_size, act));
    }
    ASSIGN_OR_RETURN(b.output_norm,
                     LayerNormLayer::Load(loader, p + layer_names.mlp_norm,
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

absl::Status BertEncoder::LoadRelativeBias(const ModelConfig& config,
                                           const WeightStore& store,
                                           WeightLoader& loader,
                                           const std::string& name,
                                           int64_t heads) {
  const int64_t buckets = config.relative_attention_buckets;
  const int64_t max_distance = config.relative_attention_max_distance;
  if (buckets < 4 || buckets % 4 != 0 || max_distance < buckets / 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "relative attention needs a multiple of 4 buckets and a max distance "
        "of at least a quarter of them; got ", buckets, " and ",
        max_distance));
  }
  ASSIGN_OR_RETURN(const TensorView stored, store.Get(name));
  if (stored.rank != 2 || stored.shape[1] != heads ||
      stored.shape[0] < buckets) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " is ", stored.DebugString(), "; want [>= ", buckets, ", ",
        heads, "] (buckets x heads)"));
  }
  ASSIGN_OR_RETURN(const TensorView table,
                   loader.F32(name, {stored.shape[0], heads}));
  // Distances at or beyond max_distance share the last bucket, so a table
  // of that radius, clamped, is exact for any length.
  relative_radius_ = static_cast<int>(max_distance);
  const int64_t width = 2 * max_distance + 1;
  relative_bias_.assign(static_cast<size_t>(heads * width), 0.0f);
  const float* w = table.as<const float>();
  for (int64_t rel = -max_distance; rel <= max_distance; ++rel) {
    const int64_t b = RelativeBucket(rel, buckets, max_distance);
    for (int64_t h = 0; h < heads; ++h) {
      relative_bias_[static_cast<size_t>(h * width + rel + max_distance)] =
          w[b * heads + h];
    }
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
  if (has_positions_) {
    RETURN_IF_ERROR(position_.Forward(ctx.exec, batch.positions, tmp));
    if (has_token_types_) {
      RETURN_IF_ERROR(Add(ctx.exec, h, tmp, h));
      RETURN_IF_ERROR(token_type_.Forward(ctx.exec, batch.token_type_ids, tmp));
    }
    RETURN_IF_ERROR(embedding_norm_.AddForward(ctx.exec, tmp, h, h));
  } else if (has_token_types_) {
    RETURN_IF_ERROR(token_type_.Forward(ctx.exec, batch.token_type_ids, tmp));
    RETURN_IF_ERROR(embedding_norm_.AddForward(ctx.exec, tmp, h, h));
  } else {
    RETURN_IF_ERROR(embedding_norm_.Forward(ctx.exec, h, h));
  }

  const TensorView no_rope;
  for (const Block& b : blocks_) {
    RETURN_IF_ERROR(
        b.attention.Forward(ctx, h, no_rope, RopeStyle::kNeox, tmp));
    RETURN_IF_ERROR(b.attention_norm.AddForward(ctx.exec, tmp, h, h));
    if (gated_mlp_) {
      RETURN_IF_ERROR(b.gated_mlp.Forward(ctx, h, tmp));
    } else {
      RETURN_IF_ERROR(b.mlp.Forward(ctx, h, tmp));
    }
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

absl::StatusOr<std::unique_ptr<Model>> CreateMpnetModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options) {
  return BertEncoder::Create(config, weights, options, BertHead::kNone,
                             kMpnetNames);
}

absl::StatusOr<std::unique_ptr<Model>> CreateJinaBertModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options) {
  if (config.position_embedding_type != "alibi") {
    return absl::InvalidArgumentError(absl::StrCat(
        config.architectures[0], " needs position_embedding_type \"alibi\" "
        "(JinaBERT v2); the config says \"", config.position_embedding_type,
        "\""));
  }
  return BertEncoder::Create(config, weights, options, BertHead::kNone,
                             kJinaNames);
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
