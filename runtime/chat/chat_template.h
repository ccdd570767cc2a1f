// ChatTemplate: renders a conversation into a prompt with a model's Hugging
// Face chat template (tokenizer_config.json "chat_template" or GGUF
// tokenizer.chat_template), the way transformers' apply_chat_template(...,
// tokenize=False) does, using the Jinja-subset interpreter in jinja.h.
// Thread-safe after Parse: Render is const and may run concurrently.
#ifndef INFERD_RUNTIME_CHAT_CHAT_TEMPLATE_H_
#define INFERD_RUNTIME_CHAT_CHAT_TEMPLATE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/chat/jinja.h"

namespace inferd {

// A tool call of an assistant turn; `arguments` is JSON text (OpenAI's
// shape).
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c)
      : role(std::move(r)), content(std::move(c)) {}

  std::string role;
  std::string content;
  // Assistant turns that called tools.
  std::vector<ChatToolCall> tool_calls;
  // Tool results (role "tool"): the call answered, and the tool's name.
  std::string tool_call_id;
  std::string name;
  // An assistant turn's reasoning (templates that re-render it).
  std::string reasoning_content;
};

// A function the model may call; `parameters` is a JSON Schema as text
// (empty: none given).
struct ChatTool {
  std::string name;
  std::string description;
  std::string parameters;
  // OpenAI's `strict`: a constraint built from `parameters` follows them
  // exactly (no extra properties).
  bool strict = false;
};

// The template context transformers' apply_chat_template(messages,
// tools=...) builds for these messages, the way vLLM passes an OpenAI
// request: each message {role, content}, plus `tool_calls` ({id, type:
// "function", function: {name, arguments}}, arguments parsed into an
// object when they are JSON, {} when empty), `tool_call_id`, `name`,
// `reasoning_content` (and its alias `reasoning`) when set; tools as
// [{"type": "function", "function": {name, description?, parameters?}}],
// or none. INVALID_ARGUMENT when a tool's parameters are not JSON.
absl::StatusOr<nlohmann::ordered_json> ChatContext(
    const std::vector<ChatMessage>& messages, const std::vector<ChatTool>& tools,
    bool add_generation_prompt, const std::string& bos_token,
    const std::string& eos_token);

class ChatTemplate {
 public:
  // INVALID_ARGUMENT with line:col for a syntax error or an unsupported
  // construct (naming it). The returned template is owned by the caller.
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> Parse(
      absl::string_view source);

  // `context` is an object: `messages` (list of {role, content, ...}),
  // `add_generation_prompt`, `bos_token`, `eos_token`, and anything else the
  // template reads (`tools`, `documents`, `enable_thinking`, ...). Like
  // transformers, `tools` and `documents` default to none and
  // `add_generation_prompt` to false. The ordered_json overload keeps key
  // order (what `tojson` prints); nlohmann::json sorts keys.
  // Errors (raise_exception in the template, type errors, size, step and
  // recursion limits) are INVALID_ARGUMENT with a message.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context) const;
  absl::StatusOr<std::string> Render(const nlohmann::json& context) const;
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                                     bool add_generation_prompt,
                                     const std::string& bos_token,
                                     const std::string& eos_token) const;
  // The same with tools (ChatContext).
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                                     const std::vector<ChatTool>& tools,
                                     bool add_generation_prompt,
                                     const std::string& bos_token,
                                     const std::string& eos_token) const;

  // Render with explicit options (the clock for strftime_now, limits).
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context,
                                     const jinja::RenderOptions& options) const;

 private:
  explicit ChatTemplate(std::unique_ptr<jinja::Template> t)
      : template_(std::move(t)) {}
  absl::StatusOr<std::string> RenderValue(jinja::Value context,
                                          const jinja::RenderOptions& options) const;

  std::unique_ptr<jinja::Template> template_;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_CHAT_CHAT_TEMPLATE_H_
