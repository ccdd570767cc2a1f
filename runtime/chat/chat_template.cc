#include "runtime/chat/chat_template.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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
  return Render(messages, {}, add_generation_prompt, bos_token, eos_token);
}

absl::StatusOr<std::string> ChatTemplate::Render(
    const std::vector<ChatMessage>& messages, const std::vector<ChatTool>& tools,
    bool add_generation_prompt, const std::string& bos_token,
    const std::string& eos_token) const {
  ASSIGN_OR_RETURN(nlohmann::ordered_json ctx,
                   ChatContext(messages, tools, add_generation_prompt,
                               bos_token, eos_token));
  return Render(ctx, jinja::RenderOptions());
}

absl::StatusOr<nlohmann::ordered_json> ChatContext(
    const std::vector<ChatMessage>& messages, const std::vector<ChatTool>& tools,
    bool add_generation_prompt, const std::string& bos_token,
    const std::string& eos_token) {
  using Json = nlohmann::ordered_json;
  Json list = Json::array();
  for (const ChatMessage& m : messages) {
    Json j = {{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ChatToolCall& c : m.tool_calls) {
        // vLLM parses the arguments (templates print them with tojson);
        // text that is not JSON stays text.
        Json args = Json::object();
        if (!c.arguments.empty()) {
          args = Json::parse(c.arguments, nullptr, false);
          if (args.is_discarded()) args = c.arguments;
        }
        calls.push_back({{"id", c.id},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", args}}}});
      }
      j["tool_calls"] = std::move(calls);
    }
    if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
    if (!m.name.empty()) j["name"] = m.name;
    if (!m.reasoning_content.empty()) {
      j["reasoning"] = m.reasoning_content;
      j["reasoning_content"] = m.reasoning_content;
    }
    list.push_back(std::move(j));
  }
  Json ctx = {{"messages", std::move(list)}};
  if (tools.empty()) {
    ctx["tools"] = nullptr;
  } else {
    Json ts = Json::array();
    for (size_t i = 0; i < tools.size(); ++i) {
      const ChatTool& t = tools[i];
      Json f = {{"name", t.name}};
      if (!t.description.empty()) f["description"] = t.description;
      if (!t.parameters.empty()) {
        Json p = Json::parse(t.parameters, nullptr, false);
        if (p.is_discarded()) {
          return absl::InvalidArgumentError(
              absl::StrCat("tools[", i, "].parameters: not JSON"));
        }
        f["parameters"] = std::move(p);
      }
      ts.push_back({{"type", "function"}, {"function", std::move(f)}});
    }
    ctx["tools"] = std::move(ts);
  }
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_token;
  ctx["eos_token"] = eos_token;
  return ctx;
}

}  // namespace inferd
