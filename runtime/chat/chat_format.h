// ChatFormat: how one model turns a conversation into its prompt: its chat
// template and the special tokens the template reads, or why it has none.
// The serving layer builds it once per model and hands it to the input
// processor as data. Immutable; thread-safe.
#ifndef INFERD_RUNTIME_CHAT_CHAT_FORMAT_H_
#define INFERD_RUNTIME_CHAT_CHAT_FORMAT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/chat/chat_template.h"

namespace inferd {

class ChatFormat {
 public:
  // `source`: the model's chat template (tokenizer_config.json chat_template
  // or GGUF tokenizer.chat_template), empty when it has none. A template
  // that does not parse is kept as the reason conversations are refused.
  static std::shared_ptr<const ChatFormat> Create(std::string model_name,
                                                  absl::string_view source,
                                                  std::string bos_token,
                                                  std::string eos_token);

  // The conversation rendered with the template. FAILED_PRECONDITION when
  // the model has none (or it could not be parsed: the message says why);
  // INVALID_ARGUMENT when the template rejects the conversation.
  // `tools` go to the template as transformers passes them (ChatContext).
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                                     bool add_generation_prompt,
                                     const std::vector<ChatTool>& tools = {}) const;

  bool has_template() const { return template_ != nullptr; }
  // Empty when the template parsed (or there is none); else why not.
  const std::string& parse_error() const { return parse_error_; }
  // The tool-call format the template writes (tool_parser.h
  // DetectToolParser), empty when it shows none; "think" when it writes
  // <think> reasoning, else empty.
  const std::string& tool_parser() const { return tool_parser_; }
  const std::string& reasoning_parser() const { return reasoning_parser_; }

 private:
  ChatFormat() = default;

  std::string model_name_;
  std::unique_ptr<const ChatTemplate> template_;
  std::string parse_error_;
  std::string tool_parser_;
  std::string reasoning_parser_;
  std::string bos_token_;
  std::string eos_token_;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_CHAT_CHAT_FORMAT_H_
