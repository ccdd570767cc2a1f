// Anthropic's Messages API: POST /v1/messages (system, messages with text,
// tool_use, tool_result and thinking blocks, custom tools -> a chat
// conversation -> the request layer's Generate, as chat completions), its
// content blocks and stream events; POST /v1/messages/count_tokens. Errors
// in Anthropic's shape; the key as `x-api-key` or Bearer.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/chat/tool_parser.h"
#include "runtime/common/status_macros.h"
#include "service/http/generation_runner.h"
#include "service/http/http_common.h"
#include "service/http/routes.h"

namespace inferd::http {
namespace {

// The text of text blocks (or a string).
absl::StatusOr<std::string> BlocksText(const Json& content,
                                       const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return Invalid(param, "must be a string or an array of content blocks");
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& b = content[i];
    if (!b.is_object() || StringField(b, "type") != "text" ||
        !b.contains("text") || !b["text"].is_string()) {
      return Invalid(absl::StrCat(param, "[", i, "]"),
                     "only text blocks ({\"type\": \"text\", \"text\": ...}) "
                     "are supported here (this server serves text models)");
    }
    text += b["text"].get<std::string>();
  }
  return text;
}

// One block of an assistant turn into `m`.
absl::Status AssistantBlock(const Json& b, const std::string& p,
                            ChatMessage* m) {
  const std::string type = StringField(b, "type");
  if (type == "text") {
    if (!b.contains("text") || !b["text"].is_string()) {
      return Invalid(absl::StrCat(p, ".text"), "must be a string");
    }
    m->content += b["text"].get<std::string>();
  } else if (type == "tool_use") {
    ChatToolCall call;
    call.id = StringField(b, "id");
    call.name = StringField(b, "name");
    if (call.id.empty() || call.name.empty()) {
      return Invalid(p, "a tool_use block needs an id and a name");
    }
    auto input = b.find("input");
    if (input == b.end() || !input->is_object()) {
      return Invalid(absl::StrCat(p, ".input"), "must be an object");
    }
    call.arguments = input->dump();
    m->tool_calls.push_back(std::move(call));
  } else if (type == "thinking") {
    m->reasoning_content += StringField(b, "thinking");
  } else if (type != "redacted_thinking") {
    return Invalid(absl::StrCat(p, ".type"),
                   absl::StrCat("'", type, "' blocks are not supported in an "
                                "assistant turn (text, tool_use, thinking)"));
  }
  return absl::OkStatus();
}

// One block of a user turn: tool results become tool turns, text the user
// turn's text.
absl::Status UserBlock(const Json& b, const std::string& p,
                       std::vector<ChatMessage>* out, std::string* text) {
  const std::string type = StringField(b, "type");
  if (type == "text") {
    if (!b.contains("text") || !b["text"].is_string()) {
      return Invalid(absl::StrCat(p, ".text"), "must be a string");
    }
    *text += b["text"].get<std::string>();
    return absl::OkStatus();
  }
  if (type != "tool_result") {
    return Invalid(absl::StrCat(p, ".type"),
                   absl::StrCat("'", type, "' blocks are not supported in a "
                                "user turn (text, tool_result; this server "
                                "serves text models)"));
  }
  ChatMessage m("tool", "");
  m.tool_call_id = StringField(b, "tool_use_id");
  if (m.tool_call_id.empty()) {
    return Invalid(absl::StrCat(p, ".tool_use_id"), "must be a string");
  }
  if (auto c = b.find("content"); c != b.end() && !c->is_null()) {
    ASSIGN_OR_RETURN(m.content, BlocksText(*c, absl::StrCat(p, ".content")));
  }
  if (b.value("is_error", false) == true) {
    m.content = absl::StrCat("Error: ", m.content);
  }
  out->push_back(std::move(m));
  return absl::OkStatus();
}

absl::Status ToMessages(const Json& body, std::vector<ChatMessage>* out) {
  if (auto s = body.find("system"); s != body.end() && !s->is_null()) {
    ASSIGN_OR_RETURN(std::string system, BlocksText(*s, "system"));
    out->emplace_back("system", std::move(system));
  }
  auto msgs = body.find("messages");
  if (msgs == body.end() || !msgs->is_array() || msgs->empty()) {
    return Invalid("messages", "must be a non-empty array");
  }
  for (size_t i = 0; i < msgs->size(); ++i) {
    const Json& m = (*msgs)[i];
    const std::string p = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return Invalid(p, "must be an object");
    const std::string role = StringField(m, "role");
    if (role != "user" && role != "assistant") {
      return Invalid(absl::StrCat(p, ".role"), "must be user or assistant");
    }
    auto content = m.find("content");
    if (content == m.end()) return Invalid(absl::StrCat(p, ".content"), "is required");
    if (content->is_string()) {
      out->emplace_back(role, content->get<std::string>());
      continue;
    }
    if (!content->is_array()) {
      return Invalid(absl::StrCat(p, ".content"),
                     "must be a string or an array of content blocks");
    }
    ChatMessage turn(role, "");
    std::string text;
    for (size_t j = 0; j < content->size(); ++j) {
      const Json& b = (*content)[j];
      const std::string bp = absl::StrCat(p, ".content[", j, "]");
      if (!b.is_object()) return Invalid(bp, "must be an object");
      RETURN_IF_ERROR(role == "assistant" ? AssistantBlock(b, bp, &turn)
                                          : UserBlock(b, bp, out, &text));
    }
    if (role == "assistant") {
      out->push_back(std::move(turn));
    } else if (!text.empty() || content->empty()) {
      out->emplace_back("user", std::move(text));
    }
  }
  return absl::OkStatus();
}

absl::Status ToTools(const Json& body, GenerateInput* in) {
  auto t = body.find("tools");
  if (t != body.end() && !t->is_null()) {
    if (!t->is_array()) return Invalid("tools", "must be an array");
    for (size_t i = 0; i < t->size(); ++i) {
      const Json& tool = (*t)[i];
      const std::string p = absl::StrCat("tools[", i, "]");
      if (!tool.is_object()) return Invalid(p, "must be an object");
      const std::string type = StringField(tool, "type");
      if (!type.empty() && type != "custom") {
        return Invalid(absl::StrCat(p, ".type"),
                       absl::StrCat("'", type, "': only custom tools (name, "
                                    "description, input_schema) are "
                                    "supported"));
      }
      ChatTool& out = in->params.tools.emplace_back();
      if (!tool.contains("name") || !tool["name"].is_string()) {
        return Invalid(absl::StrCat(p, ".name"), "must be a string");
      }
      out.name = tool["name"].get<std::string>();
      if (auto d = tool.find("description"); d != tool.end() && !d->is_null()) {
        if (!d->is_string()) {
          return Invalid(absl::StrCat(p, ".description"), "must be a string");
        }
        out.description = d->get<std::string>();
      }
      auto schema = tool.find("input_schema");
      if (schema == tool.end() || !schema->is_object()) {
        return Invalid(absl::StrCat(p, ".input_schema"),
                       "must be a JSON Schema object");
      }
      out.parameters = schema->dump();
      out.strict = tool.value("strict", false) == true;
    }
  }
  auto c = body.find("tool_choice");
  if (c == body.end() || c->is_null()) return absl::OkStatus();
  if (!c->is_object()) return Invalid("tool_choice", "must be an object");
  const std::string type = StringField(*c, "type");
  ToolChoice& tc = in->tool_choice;
  if (type == "auto") {
    tc.mode = ToolChoice::Mode::kAuto;
  } else if (type == "any") {
    tc.mode = ToolChoice::Mode::kRequired;
  } else if (type == "none") {
    tc.mode = ToolChoice::Mode::kNone;
  } else if (type == "tool") {
    tc.mode = ToolChoice::Mode::kFunction;
    tc.function = StringField(*c, "name");
    if (tc.function.empty()) {
      return Invalid("tool_choice.name", "must name one of the tools");
    }
  } else {
    return Invalid("tool_choice.type", "must be auto, any, tool or none");
  }
  if (c->value("disable_parallel_tool_use", false) == true) {
    in->parallel_tool_calls = false;
  }
  return absl::OkStatus();
}

absl::Status ToSampling(const Json& body, SamplingParams* s) {
  int64_t max_tokens = 0;
  bool has_max = false;
  RETURN_IF_ERROR(Number(body, "max_tokens", &max_tokens, &has_max));
  if (!has_max) return Invalid("max_tokens", "is required");
  if (max_tokens < 1 || max_tokens > (int64_t{1} << 30)) {
    return Invalid("max_tokens", "must be at least 1");
  }
  s->max_tokens = static_cast<int32_t>(max_tokens);
  double temperature = 1.0, top_p = 1.0;
  int64_t top_k = 0;
  RETURN_IF_ERROR(Number(body, "temperature", &temperature));
  RETURN_IF_ERROR(Number(body, "top_p", &top_p));
  RETURN_IF_ERROR(Number(body, "top_k", &top_k));
  s->temperature = static_cast<float>(temperature);
  s->top_p = static_cast<float>(top_p);
  s->top_k = top_k > 0 && top_k < (int64_t{1} << 30) ? static_cast<int32_t>(top_k) : 0;
  if (auto st = body.find("stop_sequences"); st != body.end() && !st->is_null()) {
    if (!st->is_array()) return Invalid("stop_sequences", "must be an array of strings");
    for (const Json& x : *st) {
      if (!x.is_string()) return Invalid("stop_sequences", "must hold strings");
      s->stop.push_back(x.get<std::string>());
    }
  }
  return absl::OkStatus();
}

// output_config.format: {"type": "json_schema", "schema": {...}}
// (structured outputs; objects closed as Anthropic's are).
absl::Status ToOutputFormat(const Json& body, ResponseFormat* out) {
  auto c = body.find("output_config");
  if (c == body.end() || c->is_null()) return absl::OkStatus();
  if (!c->is_object()) return Invalid("output_config", "must be an object");
  auto f = c->find("format");
  if (f == c->end() || f->is_null()) return absl::OkStatus();
  if (!f->is_object() || StringField(*f, "type") != "json_schema" ||
      !f->contains("schema") || !(*f)["schema"].is_object()) {
    return Invalid("output_config.format",
                   "must be {\"type\": \"json_schema\", \"schema\": {...}}");
  }
  out->type = ResponseFormat::Type::kJsonSchema;
  out->spec = (*f)["schema"].dump();
  out->strict = true;
  return absl::OkStatus();
}

struct MessagesRequest {
  GenerateInput gen;
  bool stream = false;
};

absl::Status ReadMessagesBody(const Json& body, bool count_only,
                              MessagesRequest* r) {
  r->gen.model = body.value("model", "");
  RETURN_IF_ERROR(ToMessages(body, &r->gen.params.messages));
  RETURN_IF_ERROR(ToTools(body, &r->gen));
  if (count_only) return absl::OkStatus();
  RETURN_IF_ERROR(Bool(body, "stream", &r->stream));
  RETURN_IF_ERROR(ToOutputFormat(body, &r->gen.params.sampling.response_format));
  return ToSampling(body, &r->gen.params.sampling);
}

std::string NewMessageId() {
  return absl::StrCat("msg_", RandomToolCallId().substr(5));
}

// Content blocks from the generation's outputs; each step's stream events.
class MessagesWriter : public AnswerWriter {
 public:
  MessagesWriter(bool stream, std::vector<std::string> stops)
      : stream_(stream), stops_(std::move(stops)), id_(NewMessageId()) {}

