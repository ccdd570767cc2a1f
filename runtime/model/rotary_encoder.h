// Rotary encoders: bidirectional post-LayerNorm encoders with rotary
// position embeddings instead of absolute ones and a gated MLP: NomicBERT
// (nomic-embed-text) and Alibaba's GTE "new" models (gte-base-en-v1.5,
// gte-multilingual-base). Word (and token-type) embeddings + LayerNorm,
// then per layer x = LN(x + o(attention(rope(q), rope(k), v))),
// x = LN(x + down(act(gate(x)) * up(x))); biases where the checkpoint has
// them. Reads the checkpoints' own tensor names (nomic's remote code: Wqkv,
// fc11 = up, fc12 = gate, norm1, norm2, emb_ln; GTE's: qkv_proj, o_proj,
// up_gate_proj (up first), attn_ln, mlp_ln) and transformers' (q/k/v_proj,
// gate/up/down_proj, post_*_layernorm).
// Factories only; see model.h for the threading contract.
#ifndef INFERD_RUNTIME_MODEL_ROTARY_ENCODER_H_
#define INFERD_RUNTIME_MODEL_ROTARY_ENCODER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/loader/model_config.h"
#include "runtime/loader/weights.h"
#include "runtime/model/model.h"

namespace inferd {

absl::StatusOr<std::unique_ptr<Model>> CreateRotaryEncoderModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options);

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_ROTARY_ENCODER_H_
