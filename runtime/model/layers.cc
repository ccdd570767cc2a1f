#include "runtime/model/layers.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"

namespace inferd {

TensorView ColumnSlice(const TensorView& t, int64_t begin, int64_t width) {
  TensorView s = t;
  s.data = static_cast<char*>(t.data) +
           static_cast<size_t>(begin) * DTypeSize(t.dtype);
  s.shape[1] = width;
  return s;
}

TensorView RowSlice(const TensorView& t, int64_t begin, int64_t count) {
  TensorView s = t;
  s.data = static_cast<char*>(t.data) +
           static_cast<size_t>(begin * t.strides[0]) * DTypeSize(t.dtype);
  s.shape[0] = count;
  return s;
}

absl::StatusOr<Activation> ParseActivation(absl::string_view hidden_act) {
  if (hidden_act == "gelu") return Activation::kGeluErf;
  if (hidden_act == "gelu_new" || hidden_act == "gelu_pytorch_tanh") {
    return Activation::kGeluTanh;
  }
  if (hidden_act == "silu" || hidden_act == "swish") return Activation::kSilu;
  if (hidden_act == "relu") return Activation::kRelu;
  if (hidden_act == "tanh") return Activation::kTanh;
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported hidden_act \"", hidden_act, "\""));
}

// ---------------------------------------------------------------------------

absl::StatusOr<LinearLayer> LinearLayer::Load(WeightLoader& loader,
                                              absl::string_view name,
                                              int64_t out, int64_t in,
                                              BiasMode bias) {
  LinearLayer layer;
  ASSIGN_OR_RETURN(layer.weight_, loader.LinearWeight(
                                      absl::StrCat(name, ".weight"), out, in));
  const std::string bias_name = absl::StrCat(name, ".bias");
  if (bias == BiasMode::kRequired ||
      (bias == BiasMode::kIfPresent && loader.Has(bias_name))) {
    ASSIGN_OR_RETURN(layer.bias_, loader.F32(bias_name, {out}));
  }
  return layer;
}

LinearLayer LinearLayer::FromViews(const TensorView& weight,
                                   const TensorView& bias) {
  LinearLayer layer;
  layer.weight_ = weight;
  layer.bias_ = bias;
  return layer;
}

absl::Status LinearLayer::Forward(const ExecutionContext& ctx,
                                  const TensorView& x,
                                  const TensorView& y) const {
  return Linear(ctx, x, weight_, bias_, y);
}

absl::StatusOr<EmbeddingLayer> EmbeddingLayer::Load(
    WeightLoader& loader, absl::string_view name, int64_t rows, int64_t cols,
    absl::optional<DType> want) {
  EmbeddingLayer layer;
  ASSIGN_OR_RETURN(layer.table_, loader.Table(name, rows, cols, want));
  return layer;
}

absl::Status EmbeddingLayer::Forward(const ExecutionContext& ctx,
                                     const TensorView& ids,
                                     const TensorView& out) const {
  return Embedding(ctx, table_, ids, out);
}

absl::StatusOr<LayerNormLayer> LayerNormLayer::Load(WeightLoader& loader,
                                                    absl::string_view name,
                                                    int64_t hidden, float eps) {
  LayerNormLayer layer;
  layer.eps_ = eps;
  std::string weight = absl::StrCat(name, ".weight");
  std::string bias = absl::StrCat(name, ".bias");
  if (!loader.Has(weight) && loader.Has(absl::StrCat(name, ".gamma"))) {
    weight = absl::StrCat(name, ".gamma");
    bias = absl::StrCat(name, ".beta");
  }
  ASSIGN_OR_RETURN(layer.weight_, loader.F32(weight, {hidden}));
  if (loader.Has(bias)) {
    ASSIGN_OR_RETURN(layer.bias_, loader.F32(bias, {hidden}));
  }
  return layer;
}

absl::Status LayerNormLayer::Forward(const ExecutionContext& ctx,
                                     const TensorView& x,
                                     const TensorView& out) const {
  return LayerNorm(ctx, x, weight_, bias_, eps_, out);
}

absl::Status LayerNormLayer::AddForward(const ExecutionContext& ctx,
                                        const TensorView& x,
                                        const TensorView& residual,
                                        const TensorView& out) const {
  return AddLayerNorm(ctx, x, residual, weight_, bias_, eps_, out);
}