  void Start(const std::string& model) override {
    model_ = model;
    if (!stream_) return;
    Json message = Message();
    message["usage"] = {{"input_tokens", 0}, {"output_tokens", 0}};
    pending_ = NamedEvent("message_start",
                          {{"type", "message_start"}, {"message", message}});
  }

  std::string Add(const GenerateOutput& m) override {
    std::string events = std::move(pending_);
    pending_.clear();
    if (!m.reasoning.empty()) {
      Open("thinking", &events);
      blocks_[open_].text += m.reasoning;
      events += Delta({{"type", "thinking_delta"}, {"thinking", m.reasoning}});
    }
    if (!m.text.empty()) {
      Open("text", &events);
      blocks_[open_].text += m.text;
      events += Delta({{"type", "text_delta"}, {"text", m.text}});
    }
    for (const ToolCallDelta& t : m.tool_calls) {
      if (!t.id.empty() || !t.name.empty()) {
        Close(&events);
        Block b;
        b.type = "tool_use";
        b.id = absl::StrCat(
            "toolu_", absl::StartsWith(t.id, "call_") ? t.id.substr(5) : t.id);
        b.name = t.name;
        b.index = t.index;
        blocks_.push_back(std::move(b));
        open_ = static_cast<int>(blocks_.size()) - 1;
        events += Event("content_block_start",
                        {{"index", open_},
                         {"content_block", BlockJson(blocks_[open_], false)}});
      }
      if (t.arguments.empty()) continue;
      for (Block& b : blocks_) {
        if (b.type == "tool_use" && b.index == t.index) b.text += t.arguments;
      }
      if (open_ >= 0 && blocks_[open_].index == t.index) {
        events += Delta({{"type", "input_json_delta"},
                         {"partial_json", t.arguments}});
      }
    }
    if (m.finish != FinishReason::kNone) {
      final_ = m;
      final_.text.clear();
      final_.tool_calls.clear();
    }
    return stream_ ? events : "";
  }

