// Decoder rerankers: a causal LM that judges a (query, document) pair from
// the prompt it was trained on, scored by the logits of chosen tokens at the
// prompt's last position (Qwen3-Reranker: "no" / "yes"). A RerankFormat is
// that prompt and those tokens, registered by name (registry kind
// "rerank_format"); a model served with `task=rerank` on a causal LM
// architecture runs the decoder_rerank workflow with the format named by
// its `rerank_format=` option (default qwen3). Immutable; thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_RERANK_FORMAT_H_
#define INFERD_RUNTIME_ENGINE_RERANK_FORMAT_H_

#include <string>
#include <vector>

#include "runtime/common/registry.h"
#include "runtime/engine/workflow.h"
#include "runtime/loader/model_config.h"

namespace inferd {

struct RerankFormat {
  // Tokenized apart, in this order, without special tokens: prefix, the
  // pair (its {instruction}, {query} and {document} replaced), suffix. A
  // pair too long for the model is cut at its end (the document's end),
  // as the reference implementations truncate it. Two markers:
  //   {split}  tokenize the text before and after it apart (formats whose
  //            reference tokenizes "A: query", "\n" and "B: document" one
  //            by one);
  //   {bos}    the model's BOS token (its vocabulary string).
  std::string prefix;
  std::string pair;
  std::string suffix;
  // {instruction}'s value (in the pair, the prefix or the suffix).
  std::string instruction;
  // The score from the last position's logits: logit(tokens[1]) -
  // logit(tokens[0]) for two (its sigmoid is P(tokens[1]) among the two, the
  // judge's probability of "yes"), logit(tokens[0]) for one. Each must be
  // one token of the model's vocabulary.
  std::vector<std::string> score_tokens;

  // The pair text of one document.
  std::string Pair(const std::string& query, const std::string& document) const;
  // Whether the text names {bos}.
  bool UsesBos() const;
  // This format with {bos} spelt as `bos_token` everywhere and
  // {instruction} filled in the prefix and suffix (the pair gets it in
  // Pair, with the request's text).
  RerankFormat ForModel(const std::string& bos_token) const;
};

// Marks the places where a format's text is tokenized apart.
inline constexpr char kRerankSplit[] = "{split}";

// The rerank_format kind's registry.
Registry<RerankFormat>& RerankFormats();

// The format a model uses without a `rerank_format=` option.
inline constexpr char kDefaultRerankFormat[] = "qwen3";

// Whether a model reranks as a decoder (a causal LM whose workflow serves
// rerank), i.e. needs a rerank format.
inline bool UsesRerankFormat(const ModelConfig& config, const Workflow& w) {
  return !config.is_encoder && w.Supports(Task::kRerank);
}

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_RERANK_FORMAT_H_
