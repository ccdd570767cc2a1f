// BERT-style encoders: BertModel, XLMRobertaModel and MPNetModel (absolute position and
// token-type embeddings, post-LayerNorm blocks, GELU MLP), with the
// sequence-classification heads of BertForSequenceClassification (pooler
// dense + tanh + classifier) and XLMRobertaForSequenceClassification
// (classifier.dense + tanh + classifier.out_proj), both on the first token.
// Factories only; see model.h for the threading contract.
#ifndef INFERD_RUNTIME_MODEL_BERT_H_
#define INFERD_RUNTIME_MODEL_BERT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/loader/model_config.h"
#include "runtime/loader/weights.h"
#include "runtime/model/model.h"

namespace inferd {

// The encoder alone (hidden states out): BertModel, XLMRobertaModel and
// RobertaModel (their difference, where positions start, is in the config:
// ModelConfig::position_id_offset). Loads the BERT pooler when present.
absl::StatusOr<std::unique_ptr<Model>> CreateBertModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options);
// MPNetModel (and MPNetForMaskedLM's encoder, sentence-transformers'
// all-mpnet-base-v2): BERT's blocks under MPNet's tensor names, no token
// types, and the relative-position bias shared by every layer
// (ModelConfig::relative_attention_buckets).
absl::StatusOr<std::unique_ptr<Model>> CreateMpnetModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options);
// JinaBertModel / JinaBertForMaskedLM (jina-embeddings-v2): BERT's blocks
// with symmetric ALiBi (-slope * |j - i| per head) instead of a position
// table and a GEGLU MLP (mlp.gated_layers, gate first; mlp.wo;
// mlp.layernorm). The config is BERT's with position_embedding_type
// "alibi".
absl::StatusOr<std::unique_ptr<Model>> CreateJinaBertModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options);
absl::StatusOr<std::unique_ptr<Model>> CreateBertForSequenceClassification(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options);
absl::StatusOr<std::unique_ptr<Model>>
CreateXlmRobertaForSequenceClassification(const ModelConfig& config,
                                          const WeightStore& weights,
                                          const ModelLoadOptions& options);

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_BERT_H_
