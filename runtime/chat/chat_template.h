// ChatTemplate: renders a conversation into a prompt with a model's Hugging
// Face chat template (tokenizer_config.json "chat_template" or GGUF
// tokenizer.chat_template), the way transformers' apply_chat_template(...,
// tokenize=False) does, using the Jinja-subset interpreter in jinja.h.
// Thread-safe after Parse: Render is const and may run concurrently.
#ifndef INFERD_RUNTIME_CHAT_CHAT_TEMPLATE_H_
#define INFERD_RUNTIME_CHAT_CHAT_TEMPLATE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/chat/jinja.h"

namespace inferd {

struct ChatMessage {
  std::string role;
  std::string content;
};

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