  std::string Finish() override {
    std::string events;
    Close(&events);
    const auto [reason, sequence] = StopReason();
    const Json usage = Usage();
    if (!stream_) {
      Json m = Message();
      Json content = Json::array();
      for (const Block& b : blocks_) content.push_back(BlockJson(b, true));
      m["content"] = std::move(content);
      m["stop_reason"] = reason;
      m["stop_sequence"] = sequence;
      m["usage"] = usage;
      return m.dump(-1, ' ', false, Json::error_handler_t::replace);
    }
    events += Event("message_delta",
                    {{"delta", {{"stop_reason", reason},
                                {"stop_sequence", sequence}}},
                     {"usage", usage}});
    events += Event("message_stop", Json::object());
    return events;
  }

  std::string StreamError(const absl::Status& status) override {
    std::string events = std::move(pending_);
    return events + NamedEvent("error", AnthropicErrorJson(status));
  }

  std::string BodyError(const absl::Status& status) override {
    return AnthropicErrorJson(status).dump(-1, ' ', false,
                                           Json::error_handler_t::replace);
  }

 private:
  struct Block {
    std::string type;  // thinking, text, tool_use
    std::string id, name;
    std::string text;  // thinking / text, or a tool_use's input JSON
    int index = -1;
  };

  std::string Event(const std::string& type, Json data) const {
    Json e = {{"type", type}};
    for (auto& [k, v] : data.items()) e[k] = std::move(v);
    return NamedEvent(type, e);
  }
  std::string Delta(Json delta) const {
    return Event("content_block_delta", {{"index", open_}, {"delta", delta}});
  }