absl::StatusOr<RmsNormLayer> RmsNormLayer::Load(WeightLoader& loader,
                                                absl::string_view name,
                                                int64_t hidden, float eps,
                                                float weight_offset) {
  RmsNormLayer layer;
  layer.eps_ = eps;
  const std::string weight = absl::StrCat(name, ".weight");
  if (weight_offset == 0.0f) {
    ASSIGN_OR_RETURN(layer.weight_, loader.F32(weight, {hidden}));
    return layer;
  }
  // A copy (FusedF32 of one vector), offset in place: host memory, as the
  // model runner only drives host-accessible devices.
  ASSIGN_OR_RETURN(layer.weight_, loader.FusedF32({weight}, {hidden}));
  float* w = layer.weight_.as<float>();
  for (int64_t i = 0; i < hidden; ++i) w[i] += weight_offset;
  return layer;
}

absl::Status RmsNormLayer::Forward(const ExecutionContext& ctx,
                                   const TensorView& x,
                                   const TensorView& out) const {
  return RmsNorm(ctx, x, weight_, eps_, out);
}

absl::Status RmsNormLayer::AddForward(const ExecutionContext& ctx,
                                      const TensorView& x,
                                      const TensorView& residual,
                                      const TensorView& out) const {
  return AddRmsNorm(ctx, x, residual, weight_, eps_, out);
}

// ---------------------------------------------------------------------------

absl::StatusOr<AttentionLayer> AttentionLayer::Load(
    WeightLoader& loader, const Names& names, int64_t hidden, int layer_index,
    const AttentionParams& params, BiasMode qkv_bias, BiasMode o_bias) {
  AttentionLayer layer;
  layer.params_ = params;
  layer.layer_index_ = layer_index;
  const int64_t q_dim = int64_t{params.num_heads} * params.head_dim;
  const int64_t kv_dim = int64_t{params.num_kv_heads} * params.head_dim;
  layer.q_dim_ = q_dim;
  layer.kv_dim_ = kv_dim;
  if (!names.qkv.empty()) {
    ASSIGN_OR_RETURN(layer.qkv_,
                     LinearLayer::Load(loader, names.qkv, q_dim + 2 * kv_dim,
                                       hidden, qkv_bias));
    layer.fused_ = true;
  } else if (loader.fuse_qkv()) {
    // Biases all present or all absent (kIfPresent), else no fusion.
    const std::vector<std::string> bias_names = {
        absl::StrCat(names.q, ".bias"), absl::StrCat(names.k, ".bias"),
        absl::StrCat(names.v, ".bias")};
    int present = 0;
    for (const std::string& b : bias_names) present += loader.Has(b) ? 1 : 0;
    const bool with_bias = qkv_bias == BiasMode::kRequired ||
                           (qkv_bias == BiasMode::kIfPresent && present > 0);
    const std::vector<int64_t> outs = {q_dim, kv_dim, kv_dim};
    if (!with_bias || present == 3) {
      ASSIGN_OR_RETURN(
          absl::optional<TensorView> w,
          loader.FusedLinearWeight({absl::StrCat(names.q, ".weight"),
                                    absl::StrCat(names.k, ".weight"),
                                    absl::StrCat(names.v, ".weight")},
                                   outs, hidden));
      if (w.has_value()) {
        TensorView bias;
        if (with_bias) {
          ASSIGN_OR_RETURN(bias, loader.FusedF32(bias_names, outs));
        }
        layer.qkv_ = LinearLayer::FromViews(*w, bias);
        layer.fused_ = true;
      }
    }
  }
  if (!layer.fused_) {
    ASSIGN_OR_RETURN(layer.q_, LinearLayer::Load(loader, names.q, q_dim,
                                                 hidden, qkv_bias));
    ASSIGN_OR_RETURN(layer.k_, LinearLayer::Load(loader, names.k, kv_dim,
                                                 hidden, qkv_bias));
    ASSIGN_OR_RETURN(layer.v_, LinearLayer::Load(loader, names.v, kv_dim,
                                                 hidden, qkv_bias));
  }
  ASSIGN_OR_RETURN(layer.o_,
                   LinearLayer::Load(loader, names.o, hidden, q_dim, o_bias));
  if (!names.q_norm.empty()) {
    layer.qk_norm_ = true;
    ASSIGN_OR_RETURN(
        layer.q_norm_,
        RmsNormLayer::Load(loader, names.q_norm, params.head_dim,
                           names.qk_norm_eps, names.qk_norm_weight_offset));
    ASSIGN_OR_RETURN(
        layer.k_norm_,
        RmsNormLayer::Load(loader, names.k_norm, params.head_dim,
                           names.qk_norm_eps, names.qk_norm_weight_offset));
  }
  return layer;
}

