// OpenAI's Responses API: POST /v1/responses (input items -> a chat
// conversation -> the request layer's Generate, as chat completions), its
// output items and typed stream events; stored responses for
// previous_response_id, GET / DELETE /v1/responses/{id} and
// GET /v1/responses/{id}/input_items.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/chat/tool_parser.h"
#include "runtime/common/field_error.h"
#include "runtime/common/status_macros.h"
#include "service/http/chat_request.h"
#include "service/http/generation_runner.h"
#include "service/http/http_common.h"
#include "service/http/response_store.h"
#include "service/http/routes.h"

namespace inferd::http {
namespace {

// The text of an item's content (input, output, reasoning text parts).
absl::StatusOr<std::string> PartsText(const Json& content,
                                      const std::string& param) {
  return ContentText(content, param,
                     {"input_text", "output_text", "text", "refusal",
                      "summary_text", "reasoning_text"});
}

absl::Status RequiredString(const Json& item, const char* key,
                            const std::string& p, std::string* out) {
  auto it = item.find(key);
  if (it == item.end() || !it->is_string()) {
    return Invalid(absl::StrCat(p, ".", key), "must be a string");
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

// Input items -> messages (appended to `conv`): messages, function calls
// (joined into the assistant turn they follow), their outputs (tool
// turns), reasoning (the next assistant turn's reasoning).
absl::Status ToConversation(const Json& input, std::vector<ChatMessage>* conv) {
  if (input.is_string()) {
    conv->emplace_back("user", input.get<std::string>());
    return absl::OkStatus();
  }
  if (!input.is_array()) {
    return Invalid("input", "must be a string or an array of input items");
  }
  std::string reasoning;
  bool open_assistant = false;  // the last message takes more calls
  for (size_t i = 0; i < input.size(); ++i) {
    const Json& item = input[i];
    const std::string p = absl::StrCat("input[", i, "]");
    if (!item.is_object()) return Invalid(p, "must be an object");
    std::string type = StringField(item, "type");
    if (type.empty() && item.contains("role")) type = "message";
    if (type == "message") {
      std::string role;
      RETURN_IF_ERROR(RequiredString(item, "role", p, &role));
      if (role == "developer") role = "system";
      if (role != "user" && role != "system" && role != "assistant") {
        return Invalid(absl::StrCat(p, ".role"),
                       "must be user, system, developer or assistant");
      }
      ASSIGN_OR_RETURN(std::string text,
                       PartsText(item.value("content", Json()),
                                 absl::StrCat(p, ".content")));
      ChatMessage& m = conv->emplace_back(role, std::move(text));
      if (role == "assistant") m.reasoning_content = std::move(reasoning);
      reasoning.clear();
      open_assistant = role == "assistant";
    } else if (type == "function_call") {
      ChatToolCall call;
      RETURN_IF_ERROR(RequiredString(item, "call_id", p, &call.id));
      RETURN_IF_ERROR(RequiredString(item, "name", p, &call.name));
      if (auto a = item.find("arguments"); a != item.end() && !a->is_null()) {
        if (!a->is_string()) {
          return Invalid(absl::StrCat(p, ".arguments"), "must be a JSON string");
        }
        call.arguments = a->get<std::string>();
      }
      if (!open_assistant) {
        ChatMessage& m = conv->emplace_back("assistant", "");
        m.reasoning_content = std::move(reasoning);
        reasoning.clear();
        open_assistant = true;
      }
      conv->back().tool_calls.push_back(std::move(call));
    } else if (type == "function_call_output") {
      ChatMessage m("tool", "");
      RETURN_IF_ERROR(RequiredString(item, "call_id", p, &m.tool_call_id));
      auto out = item.find("output");
      if (out == item.end()) return Invalid(absl::StrCat(p, ".output"), "is required");
      ASSIGN_OR_RETURN(m.content, PartsText(*out, absl::StrCat(p, ".output")));
      conv->push_back(std::move(m));
      open_assistant = false;
    } else if (type == "reasoning") {
      for (const char* key : {"content", "summary"}) {
        auto r = item.find(key);
        if (r == item.end() || r->is_null()) continue;
        ASSIGN_OR_RETURN(std::string text,
                         PartsText(*r, absl::StrCat(p, ".", key)));
        if (!text.empty()) {
          reasoning = std::move(text);
          break;
        }
      }
    } else {
      return Invalid(absl::StrCat(p, ".type"),
                     absl::StrCat("'", type, "' is not supported; input items "
                                  "are message, function_call, "
                                  "function_call_output and reasoning"));
    }
  }
  return absl::OkStatus();
}

// text.format -> the structured output.
absl::Status ToTextFormat(const Json& body, ResponseFormat* out, Json* echo) {
  *echo = Json{{"format", {{"type", "text"}}}};
  auto text = body.find("text");
  if (text == body.end() || text->is_null()) return absl::OkStatus();
  if (!text->is_object()) return Invalid("text", "must be an object");
  auto f = text->find("format");
  if (f == text->end() || f->is_null()) return absl::OkStatus();
  if (!f->is_object()) return Invalid("text.format", "must be an object");
  const std::string type = StringField(*f, "type");
  if (type == "text") return absl::OkStatus();
  if (type == "json_object") {
    out->type = ResponseFormat::Type::kJsonSchema;
    out->spec = "{\"type\": \"object\"}";
  } else if (type == "json_schema") {
    auto schema = f->find("schema");
    if (schema == f->end() || !(schema->is_object() || schema->is_boolean())) {
      return Invalid("text.format.schema", "must be a JSON Schema object");
    }
    out->type = ResponseFormat::Type::kJsonSchema;
    out->spec = schema->dump();
    out->strict = f->value("strict", false) == true;
  } else {
    return Invalid("text.format.type", "must be text, json_object or json_schema");
  }
  (*echo)["format"] = *f;
  return absl::OkStatus();
}

// What a response repeats of its request.
struct ResponseRequest {
  GenerateInput gen;
  bool stream = false;
  bool store = true;
  std::string previous_id;
  Json instructions;         // string or null
  Json input_items;          // this request's items, as given
  std::vector<ChatMessage> conversation;  // previous turns + this input
  Json echo = Json::object();  // the request fields a response repeats
};

absl::Status ReadSampling(const Json& body, ResponseRequest* r) {
  SamplingParams& s = r->gen.params.sampling;
  double temperature = 1.0, top_p = 1.0;
  RETURN_IF_ERROR(Number(body, "temperature", &temperature));
  RETURN_IF_ERROR(Number(body, "top_p", &top_p));
  s.temperature = static_cast<float>(temperature);
  s.top_p = static_cast<float>(top_p);
  int64_t max_tokens = 0;
  bool has_max = false;
  RETURN_IF_ERROR(Number(body, "max_output_tokens", &max_tokens, &has_max));
  if (has_max) {
    if (max_tokens < 1 || max_tokens > (int64_t{1} << 30)) {
      return Invalid("max_output_tokens", "must be at least 1");
    }
    s.max_tokens = static_cast<int32_t>(max_tokens);
  }
  int64_t seed = 0;
  bool has_seed = false;
  RETURN_IF_ERROR(Number(body, "seed", &seed, &has_seed));
  if (has_seed) s.seed = static_cast<uint64_t>(seed);
  r->echo["temperature"] = temperature;
  r->echo["top_p"] = top_p;
  r->echo["max_output_tokens"] = has_max ? Json(max_tokens) : Json();
  return absl::OkStatus();
}

absl::Status ReadResponsesBody(const Json& body, ResponseStore* store,
                               ResponseRequest* r) {
  r->gen.model = body.value("model", "");
  RETURN_IF_ERROR(Bool(body, "stream", &r->stream));
  RETURN_IF_ERROR(Bool(body, "store", &r->store));
  bool background = false;
  RETURN_IF_ERROR(Bool(body, "background", &background));
  if (background) {
    return Invalid("background", "background responses are not supported");
  }
  if (auto c = body.find("conversation"); c != body.end() && !c->is_null()) {
    return Invalid("conversation",
                   "conversations are not supported; use "
                   "previous_response_id");
  }
  if (auto p = body.find("previous_response_id");
      p != body.end() && !p->is_null()) {
    if (!p->is_string()) return Invalid("previous_response_id", "must be a string");
    r->previous_id = p->get<std::string>();
    std::optional<StoredResponse> prev = store->Get(r->previous_id);
    if (!prev.has_value()) {
      return FieldError(
          "previous_response_id",
          absl::StrCat(": no stored response '", r->previous_id,
                       "' (unknown, deleted, stored with store false, or "
                       "evicted: see --responses-store-size and "
                       "--responses-store-ttl)"),
          absl::StatusCode::kNotFound);
    }
    r->conversation = std::move(prev->conversation);
  }
  auto input = body.find("input");
  if (input == body.end() || input->is_null()) {
    return Invalid("input", "is required (a string or input items)");
  }
  r->input_items = *input;
  RETURN_IF_ERROR(ToConversation(*input, &r->conversation));
  if (auto i = body.find("instructions"); i != body.end() && !i->is_null()) {
    if (!i->is_string()) return Invalid("instructions", "must be a string");
    r->instructions = *i;
  }
  std::vector<ChatMessage>& messages = r->gen.params.messages;
  if (r->instructions.is_string()) {
    messages.emplace_back("system", r->instructions.get<std::string>());
  }
  messages.insert(messages.end(), r->conversation.begin(),
                  r->conversation.end());
  if (messages.empty()) return Invalid("input", "has no messages");
  RETURN_IF_ERROR(ToTools(body, &r->gen, /*flat=*/true));
  RETURN_IF_ERROR(ReadSampling(body, r));
  Json text;
  RETURN_IF_ERROR(
      ToTextFormat(body, &r->gen.params.sampling.response_format, &text));
  r->echo["text"] = std::move(text);
  r->echo["tools"] = body.contains("tools") && body["tools"].is_array()
                         ? body["tools"]
                         : Json::array();
  r->echo["tool_choice"] =
      body.contains("tool_choice") && !body["tool_choice"].is_null()
          ? body["tool_choice"]
          : Json("auto");
  r->echo["parallel_tool_calls"] = r->gen.parallel_tool_calls.value_or(true);
  r->echo["metadata"] = body.contains("metadata") && body["metadata"].is_object()
                            ? body["metadata"]
                            : Json::object();
  if (auto u = body.find("user"); u != body.end() && u->is_string()) {
    r->echo["user"] = *u;
  }
  if (auto rs = body.find("reasoning"); rs != body.end() && rs->is_object()) {
    r->echo["reasoning"] = *rs;
  }
  if (r->store && !store->enabled()) {
    return Invalid("store", "this server keeps no responses "
                            "(--responses-store-size 0); send store false");
  }
  return absl::OkStatus();
}

std::string NewId(const char* prefix) {
  return absl::StrCat(prefix, absl::Hex(NowNanos()),
                      RandomToolCallId().substr(5, 8));
}

// The response's output items, built from the generation's outputs; each
// step's stream events on the way.
class ResponsesWriter : public AnswerWriter {
 public:
  ResponsesWriter(std::shared_ptr<ResponseRequest> req, ResponseStore* store)
      : req_(std::move(req)), store_(store), id_(NewId("resp_")),
        created_(NowSeconds()) {}

  void Start(const std::string& model) override {
    model_ = model;
    if (!req_->stream) return;
    Json r = Response("in_progress");
    pending_ += Event("response.created", {{"response", r}});
    pending_ += Event("response.in_progress", {{"response", r}});
  }

  std::string Add(const GenerateOutput& m) override {
    std::string events = std::move(pending_);
    pending_.clear();
    if (!m.reasoning.empty()) {
      Open("reasoning", &events);
      items_[open_].text += m.reasoning;
      events += Event("response.reasoning_text.delta",
                      ItemRef({{"content_index", 0}, {"delta", m.reasoning}}));
    }
    if (!m.text.empty()) {
      Open("message", &events);
      items_[open_].text += m.text;
      events += Event("response.output_text.delta",
                      ItemRef({{"content_index", 0},
                               {"delta", m.text},
                               {"logprobs", Json::array()}}));
    }
    for (const ToolCallDelta& t : m.tool_calls) {
      if (!t.id.empty() || !t.name.empty()) {
        Close(&events);
        Item call;
        call.type = "function_call";
        call.id = NewId("fc_");
        call.call_id = t.id;
        call.name = t.name;
        call.index = t.index;
        items_.push_back(std::move(call));
        open_ = static_cast<int>(items_.size()) - 1;
        events += Event("response.output_item.added",
                        {{"output_index", open_},
                         {"item", ItemJson(items_[open_], false)}});
      }
      if (t.arguments.empty()) continue;
      for (size_t k = 0; k < items_.size(); ++k) {
        Item& it = items_[k];
        if (it.type != "function_call" || it.index != t.index) continue;
        it.arguments += t.arguments;
        events += Event("response.function_call_arguments.delta",
                        {{"item_id", it.id},
                         {"output_index", k},
                         {"delta", t.arguments}});
      }
    }
    if (m.finish != FinishReason::kNone) {
      finish_ = m.finish;
      usage_ = m.usage;
    }
    return req_->stream ? events : "";
  }

  std::string Finish() override {
    std::string events;
    Close(&events);
    const bool complete = finish_ != FinishReason::kLength;
    Json r = Response(complete ? "completed" : "incomplete");
    if (req_->store) Store(r);
    if (!req_->stream) return r.dump(-1, ' ', false, Json::error_handler_t::replace);
    events += Event(complete ? "response.completed" : "response.incomplete",
                    {{"response", r}});
    return events;
  }

  std::string StreamError(const absl::Status& status) override {
    std::string events = std::move(pending_);
    const Json e = ErrorJson(status);
    events += Event("error", {{"code", e["code"]},
                              {"message", e["message"]},
                              {"param", e["param"]}});
    Json r = Response("failed");
    r["error"] = {{"code", e["code"]}, {"message", e["message"]}};
    events += Event("response.failed", {{"response", r}});
    return events;
  }

  std::string BodyError(const absl::Status& status) override {
    return Json{{"error", ErrorJson(status)}}.dump(
        -1, ' ', false, Json::error_handler_t::replace);
  }

 private:
  struct Item {
    std::string type;  // reasoning, message, function_call
    std::string id;
    std::string text;  // reasoning or message text
    std::string call_id, name, arguments;
    int index = -1;  // a call's index among the generation's calls
    bool done = false;
  };

  std::string Event(const std::string& type, Json data) {
    Json e = {{"type", type}, {"sequence_number", sequence_++}};
    for (auto& [k, v] : data.items()) e[k] = std::move(v);
    return NamedEvent(type, e);
  }

  Json ItemRef(Json more) const {
    Json r = {{"item_id", items_[open_].id}, {"output_index", open_}};
    for (auto& [k, v] : more.items()) r[k] = std::move(v);
    return r;
  }

  static Json ItemJson(const Item& it, bool done) {
    const char* status = done ? "completed" : "in_progress";
    if (it.type == "reasoning") {
      Json content = Json::array();
      if (done) content.push_back({{"type", "reasoning_text"}, {"text", it.text}});
      return {{"id", it.id}, {"type", "reasoning"}, {"summary", Json::array()},
              {"content", content}, {"status", status}};
    }
    if (it.type == "message") {
      Json content = Json::array();
      if (done) content.push_back(TextPart(it.text));
      return {{"id", it.id}, {"type", "message"}, {"status", status},
              {"role", "assistant"}, {"content", content}};
    }
    return {{"id", it.id}, {"type", "function_call"}, {"status", status},
            {"call_id", it.call_id}, {"name", it.name},
            {"arguments", done ? it.arguments : ""}};
  }

  static Json TextPart(const std::string& text) {
    return {{"type", "output_text"}, {"text", text},
            {"annotations", Json::array()}, {"logprobs", Json::array()}};
  }

  // Makes the open item one of `type` (closing another).
  void Open(const std::string& type, std::string* events) {
    if (open_ >= 0 && items_[open_].type == type) return;
    Close(events);
    Item it;
    it.type = type;
    it.id = NewId(type == "message" ? "msg_" : "rs_");
    items_.push_back(std::move(it));
    open_ = static_cast<int>(items_.size()) - 1;
    *events += Event("response.output_item.added",
                     {{"output_index", open_},
                      {"item", ItemJson(items_[open_], false)}});
    if (type == "message") {
      *events += Event("response.content_part.added",
                       ItemRef({{"content_index", 0}, {"part", TextPart("")}}));
    }
  }

  void Close(std::string* events) {
    if (open_ < 0) return;
    Item& it = items_[open_];
    if (it.type == "message") {
      *events += Event("response.output_text.done",
                       ItemRef({{"content_index", 0},
                                {"text", it.text},
                                {"logprobs", Json::array()}}));
      *events += Event("response.content_part.done",
                       ItemRef({{"content_index", 0}, {"part", TextPart(it.text)}}));
    } else if (it.type == "reasoning") {
      *events += Event("response.reasoning_text.done",
                       ItemRef({{"content_index", 0}, {"text", it.text}}));
    } else {
      *events += Event("response.function_call_arguments.done",
                       ItemRef({{"name", it.name}, {"arguments", it.arguments}}));
    }
    it.done = true;
    *events += Event("response.output_item.done",
                     {{"output_index", open_}, {"item", ItemJson(it, true)}});
    open_ = -1;
  }

  Json Response(const std::string& status) const {
    Json out = Json::array();
    for (const Item& it : items_) out.push_back(ItemJson(it, it.done));
    Json r = {{"id", id_},
              {"object", "response"},
              {"created_at", created_},
              {"status", status},
              {"background", false},
              {"error", Json()},
              {"incomplete_details",
               status == "incomplete"
                   ? Json{{"reason", "max_output_tokens"}}
                   : Json()},
              {"instructions", req_->instructions},
              {"model", model_},
              {"output", std::move(out)},
              {"previous_response_id",
               req_->previous_id.empty() ? Json() : Json(req_->previous_id)},
              {"reasoning", {{"effort", Json()}, {"summary", Json()}}},
              {"store", req_->store},
              {"truncation", "disabled"},
              {"usage", Json()},
              {"user", Json()}};
    for (const auto& [k, v] : req_->echo.items()) r[k] = v;
    if (status == "completed" || status == "incomplete") {
      const int64_t cached = usage_.cached_prompt_tokens;
      r["usage"] = {
          {"input_tokens", usage_.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", cached}}},
          {"output_tokens", usage_.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", usage_.prompt_tokens + usage_.completion_tokens}};
    }
    return r;
  }

  // The conversation with this response's turn, for follow-ups.
  void Store(const Json& response) {
    StoredResponse s;
    s.response = response;
    s.input_items = req_->input_items;
    s.conversation = req_->conversation;
    ChatMessage turn("assistant", "");
    for (const Item& it : items_) {
      if (it.type == "reasoning") turn.reasoning_content += it.text;
      if (it.type == "message") turn.content += it.text;
      if (it.type == "function_call") {
        turn.tool_calls.push_back({it.call_id, it.name, it.arguments});
      }
    }
    s.conversation.push_back(std::move(turn));
    store_->Put(id_, std::move(s));
  }

  const std::shared_ptr<ResponseRequest> req_;
  ResponseStore* const store_;
  const std::string id_;
  const int64_t created_;
  std::string model_;
  std::string pending_;
  std::vector<Item> items_;
  int open_ = -1;
  int64_t sequence_ = 0;
  FinishReason finish_ = FinishReason::kNone;
  GenerateUsage usage_;
};

void Create(const HttpContext& ctx, const httplib::Request& req,
            httplib::Response& res) {
  auto call = std::make_shared<HttpCall>(ctx, "POST /v1/responses",
                                         Api::kResponses);
  std::optional<Json> body = call->AdmitBody(req, res);
  if (!body.has_value()) return;
  auto r = std::make_shared<ResponseRequest>();
  if (absl::Status s = ReadResponsesBody(*body, ctx.responses, r.get());
      !s.ok()) {
    call->Reject(res, s);
    return;
  }
  GenerateInput gen = std::move(r->gen);
  const bool stream = r->stream;
  auto writer = std::make_shared<ResponsesWriter>(r, ctx.responses);
  RunGeneration(ctx, call, std::move(gen), std::move(writer), stream, res);
}

// GET / DELETE /v1/responses/{id}[/input_items].
void Stored(const HttpContext& ctx, const httplib::Request& req,
            httplib::Response& res, const char* route) {
  HttpCall call(ctx, route, Api::kResponses, CallScope::Kind::kQuery);
  if (!call.Admit(req, res)) return;
  const std::string id = req.matches[1];
  const bool del = req.method == "DELETE";
  std::optional<StoredResponse> found;
  if (!del) found = ctx.responses->Get(id);
  if (del ? !ctx.responses->Delete(id) : !found.has_value()) {
    call.Fail(res, absl::NotFoundError(absl::StrCat(
                       "no stored response '", id,
                       "' (unknown, deleted, stored with store false, or "
                       "evicted)")));
    return;
  }
  call.set_status(absl::OkStatus());
  Json out;
  if (del) {
    out = {{"id", id}, {"object", "response.deleted"}, {"deleted", true}};
  } else if (req.matches.size() > 2 && req.matches[2].length() > 0) {
    // The input items, as sent (a string input is one user message).
    Json items = found->input_items;
    if (items.is_string()) {
      items = Json::array({{{"type", "message"}, {"role", "user"},
                            {"content", Json::array({{{"type", "input_text"},
                                                      {"text", items}}})}}});
    }
    Json data = Json::array();
    for (size_t i = 0; i < items.size(); ++i) {
      Json item = items[i];
      if (item.is_object() && !item.contains("id")) {
        item["id"] = absl::StrCat("item_", id, "_", i);
      }
      data.push_back(std::move(item));
    }
    out = {{"object", "list"},
           {"data", data},
           {"first_id", data.empty() ? Json() : data.front().value("id", Json())},
           {"last_id", data.empty() ? Json() : data.back().value("id", Json())},
           {"has_more", false}};
  } else {
    out = found->response;
  }
  res.set_content(out.dump(-1, ' ', false, Json::error_handler_t::replace),
                  "application/json");
}

}  // namespace

void AddResponsesRoutes(httplib::Server& server, const HttpContext& ctx) {
  server.Post("/v1/responses",
              [ctx](const httplib::Request& q, httplib::Response& r) {
                Create(ctx, q, r);
              });
  const char* one = R"(/v1/responses/([A-Za-z0-9_.\-]+)()$)";
  const char* items = R"(/v1/responses/([A-Za-z0-9_.\-]+)(/input_items))";
  server.Get(one, [ctx](const httplib::Request& q, httplib::Response& r) {
    Stored(ctx, q, r, "GET /v1/responses/{id}");
  });
  server.Get(items, [ctx](const httplib::Request& q, httplib::Response& r) {
    Stored(ctx, q, r, "GET /v1/responses/{id}/input_items");
  });
  server.Delete(one, [ctx](const httplib::Request& q, httplib::Response& r) {
    Stored(ctx, q, r, "DELETE /v1/responses/{id}");
  });
}

}  // namespace inferd::http
