#include "runtime/chat/chat_format.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/chat/tool_parser.h"

namespace inferd {

std::shared_ptr<const ChatFormat> ChatFormat::Create(std::string model_name,
                                                     absl::string_view source,
                                                     std::string bos_token,
                                                     std::string eos_token) {
  std::shared_ptr<ChatFormat> f(new ChatFormat());
  f->model_name_ = std::move(model_name);
  f->bos_token_ = std::move(bos_token);
  f->eos_token_ = std::move(eos_token);
  f->tool_parser_ = DetectToolParser(source);
  f->reasoning_parser_ = DetectReasoningParser(source);
  if (!source.empty()) {
    auto parsed = ChatTemplate::Parse(source);
    if (parsed.ok()) {
      f->template_ = std::move(parsed).value();
    } else {
      f->parse_error_ = std::string(parsed.status().message());
    }
  }
  return f;
}

absl::StatusOr<std::string> ChatFormat::Render(
    const std::vector<ChatMessage>& messages, bool add_generation_prompt,
    const std::vector<ChatTool>& tools) const {
  if (template_ == nullptr) {
    if (!parse_error_.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model '", model_name_, "': its chat template cannot be used (",
          parse_error_, "); send a prompt instead of messages"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", model_name_,
        "' has no chat template (tokenizer_config.json chat_template or "
        "GGUF tokenizer.chat_template); send a prompt instead of messages"));
  }
  auto text = template_->Render(messages, tools, add_generation_prompt,
                                bos_token_, eos_token_);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("messages: the chat template of model '", model_name_,
                     "' rejected them: ", text.status().message()));
  }
  return text;
}

}  // namespace inferd