absl::Status AttentionLayer::Forward(const ForwardContext& ctx,
                                     const TensorView& x,
                                     const TensorView& cos_sin,
                                     RopeStyle rope_style,
                                     const TensorView& out) const {
  const int64_t tokens = x.shape[0];
  const int64_t q_dim = q_dim_;
  const int64_t kv_dim = kv_dim_;
  ASSIGN_OR_RETURN(TensorView qkv,
                   ctx.ws->Get(WsSlot::kQkv, tokens, q_dim + 2 * kv_dim));
  const TensorView q = ColumnSlice(qkv, 0, q_dim);
  const TensorView k = ColumnSlice(qkv, q_dim, kv_dim);
  const TensorView v = ColumnSlice(qkv, q_dim + kv_dim, kv_dim);
  if (fused_) {
    RETURN_IF_ERROR(qkv_.Forward(ctx.exec, x, qkv));
  } else {
    RETURN_IF_ERROR(q_.Forward(ctx.exec, x, q));
    RETURN_IF_ERROR(k_.Forward(ctx.exec, x, k));
    RETURN_IF_ERROR(v_.Forward(ctx.exec, x, v));
  }
  if (qk_norm_) {
    // Each head's slice is a [tokens, head_dim] view with the row stride of
    // the fused q|k|v buffer; normalized in place.
    const int64_t hd = params_.head_dim;
    for (int h = 0; h < params_.num_heads; ++h) {
      const TensorView qh = ColumnSlice(q, h * hd, hd);
      RETURN_IF_ERROR(q_norm_.Forward(ctx.exec, qh, qh));
    }
    for (int h = 0; h < params_.num_kv_heads; ++h) {
      const TensorView kh = ColumnSlice(k, h * hd, hd);
      RETURN_IF_ERROR(k_norm_.Forward(ctx.exec, kh, kh));
    }
  }
  if (cos_sin.data != nullptr) {
    RETURN_IF_ERROR(
        ApplyRotary(ctx.exec, q, k, cos_sin, params_.head_dim, rope_style));
  }
  ASSIGN_OR_RETURN(TensorView attn,
                   ctx.ws->Get(WsSlot::kAttnOut, tokens, q_dim));
  RETURN_IF_ERROR(ctx.attention->Forward(ctx.exec, *ctx.batch, layer_index_, q,
                                         k, v, params_, attn));
  return o_.Forward(ctx.exec, attn, out);
}

// ---------------------------------------------------------------------------

absl::StatusOr<GeluMlp> GeluMlp::Load(WeightLoader& loader,
                                      absl::string_view up_name,
                                      absl::string_view down_name,
                                      int64_t hidden, int64_t intermediate,
                                      Activation act) {
  GeluMlp mlp;
  mlp.act_ = act;
  ASSIGN_OR_RETURN(mlp.up_, LinearLayer::Load(loader, up_name, intermediate,
                                              hidden, BiasMode::kIfPresent));
  ASSIGN_OR_RETURN(mlp.down_,
                   LinearLayer::Load(loader, down_name, hidden, intermediate,
                                     BiasMode::kIfPresent));
  return mlp;
}

absl::Status GeluMlp::Forward(const ForwardContext& ctx, const TensorView& x,
                              const TensorView& out) const {
  ASSIGN_OR_RETURN(TensorView inter,
                   ctx.ws->Get(WsSlot::kFfnA, x.shape[0], up_.out_features()));
  RETURN_IF_ERROR(up_.Forward(ctx.exec, x, inter));
  RETURN_IF_ERROR(Activate(ctx.exec, act_, inter, inter));
  return down_.Forward(ctx.exec, inter, out);
}

