#include "runtime/chat/generic_tools.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace inferd {
namespace {

using Json = nlohmann::ordered_json;

Json Parameters(const ChatTool& t) {
  if (t.parameters.empty()) return Json{{"type", "object"}};
  Json p = Json::parse(t.parameters, nullptr, /*allow_exceptions=*/false);
  return p.is_discarded() ? Json{{"type", "object"}} : p;
}

// A call's arguments as JSON (text that does not parse stays a string).
Json Arguments(const std::string& text) {
  if (text.empty()) return Json::object();
  Json a = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  return a.is_discarded() ? Json(text) : a;
}

std::string Dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

std::string GenericToolInstructions(const std::vector<ChatTool>& tools,
                                    GenericToolMode mode,
                                    const std::string& function) {
  std::string text = "You can call these tools (JSON Schema of each tool's "
                     "arguments):\n";
  for (const ChatTool& t : tools) {
    if (mode == GenericToolMode::kNamed && t.name != function) continue;
    Json d = {{"name", t.name}};
    if (!t.description.empty()) d["description"] = t.description;
    d["parameters"] = Parameters(t);
    absl::StrAppend(&text, Dump(d), "\n");
  }
  const char* shape =
      "[{\"name\": \"<tool name>\", \"arguments\": {<arguments>}}]";
  switch (mode) {
    case GenericToolMode::kAuto:
      absl::StrAppend(&text,
                      "To call tools, reply with only a JSON array of the "
                      "calls: ",
                      shape,
                      "\nThe results come back in the next message. To "
                      "answer without a tool, reply with plain text.");
      break;
    case GenericToolMode::kRequired:
      absl::StrAppend(&text, "Reply with only a JSON array of the calls: ",
                      shape);
      break;
    case GenericToolMode::kNamed:
      absl::StrAppend(&text, "Call the tool ", function,
                      ": reply with only a JSON array of the call: ", shape);
      break;
  }
  return text;
}

Json GenericToolSchema(const std::vector<ChatTool>& tools,
                       GenericToolMode mode, const std::string& function,
                       bool parallel) {
  Json any = Json::array();
  for (const ChatTool& t : tools) {
    if (mode == GenericToolMode::kNamed && t.name != function) continue;
    any.push_back({{"type", "object"},
                   {"properties",
                    {{"name", {{"type", "string"}, {"const", t.name}}},
                     {"arguments", Parameters(t)}}},
                   {"required", {"name", "arguments"}},
                   {"additionalProperties", false}});
  }
  Json calls = {{"type", "array"}, {"minItems", 1}};
  if (!parallel || mode == GenericToolMode::kNamed) calls["maxItems"] = 1;
  calls["items"] = {{"anyOf", std::move(any)}};
  return calls;
}

bool HasToolTurns(const std::vector<ChatMessage>& messages) {
  for (const ChatMessage& m : messages) {
    if (!m.tool_calls.empty() || m.role == "tool") return true;
  }
  return false;
}

std::vector<ChatMessage> GenericToolConversation(
    std::vector<ChatMessage> messages, const std::string& instructions,
    bool system_in_user) {
  std::vector<ChatMessage> out;
  out.reserve(messages.size() + 1);
  // The tool name of each call id, for results that do not name theirs.
  std::vector<std::pair<std::string, std::string>> names;
  for (ChatMessage& m : messages) {
    if (!m.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ChatToolCall& c : m.tool_calls) {
        calls.push_back({{"name", c.name}, {"arguments", Arguments(c.arguments)}});
        names.emplace_back(c.id, c.name);
      }
      std::string text = Dump(calls);
      m.content = m.content.empty() ? text : absl::StrCat(m.content, "\n", text);
      m.tool_calls.clear();
      out.push_back(std::move(m));
      continue;
    }
    if (m.role == "tool") {
      std::string name = m.name;
      for (const auto& [id, n] : names) {
        if (name.empty() && !m.tool_call_id.empty() && id == m.tool_call_id) {
          name = n;
        }
      }
      Json result = Json::object();
      if (!name.empty()) result["name"] = name;
      if (!m.tool_call_id.empty()) result["tool_call_id"] = m.tool_call_id;
      result["content"] = Arguments(m.content);
      std::string line = Dump(Json{{"tool_result", std::move(result)}});
      // A run of results is one user turn.
      if (!out.empty() && out.back().role == "user" &&
          absl::StartsWith(out.back().content, "{\"tool_result\"")) {
        absl::StrAppend(&out.back().content, "\n", line);
      } else {
        out.emplace_back("user", std::move(line));
      }
      continue;
    }
    out.push_back(std::move(m));
  }
  if (instructions.empty()) return out;
  if (system_in_user) {
    for (ChatMessage& m : out) {
      if (m.role != "user") continue;
      m.content = absl::StrCat(instructions, "\n\n", m.content);
      return out;
    }
  }
  if (!out.empty() && out[0].role == "system") {
    out[0].content = absl::StrCat(out[0].content, "\n\n", instructions);
  } else {
    out.insert(out.begin(), ChatMessage("system", instructions));
  }
  return out;
}

}  // namespace inferd
