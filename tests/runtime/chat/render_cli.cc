// Test tool: reads JSON lines {"template": ..., "context": {...}, "now":
// "YYYY-MM-DDTHH:MM:SS" (optional, UTC)} from stdin and prints one JSON line
// per input: {"ok": true, "text": ...} or {"ok": false, "error": ...}.
// With "api": {"messages": [OpenAI messages], "tools": [OpenAI tools],
// "add_generation_prompt", "bos_token", "eos_token"} instead of "context",
// the context is the one the server builds (ChatMessage / ChatTool ->
// inferd::ChatContext), as a request's messages and tools reach it.
#include <iostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/chat/chat_template.h"

namespace {

// The request's messages and tools as the service converts them (OpenAI's
// shapes: content null or a string, arguments as JSON text).
absl::StatusOr<nlohmann::ordered_json> ApiContext(const nlohmann::ordered_json& api) {
  std::vector<inferd::ChatMessage> messages;
  for (const auto& m : api["messages"]) {
    inferd::ChatMessage c(m["role"].get<std::string>(),
                          m.value("content", nlohmann::ordered_json()).is_string()
                              ? m["content"].get<std::string>()
                              : "");
    if (m.contains("tool_calls")) {
      for (const auto& t : m["tool_calls"]) {
        c.tool_calls.push_back(inferd::ChatToolCall{
            t.value("id", ""), t["function"]["name"].get<std::string>(),
            t["function"].value("arguments", "")});
      }
    }
    c.tool_call_id = m.value("tool_call_id", "");
    c.name = m.value("name", "");
    c.reasoning_content = m.value("reasoning_content", "");
    messages.push_back(std::move(c));
  }
  std::vector<inferd::ChatTool> tools;
  if (api.contains("tools")) {
    for (const auto& t : api["tools"]) {
      const auto& f = t["function"];
      tools.push_back(inferd::ChatTool{
          f["name"].get<std::string>(), f.value("description", ""),
          f.contains("parameters") ? f["parameters"].dump() : ""});
    }
  }
  return inferd::ChatContext(messages, tools, api["add_generation_prompt"].get<bool>(),
                             api["bos_token"].get<std::string>(),
                             api["eos_token"].get<std::string>());
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    nlohmann::ordered_json out;
    try {
      auto in = nlohmann::ordered_json::parse(line);
      inferd::jinja::RenderOptions options;
      options.time_zone = absl::UTCTimeZone();
      if (in.contains("now")) {
        std::string err;
        if (!absl::ParseTime("%Y-%m-%dT%H:%M:%S", in["now"].get<std::string>(),
                             absl::UTCTimeZone(), &options.now, &err)) {
          throw std::runtime_error("bad now: " + err);
        }
      }
      auto t = inferd::ChatTemplate::Parse(in["template"].get<std::string>());
      if (!t.ok()) {
        out = {{"ok", false}, {"error", std::string(t.status().message())}};
      } else {
        nlohmann::ordered_json context;
        if (in.contains("api")) {
          auto ctx = ApiContext(in["api"]);
          if (!ctx.ok()) throw std::runtime_error(std::string(ctx.status().message()));
          context = *ctx;
        } else {
          context = in["context"];
        }
        auto r = (*t)->Render(context, options);
        if (r.ok()) {
          out = {{"ok", true}, {"text", *r}};
        } else {
          out = {{"ok", false}, {"error", std::string(r.status().message())}};
        }
      }
    } catch (const std::exception& e) {
      out = {{"ok", false}, {"error", std::string("cli: ") + e.what()}};
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n" << std::flush;
  }
  return 0;
}
