#include "runtime/chat/chat_template.h"

#include <utility>

#include "absl/status/status.h"
#include "runtime/common/status_macros.h"

namespace inferd {

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::Parse(
    absl::string_view source) {
  ASSIGN_OR_RETURN(std::unique_ptr<jinja::Template> t,
                   jinja::Template::Parse(source));
  return std::unique_ptr<ChatTemplate>(new ChatTemplate(std::move(t)));
}

absl::StatusOr<std::string> ChatTemplate::RenderValue(
    jinja::Value context, const jinja::RenderOptions& options) const {
  if (!context.is_dict()) {
    return absl::InvalidArgumentError("chat template context must be an object");
  }
  // transformers always passes these (as None / False when not given).
  auto dict = std::make_shared<jinja::ValueDict>(context.dict());
  for (const char* key : {"tools", "documents"}) {
    if (dict->Find(absl::string_view(key)) == nullptr) {
      dict->Set(jinja::Value::String(key), jinja::Value::None());
    }
  }
  if (dict->Find(absl::string_view("add_generation_prompt")) == nullptr) {
    dict->Set(jinja::Value::String("add_generation_prompt"), jinja::Value::Bool(false));
  }
  return template_->Render(jinja::Value::Dict(std::move(dict)), options);
}

absl::StatusOr<std::string> ChatTemplate::Render(
    const nlohmann::ordered_json& context,
    const jinja::RenderOptions& options) const {
  ASSIGN_OR_RETURN(jinja::Value v, jinja::Value::FromJson(context));
  return RenderValue(std::move(v), options);
}

absl::StatusOr<std::string> ChatTemplate::Render(
    const nlohmann::ordered_json& context) const {
  return Render(context, jinja::RenderOptions());
}

absl::StatusOr<std::string> ChatTemplate::Render(
    const nlohmann::json& context) const {
  ASSIGN_OR_RETURN(jinja::Value v, jinja::Value::FromJson(context));
  return RenderValue(std::move(v), jinja::RenderOptions());
}

absl::StatusOr<std::string> ChatTemplate::Render(
    const std::vector<ChatMessage>& messages, bool add_generation_prompt,
    const std::string& bos_token, const std::string& eos_token) const {
  std::vector<jinja::Value> list;
  list.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    auto d = std::make_shared<jinja::ValueDict>();
    d->entries.emplace_back(jinja::Value::String("role"), jinja::Value::String(m.role));
    d->entries.emplace_back(jinja::Value::String("content"),
                            jinja::Value::String(m.content));
    list.push_back(jinja::Value::Dict(std::move(d)));
  }
  auto ctx = std::make_shared<jinja::ValueDict>();
  ctx->Set(jinja::Value::String("messages"), jinja::Value::List(std::move(list)));
  ctx->Set(jinja::Value::String("add_generation_prompt"),
           jinja::Value::Bool(add_generation_prompt));
  ctx->Set(jinja::Value::String("bos_token"), jinja::Value::String(bos_token));
  ctx->Set(jinja::Value::String("eos_token"), jinja::Value::String(eos_token));
  return RenderValue(jinja::Value::Dict(std::move(ctx)), jinja::RenderOptions());
}

}  // namespace inferd
