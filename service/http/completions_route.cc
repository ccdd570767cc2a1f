// POST /v1/chat/completions and POST /v1/completions: the body read into
// the request layer's GenerateInput (chat_request.h), the generation run by
// RunGeneration (generation_runner.h) and written by CompletionWriter as one
// response or as server-sent events (`data: {...}` chunks, then
// `data: [DONE]`).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/chat/tool_parser.h"
#include "runtime/common/status_macros.h"
#include "service/http/chat_request.h"
#include "service/http/generation_runner.h"
#include "service/http/http_common.h"
#include "service/http/openai_logprobs.h"
#include "service/http/routes.h"

namespace inferd::http {
namespace {

// What every chunk of an answer repeats.
struct AnswerIds {
  std::string id;
  int64_t created = 0;
  std::string model;
  int top_logprobs = 0;
};

// A non-streaming answer, built message by message.
class Completion {
 public:
  Completion(bool chat, const EchoPlan& echo) : chat_(chat), echo_(echo) {}

  void Add(const GenerateOutput& m) {
    if (m.echo.has_value()) prompt_ = *m.echo;
    const size_t i = static_cast<size_t>(m.sample_index);
    if (i >= choices_.size()) choices_.resize(i + 1);
    Choice& c = choices_[i];
    if (!c.echoed) {
      if (echo_.echo) c.text = prompt_.text;
      c.echoed = true;
    }
    if (!m.prompt_logprobs.empty()) prompt_logprobs_ = m.prompt_logprobs;
    const bool finished = m.finish != FinishReason::kNone;
    if (echo_.prompt_only) {
      // The one generated token is not part of the answer.
      if (finished) {
        c.finish = "length";
        prompt_tokens_ = m.usage.prompt_tokens;
      }
      return;
    }
    c.text += m.text;
    c.reasoning += m.reasoning;
    c.tool_calls.insert(c.tool_calls.end(), m.tool_calls.begin(),
                        m.tool_calls.end());
    c.logprobs.insert(c.logprobs.end(), m.logprobs.begin(), m.logprobs.end());
    c.any_logprobs |= !m.logprobs.empty();
    if (finished) {
      c.finish = FinishReasonName(m);
      prompt_tokens_ = m.usage.prompt_tokens;
      completion_tokens_ += m.usage.completion_tokens;
    }
  }

  Json Finish(const AnswerIds& ids) const {
    Json out_choices = Json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      const Choice& ch = choices_[i];
      Json c = {{"index", i}};
      if (chat_) {
        c["message"] = Message(ch);
      } else {
        c["text"] = ch.text;
      }
      int64_t offset = 0;
      c["logprobs"] =
          echo_.logprobs ? EchoLogprobsJson(prompt_.first_token,
                                            prompt_logprobs_, ch.logprobs,
                                            ids.top_logprobs)
          : !ch.any_logprobs ? Json()
          : chat_ ? LogprobsJson(ch.logprobs, ids.top_logprobs)
                  : LegacyLogprobsJson(ch.logprobs, ids.top_logprobs, &offset);
      c["finish_reason"] = ch.finish;
      out_choices.push_back(std::move(c));
    }
    return Json{{"id", ids.id},
                {"object", chat_ ? "chat.completion" : "text_completion"},
                {"created", ids.created},
                {"model", ids.model},
                {"choices", out_choices},
                {"usage",
                 {{"prompt_tokens", prompt_tokens_},
                  {"completion_tokens", completion_tokens_},
                  {"total_tokens", prompt_tokens_ + completion_tokens_}}}};
  }

 private:
  struct Choice {
    std::string text;
    std::string reasoning;
    std::vector<ToolCallDelta> tool_calls;
    std::string finish = "stop";
    LogprobList logprobs;
    bool any_logprobs = false;
    bool echoed = false;
  };

  static Json Message(const Choice& ch) {
    Json msg = {{"role", "assistant"}, {"content", ch.text}};
    if (!ch.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ToolCall& t : JoinToolCalls(ch.tool_calls)) {
        calls.push_back({{"id", t.id},
                         {"type", "function"},
                         {"function", {{"name", t.name},
                                       {"arguments", t.arguments}}}});
      }
      msg["tool_calls"] = std::move(calls);
      if (ch.text.empty()) msg["content"] = Json();
    }
    if (!ch.reasoning.empty()) msg["reasoning_content"] = ch.reasoning;
    return msg;
  }

