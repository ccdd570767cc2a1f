// What the front ends hand the request layer, and what it hands back: the
// runtime's request types (runtime/engine/requests.h) with the model's name
// and what only the service decides (tool choice, echo), and the answers
// with their tokens named. Each front end reads its wire format straight
// into these (gRPC: convert.h; HTTP: service/http/) and writes its wire
// format from them; validation.h checks them once for both. Value types.
#ifndef INFERD_SERVICE_REQUEST_REQUESTS_H_
#define INFERD_SERVICE_REQUEST_REQUESTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/chat/chat_template.h"
#include "runtime/chat/tool_parser.h"
#include "runtime/engine/requests.h"

namespace inferd {

struct ApiLimits {
  int max_inputs_per_request = 256;
};

// Most turns a conversation may have, and most tools a request may define.
inline constexpr int kMaxChatMessages = 4096;
inline constexpr int kMaxTools = 128;

// ------------------------------------------------------------- generate

struct ToolChoice {
  enum class Mode {
    kUnset,     // auto when the request has tools
    kNone,      // tools shown to the model, its output not parsed
    kAuto,      // the model's tool-call format parsed
    kRequired,  // constrained to an array of {"name", "arguments"}
    kFunction,  // constrained to `function`'s arguments
  };
  Mode mode = Mode::kUnset;
  std::string function;
};

struct GenerateInput {
  std::string model;  // "" = the server's only generator
  // The runtime's parameters: exactly one of prompt, prompt_token_ids
  // (below) and messages.
  GenerateParams params;
  // Token ids as the client sent them (even empty), checked against the
  // vocabulary, then moved into params.prompt_token_ids.
  std::optional<std::vector<int64_t>> prompt_token_ids;
  // Unset: true for a prompt, false for messages (a chat template writes
  // its own special tokens).
  std::optional<bool> add_special_tokens;
  // Unset: skipped, unless the model's tool-call format is written in
  // special tokens and tool_choice is auto.
  std::optional<bool> skip_special_tokens;
  ToolChoice tool_choice;
  std::optional<bool> parallel_tool_calls;
  // Completions' echo: the request's first output carries the prompt.
  bool echo_prompt = false;
};

// A token as an answer names it: its vocabulary entry, the bytes it adds to
// the text, and its logprob.
struct NamedToken {
  int32_t id = 0;
  std::string token;
  std::string text_bytes;
  float logprob = 0;
};

struct NamedLogprobs {
  NamedToken sampled;
  std::vector<NamedToken> top;
};

// The prompt as the engine saw it (GenerateInput::echo_prompt): its token
// ids, its text (the prompt itself, or its ids decoded), and its first
// token's text (special tokens kept).
struct PromptEcho {
  std::vector<int32_t> token_ids;
  std::string text;
  std::string first_token;
};

// One output of a generation (of sample `sample_index` with n > 1).
struct GenerateOutput {
  std::string request_id;
  int32_t sample_index = 0;
  // The text through the output parser (tool calls, reasoning) when the
  // request has one: content, reasoning, and tool calls (one entry per call
  // in an output, its argument pieces joined).
  std::string text;
  std::string reasoning;
  std::vector<ToolCallDelta> tool_calls;
  std::vector<int32_t> token_ids;
  std::vector<NamedLogprobs> logprobs;
  // On the request's first output when asked (prompt positions 1..).
  std::vector<NamedLogprobs> prompt_logprobs;
  std::optional<PromptEcho> echo;
  // On a sample's final output: why it ended (tool_calls_finish: by
  // calling tools), usage and timings.
  FinishReason finish = FinishReason::kNone;
  bool tool_calls_finish = false;
  std::string stop_reason;
  GenerateUsage usage;
  RequestTimings timings;
  // The call's final output (the last sample's final one).
  bool last = false;
};

// -------------------------------------------------------------- prefill

struct EmbedInput {
  std::string model;
  // params.token_ids stays empty: pre-tokenized inputs as sent, checked
  // against the vocabulary, then moved there.
  EmbedParams params;
  std::vector<std::vector<int64_t>> token_ids;
};

struct RerankInput {
  std::string model;
  RerankParams params;
  int64_t top_n = 0;  // 0: every document
  bool return_documents = false;
};

struct RerankAnswer {
  struct Item {
    int64_t index = 0;  // in the request's documents
    float score = 0;
    std::optional<std::string> document;
  };
  std::vector<Item> results;  // best first, at most top_n
  int64_t total_tokens = 0;
  RequestTimings timings;
};

struct ClassifyInput {
  std::string model;
  ClassifyParams params;
};

struct ClassifyAnswer {
  struct Label {
    int64_t index = 0;
    std::string label;
    float score = 0;
  };
  // Per input, every label, best first.
  std::vector<std::vector<Label>> results;
  int64_t total_tokens = 0;
};

// ------------------------------------------------------------- tokenize

struct TokenizeInput {
  std::string model;
  std::string text;                   // or
  std::vector<ChatMessage> messages;  // through the chat template
  std::vector<ChatTool> tools;        // for the template (messages only)
  std::optional<bool> add_special_tokens;     // unset: text true, chat false
  std::optional<bool> add_generation_prompt;  // unset: true
  bool return_offsets = false;
};

struct TokenizeAnswer {
  std::vector<int32_t> token_ids;
  std::vector<std::string> tokens;
  std::vector<std::pair<int64_t, int64_t>> offsets;  // when asked for
  std::string rendered_prompt;                       // chat only
  int64_t max_input_tokens = 0;                      // the model's
};

struct DetokenizeInput {
  std::string model;
  std::vector<int64_t> token_ids;
  std::optional<bool> skip_special_tokens;  // unset: true
};

// LoadModel: as --model NAME=PATH,key=value (PATH empty: a model the
// server has, as it was).
struct LoadModelInput {
  std::string name;
  std::string path;
  std::vector<std::pair<std::string, std::string>> options;
  bool replace = false;
  bool wait = true;
};

struct UnloadModelInput {
  std::string name;
  // Seconds running requests may take before they are cancelled; unset:
  // waited for.
  std::optional<double> grace_seconds;
};

}  // namespace inferd

#endif  // INFERD_SERVICE_REQUEST_REQUESTS_H_
