// Layers: the building blocks of inferd's model definitions, each a thin
// holder of weight views (see WeightLoader) over the device ops: Linear,
// Embedding, LayerNorm, RmsNorm, Attention (projections + RoPE + the step's
// attention backend + output projection) and the two MLP shapes (BERT's GELU
// MLP, the gated SwiGLU MLP of Llama-style decoders).
// Immutable after Load(); Forward() is const but writes workspace slots, so
// one model runs one step at a time.
#ifndef INFERD_RUNTIME_MODEL_LAYERS_H_
#define INFERD_RUNTIME_MODEL_LAYERS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "device/ops.h"
#include "device/tensor.h"
#include "runtime/model/model.h"
#include "runtime/model/weight_loader.h"

namespace inferd {

// Columns [begin, begin + width) of a 2-D view (no copy).
TensorView ColumnSlice(const TensorView& t, int64_t begin, int64_t width);
// Rows [begin, begin + count) of a 2-D view (no copy).
TensorView RowSlice(const TensorView& t, int64_t begin, int64_t count);

// HF `hidden_act` -> Activation. INVALID_ARGUMENT for unsupported names.
absl::StatusOr<Activation> ParseActivation(absl::string_view hidden_act);

enum class BiasMode { kNone, kIfPresent, kRequired };

class LinearLayer {
 public:
  LinearLayer() = default;
  // Loads `name`.weight [out, in] (and `name`.bias [out] per `bias`) in the
  // loader's linear dtype (WeightLoader::LinearWeight).
  static absl::StatusOr<LinearLayer> Load(WeightLoader& loader,
                                          absl::string_view name, int64_t out,
                                          int64_t in, BiasMode bias);
  // Uses `weight` (and `bias`, possibly empty) as given.
  static LinearLayer FromViews(const TensorView& weight,
                               const TensorView& bias);

  // y [T, out] = x [T, in] · W^T + b.
  absl::Status Forward(const ExecutionContext& ctx, const TensorView& x,
                       const TensorView& y) const;

  int64_t out_features() const { return weight_.shape[0]; }
  int64_t in_features() const { return weight_.shape[1]; }
  const TensorView& weight() const { return weight_; }

 private:
  TensorView weight_;
  TensorView bias_;
};

class EmbeddingLayer {
 public:
  EmbeddingLayer() = default;
  static absl::StatusOr<EmbeddingLayer> Load(
      WeightLoader& loader, absl::string_view name, int64_t rows, int64_t cols,
      absl::optional<DType> want = absl::nullopt);
  // out [T, cols] = table[ids].
  absl::Status Forward(const ExecutionContext& ctx, const TensorView& ids,
                       const TensorView& out) const;
  const TensorView& table() const { return table_; }

 private:
  TensorView table_;
};

class LayerNormLayer {
 public:
  LayerNormLayer() = default;
  // `name`.weight and `name`.bias (or the older gamma/beta names).
  static absl::StatusOr<LayerNormLayer> Load(WeightLoader& loader,
                                             absl::string_view name,
                                             int64_t hidden, float eps);
  absl::Status Forward(const ExecutionContext& ctx, const TensorView& x,
                       const TensorView& out) const;
  // residual += x; out = LayerNorm(residual).
  absl::Status AddForward(const ExecutionContext& ctx, const TensorView& x,
                          const TensorView& residual,
                          const TensorView& out) const;

 private:
  TensorView weight_;
  TensorView bias_;
  float eps_ = 0.0f;
};

class RmsNormLayer {
 public:
  RmsNormLayer() = default;
  // Scales by (weight_offset + `name`.weight): Gemma stores w for 1 + w.
  static absl::StatusOr<RmsNormLayer> Load(WeightLoader& loader,
                                           absl::string_view name,
                                           int64_t hidden, float eps,
                                           float weight_offset = 0.0f);
  absl::Status Forward(const ExecutionContext& ctx, const TensorView& x,
                       const TensorView& out) const;
  // residual += x; out = RmsNorm(residual).
  absl::Status AddForward(const ExecutionContext& ctx, const TensorView& x,
                          const TensorView& residual,
                          const TensorView& out) const;