  static Json BlockJson(const Block& b, bool done) {
    if (b.type == "thinking") {
      return {{"type", "thinking"}, {"thinking", done ? b.text : ""},
              {"signature", ""}};
    }
    if (b.type == "text") {
      return {{"type", "text"}, {"text", done ? b.text : ""}};
    }
    Json input = Json::object();
    if (done && !b.text.empty()) {
      input = Json::parse(b.text, nullptr, false);
      if (input.is_discarded() || !input.is_object()) input = Json::object();
    }
    return {{"type", "tool_use"}, {"id", b.id}, {"name", b.name},
            {"input", input}};
  }

  void Open(const std::string& type, std::string* events) {
    if (open_ >= 0 && blocks_[open_].type == type) return;
    Close(events);
    Block b;
    b.type = type;
    blocks_.push_back(std::move(b));
    open_ = static_cast<int>(blocks_.size()) - 1;
    *events += Event("content_block_start",
                     {{"index", open_},
                      {"content_block", BlockJson(blocks_[open_], false)}});
  }

  void Close(std::string* events) {
    if (open_ < 0) return;
    *events += Event("content_block_stop", {{"index", open_}});
    open_ = -1;
  }

  Json Message() const {
    return {{"id", id_},          {"type", "message"},
            {"role", "assistant"}, {"model", model_},
            {"content", Json::array()}, {"stop_reason", Json()},
            {"stop_sequence", Json()}};
  }

