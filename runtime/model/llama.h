// Llama-style decoders: LlamaForCausalLM, MistralForCausalLM (sliding-window
// attention), Qwen2ForCausalLM (q/k/v biases, often tied embeddings),
// Qwen3ForCausalLM (q/k norms), SmolLM3ForCausalLM (layers without RoPE),
// Phi3ForCausalLM (fused q|k|v and gate|up, partial rotary, longrope),
// Gemma2ForCausalLM / Gemma3ForCausalLM ((1 + w) norms, four norms per
// block, scaled embeddings, soft caps, local/global RoPE, GeGLU),
// and the same stacks without an LM head (LlamaModel, MistralModel,
// Qwen2Model, ...) used as embedders, optionally bidirectional
// (LLM2Vec-style). Pre-RMSNorm blocks, RoPE (with HF rope scaling), SwiGLU
// MLP.
// Factories only; see model.h for the threading contract.
#ifndef INFERD_RUNTIME_MODEL_LLAMA_H_
#define INFERD_RUNTIME_MODEL_LLAMA_H_

#include <memory>

#include "absl/status/statusor.h"
#include "device/ops.h"
#include "runtime/loader/model_config.h"
#include "runtime/loader/weights.h"
#include "runtime/model/model.h"

namespace inferd {

// With an LM head (lm_head.weight, or the embedding table when tied).
absl::StatusOr<std::unique_ptr<Model>> CreateDecoderForCausalLM(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options);
// Hidden states only.
absl::StatusOr<std::unique_ptr<Model>> CreateDecoderModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options);

// The RoPE parameters of a decoder config (UNIMPLEMENTED for rope types
// inferd does not implement).
absl::StatusOr<RopeConfig> RopeConfigFromModelConfig(const ModelConfig& config);

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_LLAMA_H_
