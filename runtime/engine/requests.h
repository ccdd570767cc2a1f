// Plain request/result types the service layer hands to an Engine and gets
// back. No gRPC or protobuf here: service/ converts. Value types.
#ifndef INFERD_RUNTIME_ENGINE_REQUESTS_H_
#define INFERD_RUNTIME_ENGINE_REQUESTS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/chat/chat_template.h"
#include "runtime/gen/sampling_params.h"
#include "runtime/gen/speculative.h"

namespace inferd {

struct RequestTimings {
  double queue_seconds = 0;          // arrival -> first scheduled
  // Prefill workflows: text -> token ids on the submitting thread, and the
  // first scheduled -> results time (model forward passes and pooling).
  double tokenization_seconds = 0;
  double inference_seconds = 0;
  double time_to_first_token_seconds = 0;
  double total_seconds = 0;
};

// ----------------------------------------------------------------- embed

struct EmbedParams {
  std::vector<std::string> texts;              // or
  std::vector<std::vector<int32_t>> token_ids;  // pre-tokenized inputs
  std::optional<bool> normalize;               // unset: model default
  int64_t dimensions = 0;                      // 0: full size
  bool truncate = false;
  bool truncate_left = false;
  std::string pooling;      // "", "cls", "mean", "last"
  std::string prompt_name;  // from config_sentence_transformers.json
  std::string prompt;       // free-form prefix
  // Outputs (EmbedOutputs): the dense vector unless only sparse and/or
  // multi-vector outputs are asked for; all from the same forward pass.
  bool want_dense = true;
  bool want_sparse = false;
  bool want_sparse_tokens = false;  // sparse: the tokens' strings too
  bool want_multi_vector = false;
  absl::Time deadline = absl::InfiniteFuture();
};

// Lexical weights of one input: token id -> weight, sorted by id.
struct SparseVector {
  std::vector<int32_t> token_ids;
  std::vector<float> weights;
  std::vector<std::string> tokens;  // when asked for
};

struct EmbedResult {
  // One per input, input order (empty vectors when want_dense is false).
  std::vector<std::vector<float>> embeddings;
  // want_sparse: one per input.
  std::vector<SparseVector> sparse;
  // want_multi_vector: one per input, [(tokens - 1) x multi_vector_dims]
  // row-major (every token after the first).
  std::vector<std::vector<float>> multi_vectors;
  int64_t multi_vector_dims = 0;
  std::vector<int32_t> tokens;                 // tokens used per input
  int64_t total_tokens = 0;
  RequestTimings timings;
};

// -------------------------------------------------------- classify/rerank

struct ClassifyParams {
  std::vector<std::string> texts;                           // or
  std::vector<std::pair<std::string, std::string>> pairs;   // text pairs
  bool truncate = false;
  bool raw_scores = false;
  absl::Time deadline = absl::InfiniteFuture();
};

struct ClassifyResult {
  // Per input, one score per label (index order): probabilities
  // (softmax, or sigmoid for multi-label) or raw logits.
  std::vector<std::vector<float>> scores;
  int64_t total_tokens = 0;
  RequestTimings timings;
};

struct RerankParams {
  std::string query;
  std::vector<std::string> documents;
  bool truncate = true;  // only_second
  bool raw_scores = false;
  absl::Time deadline = absl::InfiniteFuture();
};

struct RerankResult {
  std::vector<float> scores;  // per document, input order
  int64_t total_tokens = 0;
  RequestTimings timings;
};

// --------------------------------------------------------------- generate

struct GenerateParams {
  std::string request_id;
  std::optional<std::string> prompt;   // or
  std::vector<int32_t> prompt_token_ids;  // or
  // A conversation for the model's chat template.
  std::vector<ChatMessage> messages;
  std::vector<ChatTool> tools;  // for the chat template
  bool add_generation_prompt = true;
  bool add_special_tokens = true;
  SamplingParams sampling;
  bool disable_prefix_cache = false;
  // Prompt-lookup speculative decoding; num_draft_tokens -1 = the server's
  // default.
  SpeculativeParams speculative;
  // The first chunk of each sample carries the prompt's token ids (what
  // an echo of the prompt needs).
  bool return_prompt_token_ids = false;
  absl::Time deadline = absl::InfiniteFuture();
};

struct TokenLogprobValue {
  int32_t token_id = 0;
  float logprob = 0;
};

struct TokenLogprobs {
  TokenLogprobValue sampled;
  std::vector<TokenLogprobValue> top;
};

// One streamed chunk of a generation: of sample `sample_index` when the
// A sample's token counts, on its final chunk.
struct GenerateUsage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // Prompt tokens whose KV came from the prefix cache.
  int64_t cached_prompt_tokens = 0;
  // Speculative decoding: draft tokens verified, and accepted.
  int64_t draft_tokens = 0;
  int64_t accepted_draft_tokens = 0;
};

// request asked for SamplingParams.n > 1. Each sample's last chunk has
// finish != kNone; the request's last one also has more_samples false.
struct GenerateChunk {
  int32_t sample_index = 0;
  // On a sample's final chunk: other samples are still generating, so the
  // call goes on.
  bool more_samples = false;
  // On the request's first chunk (sample 0's first token) when
  // SamplingParams.prompt_logprobs > 0: prompt positions 1.. (the first
  // token has none), `sampled` being the prompt token.
  std::vector<TokenLogprobs> prompt_logprobs;
  // On each sample's first chunk when GenerateParams.return_prompt_token_ids.
  std::vector<int32_t> prompt_token_ids;
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprobs> logprobs;
  FinishReason finish = FinishReason::kNone;
  std::string stop_reason;
  GenerateUsage usage;
  RequestTimings timings;
};

// Called on the engine's thread, in order. Returning quickly matters: the
// engine step waits for it. A final chunk without more_samples, or an
// error status, ends the request; no call follows it.
using GenerateCallback =
    std::function<void(const absl::StatusOr<GenerateChunk>& chunk)>;
template <typename T>
using ResultCallback = std::function<void(absl::StatusOr<T> result)>;

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_REQUESTS_H_