  std::pair<Json, Json> StopReason() const {
    if (final_.tool_calls_finish) return {"tool_use", Json()};
    if (final_.finish == FinishReason::kLength) return {"max_tokens", Json()};
    for (const std::string& s : stops_) {
      if (final_.finish == FinishReason::kStop && final_.stop_reason == s) {
        return {"stop_sequence", s};
      }
    }
    return {"end_turn", Json()};
  }

  Json Usage() const {
    const GenerateUsage& u = final_.usage;
    return {{"input_tokens", u.prompt_tokens - u.cached_prompt_tokens},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", u.cached_prompt_tokens},
            {"output_tokens", u.completion_tokens}};
  }

  const bool stream_;
  const std::vector<std::string> stops_;
  const std::string id_;
  std::string model_;
  std::string pending_;
  std::vector<Block> blocks_;
  int open_ = -1;
  GenerateOutput final_;
};

std::shared_ptr<HttpCall> AnthropicCall(const HttpContext& ctx,
                                        const char* route) {
  auto call = std::make_shared<HttpCall>(ctx, route, Api::kMessages);
  call->set_error_reply(ReplyAnthropicError);
  return call;
}

void Create(const HttpContext& ctx, const httplib::Request& req,
            httplib::Response& res) {
  auto call = AnthropicCall(ctx, "POST /v1/messages");
  std::optional<Json> body = call->AdmitBody(req, res);
  if (!body.has_value()) return;
  MessagesRequest r;
  if (absl::Status s = ReadMessagesBody(*body, false, &r); !s.ok()) {
    call->Reject(res, s);
    return;
  }
  auto writer = std::make_shared<MessagesWriter>(
      r.stream, r.gen.params.sampling.stop);
  RunGeneration(ctx, call, std::move(r.gen), std::move(writer), r.stream, res);
}

// The prompt's tokens as the generation would render it.
void CountTokens(const HttpContext& ctx, const httplib::Request& req,
                 httplib::Response& res) {
  auto call = AnthropicCall(ctx, "POST /v1/messages/count_tokens");
  std::optional<Json> body = call->AdmitBody(req, res);
  if (!body.has_value()) return;
  MessagesRequest r;
  if (absl::Status s = ReadMessagesBody(*body, true, &r); !s.ok()) {
    call->Reject(res, s);
    return;
  }
  TokenizeInput in;
  in.model = r.gen.model;
  in.messages = std::move(r.gen.params.messages);
  in.tools = std::move(r.gen.params.tools);
  std::string model;
  absl::StatusOr<TokenizeAnswer> answer = ctx.requests->Tokenize(in, &model);
  call->set_model(model);
  if (!answer.ok()) {
    call->Fail(res, answer.status());
    return;
  }
  call->set_status(absl::OkStatus());
  res.set_content(
      Json{{"input_tokens", answer->token_ids.size()}}.dump(),
      "application/json");
}

}  // namespace

void AddMessagesRoutes(httplib::Server& server, const HttpContext& ctx) {
  server.Post("/v1/messages",
              [ctx](const httplib::Request& q, httplib::Response& r) {
                Create(ctx, q, r);
              });
  server.Post("/v1/messages/count_tokens",
              [ctx](const httplib::Request& q, httplib::Response& r) {
                CountTokens(ctx, q, r);
              });
}

}  // namespace inferd::http