 private:
  TensorView weight_;
  float eps_ = 0.0f;
};

// Multi-head (grouped-query) self-attention of one layer.
class AttentionLayer {
 public:
  struct Names {
    std::string q, k, v, o;  // Linear names (without ".weight")
    // Non-empty: q|k|v stored as one projection [q_dim + 2 kv_dim, hidden]
    // under this name (Phi-3); q, k and v are then unused.
    std::string qkv;
    // Per-head RMSNorm of queries and keys before RoPE (Qwen3): weight
    // names (without ".weight"), empty for none, and their epsilon.
    std::string q_norm, k_norm;
    float qk_norm_eps = 0.0f;
    float qk_norm_weight_offset = 0.0f;  // see RmsNormLayer::Load
  };
  AttentionLayer() = default;
  // `params` gives heads, kv heads, head_dim, causal and sliding window.
  static absl::StatusOr<AttentionLayer> Load(
      WeightLoader& loader, const Names& names, int64_t hidden, int layer_index,
      const AttentionParams& params, BiasMode qkv_bias, BiasMode o_bias);

  // out [T, hidden] = o_proj(attention(q, k, v)) for x [T, hidden]. With a
  // non-empty cos_sin [T, rotary_dim], q and k are rotated (RoPE) first.
  // Uses workspace slots kQkv and kAttnOut.
  absl::Status Forward(const ForwardContext& ctx, const TensorView& x,
                       const TensorView& cos_sin, RopeStyle rope_style,
                       const TensorView& out) const;

  const AttentionParams& params() const { return params_; }

 private:
  LinearLayer q_, k_, v_, o_;
  // With the loader's fuse_qkv (and q, k, v of one dtype): q|k|v as one
  // GEMM weight [q_dim + 2 kv_dim, hidden]; q_, k_, v_ unused.
  bool fused_ = false;
  LinearLayer qkv_;
  int64_t q_dim_ = 0, kv_dim_ = 0;
  bool qk_norm_ = false;
  RmsNormLayer q_norm_, k_norm_;  // over head_dim, when qk_norm_
  AttentionParams params_;
  int layer_index_ = 0;
};

// BERT's feed-forward block: down(act(up(x))). Uses workspace slot kFfnA.
class GeluMlp {
 public:
  GeluMlp() = default;
  static absl::StatusOr<GeluMlp> Load(WeightLoader& loader,
                                      absl::string_view up_name,
                                      absl::string_view down_name,
                                      int64_t hidden, int64_t intermediate,
                                      Activation act);
  absl::Status Forward(const ForwardContext& ctx, const TensorView& x,
                       const TensorView& out) const;

 private:
  LinearLayer up_, down_;
  Activation act_ = Activation::kGeluErf;
};

// Gated MLP: down(act(gate(x)) * up(x)) (SwiGLU when act is SiLU). Uses
// workspace slots kFfnA and kFfnB.
class GatedMlp {
 public:
  GatedMlp() = default;
  // `prefix`gate_proj / up_proj / down_proj, or `prefix`gate_up_proj (gate
  // and up stacked as one [2 * intermediate, hidden] projection, Phi-3)
  // when the checkpoint has it.
  static absl::StatusOr<GatedMlp> Load(WeightLoader& loader,
                                       absl::string_view prefix, int64_t hidden,
                                       int64_t intermediate, Activation act,
                                       BiasMode bias);
  // The three projections under the given names (NomicBERT's fc12 = gate,
  // fc11 = up, fc2 = down).
  static absl::StatusOr<GatedMlp> LoadNamed(WeightLoader& loader,
                                            absl::string_view gate,
                                            absl::string_view up,
                                            absl::string_view down,
                                            int64_t hidden,
                                            int64_t intermediate,
                                            Activation act, BiasMode bias);
  // Gate and up stacked as one [2 * intermediate, hidden] projection
  // `fused`, up first when `up_first` (GTE's up_gate_proj) else gate first
  // (Phi-3's gate_up_proj); `down` [hidden, intermediate].
  static absl::StatusOr<GatedMlp> LoadFused(WeightLoader& loader,
                                            absl::string_view fused,
                                            absl::string_view down,
                                            int64_t hidden,
                                            int64_t intermediate,
                                            Activation act, bool up_first,
                                            BiasMode bias);
  absl::Status Forward(const ForwardContext& ctx, const TensorView& x,
                       const TensorView& out) const;

 private:
  LinearLayer gate_, up_, down_;
  LinearLayer gate_up_;  // when fused_
  bool fused_ = false;
  bool up_first_ = false;  // fused_ rows: [up | gate]
  Activation act_ = Activation::kSilu;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_LAYERS_H_
