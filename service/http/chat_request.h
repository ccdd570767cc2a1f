// The bodies of POST /v1/chat/completions, /v1/completions and /tokenize
// (OpenAI's shapes, and the extras vLLM accepts) read straight into the
// request layer's types (service/request/requests.h); a field of the wrong shape is
// a 400 naming it (OpenAI's `param`); the request layer checks the values.
// Pure functions; thread-safe.
#ifndef INFERD_SERVICE_HTTP_CHAT_REQUEST_H_
#define INFERD_SERVICE_HTTP_CHAT_REQUEST_H_

#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include <vector>

#include "service/request/requests.h"
#include "service/http/http_common.h"

namespace inferd::http {

// The text of a content field: null, a string, or parts whose type is one
// of `types` (the first names them in the error), each with its "text" (a
// refusal part's "refusal").
absl::StatusOr<std::string> ContentText(
    const Json& content, const std::string& param,
    std::initializer_list<absl::string_view> types);

// One chat message (OpenAI's shape) as inferd's; `i` its index. Assistant
// messages may carry tool_calls (content then may be null), tool messages
// tool_call_id (and name).
absl::Status ToChatMessage(const Json& m, size_t i, ChatMessage* out);

// `tools`: function tools in chat's shape ({"type": "function",
// "function": {...}}) or, `flat`, the Responses API's (the function's
// fields beside "type").
absl::Status ToToolList(const Json& body, std::vector<ChatTool>* tools,
                        bool flat = false);

// `tools`, `tool_choice` (none, auto, required, or a function: chat's
// {"type": "function", "function": {"name"}}, or `flat` the Responses
// API's {"type": "function", "name"}) and `parallel_tool_calls`.
absl::Status ToTools(const Json& body, GenerateInput* req, bool flat = false);

// A chat completion's body: messages, tools, sampling, response_format.
absl::Status ToChatRequest(const Json& body, GenerateInput* req);

// Completions' `echo`: the prompt text before each choice (the request
// layer's first output carries it); with `logprobs`, the prompt's tokens
// lead each choice's logprobs (the first one with null logprob, as it has
// no context); with `max_tokens` 0 the answer is the prompt alone (how
// evaluation harnesses score a text: the engine generates one token, which
// is dropped).
struct EchoPlan {
  bool echo = false;
  bool logprobs = false;
  bool prompt_only = false;
};

// A completion's body: prompt (text or ids, one per request), sampling,
// response_format; `*echo` what it asks of an echo.
absl::Status ToCompletionRequest(const Json& body, GenerateInput* req,
                                 EchoPlan* echo);

}  // namespace inferd::http

#endif  // INFERD_SERVICE_HTTP_CHAT_REQUEST_H_