absl::StatusOr<GatedMlp> GatedMlp::Load(WeightLoader& loader,
                                        absl::string_view prefix,
                                        int64_t hidden, int64_t intermediate,
                                        Activation act, BiasMode bias) {
  GatedMlp mlp;
  mlp.act_ = act;
  const std::string gate_up = absl::StrCat(prefix, "gate_up_proj");
  if (loader.Has(absl::StrCat(gate_up, ".weight"))) {
    return LoadFused(loader, gate_up, absl::StrCat(prefix, "down_proj"),
                     hidden, intermediate, act, /*up_first=*/false, bias);
  }
  return LoadNamed(loader, absl::StrCat(prefix, "gate_proj"),
                   absl::StrCat(prefix, "up_proj"),
                   absl::StrCat(prefix, "down_proj"), hidden, intermediate, act,
                   bias);
}

absl::StatusOr<GatedMlp> GatedMlp::LoadFused(
    WeightLoader& loader, absl::string_view fused, absl::string_view down,
    int64_t hidden, int64_t intermediate, Activation act, bool up_first,
    BiasMode bias) {
  GatedMlp mlp;
  mlp.act_ = act;
  mlp.fused_ = true;
  mlp.up_first_ = up_first;
  ASSIGN_OR_RETURN(mlp.gate_up_, LinearLayer::Load(loader, fused,
                                                   2 * intermediate, hidden,
                                                   bias));
  ASSIGN_OR_RETURN(mlp.down_,
                   LinearLayer::Load(loader, down, hidden, intermediate, bias));
  return mlp;
}

absl::StatusOr<GatedMlp> GatedMlp::LoadNamed(
    WeightLoader& loader, absl::string_view gate, absl::string_view up,
    absl::string_view down, int64_t hidden, int64_t intermediate,
    Activation act, BiasMode bias) {
  GatedMlp mlp;
  mlp.act_ = act;
  ASSIGN_OR_RETURN(mlp.gate_,
                   LinearLayer::Load(loader, gate, intermediate, hidden, bias));
  ASSIGN_OR_RETURN(mlp.up_,
                   LinearLayer::Load(loader, up, intermediate, hidden, bias));
  ASSIGN_OR_RETURN(mlp.down_,
                   LinearLayer::Load(loader, down, hidden, intermediate, bias));
  return mlp;
}

absl::Status GatedMlp::Forward(const ForwardContext& ctx, const TensorView& x,
                               const TensorView& out) const {
  const int64_t tokens = x.shape[0];
  if (fused_) {
    const int64_t inter = down_.in_features();
    ASSIGN_OR_RETURN(TensorView gate_up,
                     ctx.ws->Get(WsSlot::kFfnB, tokens, 2 * inter));
    ASSIGN_OR_RETURN(TensorView act, ctx.ws->Get(WsSlot::kFfnA, tokens, inter));
    RETURN_IF_ERROR(gate_up_.Forward(ctx.exec, x, gate_up));
    if (up_first_) {
      // act(second half) * first half, through column views.
      RETURN_IF_ERROR(GatedActivate(ctx.exec, act_,
                                    ColumnSlice(gate_up, inter, inter),
                                    ColumnSlice(gate_up, 0, inter), act));
    } else {
      // act(first half) * second half.
      RETURN_IF_ERROR(GatedActivate(ctx.exec, act_, gate_up, act));
    }
    return down_.Forward(ctx.exec, act, out);
  }
  const int64_t inter = gate_.out_features();
  ASSIGN_OR_RETURN(TensorView gate, ctx.ws->Get(WsSlot::kFfnA, tokens, inter));
  ASSIGN_OR_RETURN(TensorView up, ctx.ws->Get(WsSlot::kFfnB, tokens, inter));
  RETURN_IF_ERROR(gate_.Forward(ctx.exec, x, gate));
  RETURN_IF_ERROR(up_.Forward(ctx.exec, x, up));
  RETURN_IF_ERROR(GatedActivate(ctx.exec, act_, gate, up, gate));
  return down_.Forward(ctx.exec, gate, out);
}

}  // namespace inferd
