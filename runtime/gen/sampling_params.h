// SamplingParams: the per-request generation parameters of the public API
// (inferd.v1.SamplingParams) as a plain runtime struct, and FinishReason.
// Plain value types; no threading concerns.
#ifndef INFERD_RUNTIME_GEN_SAMPLING_PARAMS_H_
#define INFERD_RUNTIME_GEN_SAMPLING_PARAMS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace inferd {

// Mirrors inferd.v1.FinishReason.
enum class FinishReason : uint8_t {
  kNone,       // not finished
  kLength,     // max_tokens or the model's context was reached
  kStop,       // a stop string or stop token matched
  kEos,        // the model produced EOS
  kCancelled,  // client cancel, deadline or drain
  kError,      // the engine failed on this request
};

absl::string_view FinishReasonName(FinishReason reason);

// Structured output (inferd.v1.ResponseFormat): the text the model writes
// must fully match a JSON Schema, a regular expression, one of a list of
// strings or a Lark grammar. Compiled by runtime/gen/structured_output.h
// (llguidance).
struct ResponseFormat {
  enum class Type : uint8_t { kText, kJsonSchema, kRegex, kChoice, kGrammar };
  Type type = Type::kText;
  // kJsonSchema: the schema as JSON text; kRegex: the pattern; kGrammar:
  // the Lark grammar.
  std::string spec;
  std::vector<std::string> choices;  // kChoice
  // kJsonSchema: objects without additionalProperties are closed (OpenAI's
  // `strict`); whitespace between tokens allowed (else compact: one space
  // after ',' and ':').
  bool strict = false;
  bool flexible_whitespace = false;
  // kJsonSchema: the output may instead be text that does not start with
  // '[', '{' or whitespace (tool_choice auto of the generic tool format:
  // the calls or an answer).
  bool or_text = false;
};

inline constexpr int32_t kMaxResponseFormatBytes = 64 << 10;
inline constexpr int32_t kMaxChoices = 1024;

struct SamplingParams {
  // 0 = until the context is full.
  int32_t max_tokens = 0;
  // EOS and stop_token_ids are masked until this many tokens were generated;
  // stop strings do not end the generation before it either.
  int32_t min_tokens = 0;
  // 0 (below 1e-5) = greedy argmax.
  float temperature = 1.0f;
  // 0 or -1 = disabled.
  int32_t top_k = 0;
  // 1 = disabled.
  float top_p = 1.0f;
  // 0 = disabled.
  float min_p = 0.0f;
  // Unset: a random seed drawn when the request's sampling state is made.
  std::optional<uint64_t> seed;
  // Over prompt and output tokens; 1 = disabled.
  float repetition_penalty = 1.0f;
  // Over output tokens; 0 = disabled.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  // Number of top alternatives to report; 0 = no logprobs at all.
  int32_t logprobs = 0;
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;
  // (token id, bias) added to the logits before everything else; ids are
  // checked against the vocabulary by the request layer
  // (service/request/validation.cc).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Independent completions of the prompt (prefilled once, its KV blocks
  // shared); 1..kMaxSamples. Sample i draws from seed + i when a seed is
  // set (sample 0 is then the n = 1 output), else from its own random seed.
  int32_t n = 1;
  // Log-probability of each prompt token given the tokens before it, and
  // of this many most likely alternatives (raw model logits: no
  // temperature, bias or penalties); 0 = off. Such a request bypasses the
  // prefix cache.
  int32_t prompt_logprobs = 0;
  // Not a field of inferd.v1.SamplingParams (GenerateRequest.
  // response_format) but applied by the sampler like the rest.
  ResponseFormat response_format;

  // Checks the ranges documented in inferd/v1/inference.proto.
  // INVALID_ARGUMENT naming the offending field.
  absl::Status Validate() const;

  bool greedy() const { return temperature < 1e-5f; }
};

inline constexpr int32_t kMaxLogprobs = 20;
inline constexpr int32_t kMaxSamples = 16;
inline constexpr int32_t kMaxStopStrings = 16;
inline constexpr int32_t kMaxStopStringBytes = 256;
inline constexpr int32_t kMaxLogitBias = 1024;

}  // namespace inferd

#endif  // INFERD_RUNTIME_GEN_SAMPLING_PARAMS_H_