  const bool chat_;
  const EchoPlan echo_;
  // The prompt (echo), from the first output.
  PromptEcho prompt_;
  std::vector<Choice> choices_;
  int64_t prompt_tokens_ = 0;
  int64_t completion_tokens_ = 0;
  // Echo with logprobs: the prompt's entries (sample 0 carries them).
  LogprobList prompt_logprobs_;
};


// A streamed answer's progress.
struct StreamState {
  bool chat = false;
  bool include_usage = false;
  AnswerIds ids;
  std::vector<bool> role_sent;
  // Completions' echo: whether asked, the prompt text (from the first
  // output), and which choices have had it.
  bool echo = false;
  std::string echo_text;
  std::vector<bool> echoed;
  // Completions' logprobs: each choice's text offset so far.
  std::vector<int64_t> text_offset;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// A chat chunk's delta: role (first chunk of a choice), reasoning, content,
// tool call pieces.
Json ChatDelta(const GenerateOutput& m, bool first) {
  Json delta = Json::object();
  if (first) delta["role"] = "assistant";
  if (!m.reasoning.empty()) delta["reasoning_content"] = m.reasoning;
  delta["content"] =
      m.text.empty() && (!m.tool_calls.empty() || !m.reasoning.empty())
          ? Json()
          : Json(m.text);
  if (!m.tool_calls.empty()) {
    Json calls = Json::array();
    for (const ToolCallDelta& t : m.tool_calls) {
      Json c = {{"index", t.index}};
      if (!t.id.empty()) {
        c["id"] = t.id;
        c["type"] = "function";
      }
      Json f = Json::object();
      if (!t.name.empty()) f["name"] = t.name;
      f["arguments"] = t.arguments;
      c["function"] = std::move(f);
      calls.push_back(std::move(c));
    }
    delta["tool_calls"] = std::move(calls);
  }
  return delta;
}

// One engine message as a chunk's choice.
Json StreamChoice(const GenerateOutput& m, StreamState& st) {
  if (m.echo.has_value()) st.echo_text = m.echo->text;
  const size_t i = static_cast<size_t>(m.sample_index);
  if (i >= st.role_sent.size()) st.role_sent.resize(i + 1, false);
  if (i >= st.echoed.size()) st.echoed.resize(i + 1, false);
  if (i >= st.text_offset.size()) st.text_offset.resize(i + 1, 0);
  Json choice = {{"index", i}};
  if (st.chat) {
    choice["delta"] = ChatDelta(m, !st.role_sent[i]);
    st.role_sent[i] = true;
  } else {
    // An echo puts the prompt before each choice's first text.
    choice["text"] =
        st.echoed[i] || !st.echo ? m.text : st.echo_text + m.text;
    st.echoed[i] = true;
  }
  const int top = st.ids.top_logprobs;
  choice["logprobs"] =
      m.logprobs.empty() ? Json()
      : st.chat ? LogprobsJson(m.logprobs, top)
                : LegacyLogprobsJson(m.logprobs, top, &st.text_offset[i]);
  const bool finished = m.finish != FinishReason::kNone;
  choice["finish_reason"] = finished ? Json(FinishReasonName(m)) : Json();
  if (finished) {
    st.prompt_tokens = m.usage.prompt_tokens;
    st.completion_tokens += m.usage.completion_tokens;
  }
  return choice;
}

Json StreamChunk(const StreamState& st, Json choices) {
  return Json{{"id", st.ids.id},
              {"object", st.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", st.ids.created},
              {"model", st.ids.model},
              {"choices", std::move(choices)}};
}

// What a generation route reads of its body beyond the GenerateInput.
struct GenerateBody {
  GenerateInput gen;
  EchoPlan echo;
  bool stream = false;
  bool include_usage = false;
  int top_logprobs = 0;
};

absl::Status ReadGenerateBody(const Json& body, bool chat, GenerateBody* out) {
  RETURN_IF_ERROR(chat ? ToChatRequest(body, &out->gen)
                       : ToCompletionRequest(body, &out->gen, &out->echo));
  RETURN_IF_ERROR(Bool(body, "stream", &out->stream));
  if (out->stream && (out->echo.logprobs || out->echo.prompt_only)) {
    return Invalid("stream", "echo with logprobs or max_tokens 0 is answered "
                             "whole; ask with stream false");
  }
  if (auto so = body.find("stream_options");
      so != body.end() && so->is_object()) {
    out->include_usage = so->value("include_usage", false);
  }
  out->top_logprobs =
      chat ? body.value("top_logprobs", 0) : body.value("logprobs", 0);
  return absl::OkStatus();
}

// One `data: {...}` event.
std::string DataEvent(const Json& event) {
  return absl::StrCat("data: ", event.dump(), "\n\n");
}

// A chat or completions answer: whole (Completion) or as `data:` chunks,
// then `data: [DONE]`.
class CompletionWriter : public AnswerWriter {
 public:
  CompletionWriter(bool chat, const GenerateBody& g)
      : stream_(g.stream), whole_(chat, g.echo) {
    st_.chat = chat;
    st_.include_usage = g.include_usage;
    st_.echo = g.echo.echo;
    st_.ids = {absl::StrCat(chat ? "chatcmpl-" : "cmpl-", NowNanos()),
               NowSeconds(), "", g.top_logprobs};
  }

  void Start(const std::string& model) override { st_.ids.model = model; }

  std::string Add(const GenerateOutput& m) override {
    if (!stream_) {
      whole_.Add(m);
      return "";
    }
    Json chunk = StreamChunk(st_, Json::array({StreamChoice(m, st_)}));
    if (st_.include_usage) chunk["usage"] = Json();
    return DataEvent(chunk);
  }

  std::string Finish() override {
    if (!stream_) return whole_.Finish(st_.ids).dump();
    std::string out;
    if (st_.include_usage) {
      Json chunk = StreamChunk(st_, Json::array());
      chunk["usage"] = {
          {"prompt_tokens", st_.prompt_tokens},
          {"completion_tokens", st_.completion_tokens},
          {"total_tokens", st_.prompt_tokens + st_.completion_tokens}};
      out = DataEvent(chunk);
    }
    return out + "data: [DONE]\n\n";
  }

  // Headers are gone: the error travels as an event, then the stream ends
  // (as OpenAI-compatible servers do).
  std::string StreamError(const absl::Status& status) override {
    return DataEvent(Json{{"error", ErrorJson(status)}});
  }

  std::string BodyError(const absl::Status& status) override {
    return Json{{"error", ErrorJson(status)}}.dump(
        -1, ' ', false, Json::error_handler_t::replace);
  }

 private:
  const bool stream_;
  Completion whole_;
  StreamState st_;
};

void Generate(const HttpContext& ctx, const httplib::Request& req,
              httplib::Response& res, bool chat) {
  // Shared with a stream's provider: the call stays active (the drain
  // waits for it) until the last event is written.
  auto call = std::make_shared<HttpCall>(
      ctx, chat ? "POST /v1/chat/completions" : "POST /v1/completions",
      chat ? Api::kChat : Api::kCompletions);
  std::optional<Json> body = call->AdmitBody(req, res);
  if (!body.has_value()) return;
  if (chat && body->contains("max_completion_tokens") &&
      !body->contains("max_tokens")) {
    call->Alias("max_tokens", "max_completion_tokens");
  }
  GenerateBody g;
  if (absl::Status s = ReadGenerateBody(*body, chat, &g); !s.ok()) {
    call->Fail(res, s);
    return;
  }
  auto writer = std::make_shared<CompletionWriter>(chat, g);
  RunGeneration(ctx, call, std::move(g.gen), std::move(writer), g.stream,
                res);
}

}  // namespace

void AddCompletionRoutes(httplib::Server& server, const HttpContext& ctx) {
  server.Post("/v1/chat/completions",
              [ctx](const httplib::Request& q, httplib::Response& r) {
                Generate(ctx, q, r, /*chat=*/true);
              });
  server.Post("/v1/completions",
              [ctx](const httplib::Request& q, httplib::Response& r) {
                Generate(ctx, q, r, /*chat=*/false);
              });
}

}  // namespace inferd::http
