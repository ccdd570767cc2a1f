// POST /v1/chat/completions and POST /v1/completions: the body read into an
// inferd.v1 GenerateRequest (chat_request.h), the generation's messages
// from the request layer through the call's outbox, written as one
// response (with heartbeats while the engine works) or as server-sent
// events (`data: {...}` chunks, then `data: [DONE]`).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/chat/tool_parser.h"
#include "runtime/common/status_macros.h"
#include "service/http/chat_request.h"
#include "service/http/http_common.h"
#include "service/http/openai_logprobs.h"
#include "service/http/routes.h"
#include "service/request/outbox.h"

namespace inferd::http {
namespace {

using GenOutbox = Outbox<GenerateOutput>;

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
  bool done = false;
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

// The stream's end: the usage chunk when asked for, then [DONE].
void EndStream(StreamState& st, httplib::DataSink& sink) {
  if (st.include_usage) {
    Json chunk = StreamChunk(st, Json::array());
    chunk["usage"] = {{"prompt_tokens", st.prompt_tokens},
                      {"completion_tokens", st.completion_tokens},
                      {"total_tokens", st.prompt_tokens + st.completion_tokens}};
    SendEvent(sink, chunk);
  }
  const std::string done = "data: [DONE]\n\n";
  sink.write(done.data(), done.size());
  st.done = true;
  sink.done();
}

// One message of the engine as SSE chunks; false ends the stream.
bool StreamNext(GenOutbox& outbox, const HttpCall& call, StreamState& st,
                httplib::DataSink& sink) {
  if (st.done) return false;
  GenOutbox::Next next = outbox.Pull();
  if (!next.item.has_value()) {
    // Headers are gone: the error travels as an event, then the stream
    // ends (as OpenAI-compatible servers do).
    SendEvent(sink, Json{{"error", ErrorJson(call.Named(*next.end))}});
    st.done = true;
    sink.done();
    return true;
  }
  Json chunk = StreamChunk(st, Json::array({StreamChoice(*next.item, st)}));
  if (st.include_usage) chunk["usage"] = Json();
  if (!SendEvent(sink, chunk)) return false;  // the client left: aborted
  if (next.item->last) EndStream(st, sink);
  return true;
}

// A non-streaming answer. The first message (or the error a request meets
// in preparation) decides the status; when more follow, the answer is sent
// chunked, a space (JSON's leading whitespace) every kHeartbeatSeconds
// while the engine works: a client that left fails that write and its
// generation is aborted, as a stream's is. An error after that point is
// the body's error object (the status was sent).
void Complete(httplib::Response& res, std::shared_ptr<HttpCall> call,
              std::shared_ptr<GenOutbox> outbox, bool chat,
              const AnswerIds& ids, const EchoPlan& echo) {
  auto built = std::make_shared<Completion>(chat, echo);
  GenOutbox::Next first = outbox->Pull();
  if (!first.item.has_value()) {
    call->Fail(res, *first.end);
    return;
  }
  built->Add(*first.item);
  call->set_status(absl::OkStatus());
  if (first.item->last) {
    res.set_content(built->Finish(ids).dump(), "application/json");
    return;
  }
  auto done = std::make_shared<bool>(false);
  auto next_beat = std::make_shared<absl::Time>(
      absl::Now() + absl::Seconds(kHeartbeatSeconds));
  res.set_chunked_content_provider(
      "application/json",
      [outbox, call, built, done, next_beat, ids](size_t,
                                                   httplib::DataSink& sink) {
        // A heartbeat when one is due, however busy the outbox is.
        if (absl::Now() >= *next_beat) {
          *next_beat = absl::Now() + absl::Seconds(kHeartbeatSeconds);
          if (!sink.write(" ", 1)) return false;
        }
        GenOutbox::Next m = outbox->Pull(*next_beat - absl::Now());
        if (!m.item.has_value() && !m.end.has_value()) return true;
        std::string body;
        if (!m.item.has_value()) {
          body = Json{{"error", ErrorJson(call->Named(*m.end))}}.dump(
              -1, ' ', false, Json::error_handler_t::replace);
        } else {
          built->Add(*m.item);
          if (!m.item->last) return true;
          body = built->Finish(ids).dump();
        }
        *done = true;
        if (!sink.write(body.data(), body.size())) return false;
        sink.done();
        return true;
      },
      [outbox, call, done](bool success) {
        if (!success || !*done) {
          const absl::Status left =
              absl::CancelledError("the client closed the connection");
          outbox->Cancel(left);
          call->set_status(left);
        }
      });
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

// Server-sent events; the provider runs on this worker thread, pulling the
// engine's messages as they come.
void StartStream(httplib::Response& res, std::shared_ptr<HttpCall> call,
                 std::shared_ptr<GenOutbox> outbox,
                 std::shared_ptr<StreamState> state) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [outbox, call, state](size_t, httplib::DataSink& sink) {
        return StreamNext(*outbox, *call, *state, sink);
      },
      [outbox, call, state](bool success) {
        if (!success || !state->done) {
          const absl::Status left =
              absl::CancelledError("the client closed the stream");
          outbox->Cancel(left);
          call->set_status(left);
        }
      });
  call->set_status(absl::OkStatus());
}

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
  if (absl::Status s = ReadGenerateBody(*body, chat, &g);
      !s.ok()) {
    call->Fail(res, s);
    return;
  }
  auto outbox = std::make_shared<GenOutbox>();
  std::string model;
  absl::StatusOr<std::shared_ptr<RequestHandle>> handle =
      ctx.requests->Generate(
          std::move(g.gen),
          [outbox](absl::StatusOr<GenerateOutput> m) {
            if (!m.ok()) {
              outbox->End(m.status());
              return;
            }
            const bool last = m->last;
            outbox->Push(*std::move(m));
            if (last) outbox->End(absl::OkStatus());
          },
          &model);
  call->set_model(model);
  if (!handle.ok()) {
    call->Fail(res, handle.status());
    return;
  }
  outbox->SetCancel([h = *handle] { h->Abort(); });
  const AnswerIds ids{absl::StrCat(chat ? "chatcmpl-" : "cmpl-", NowNanos()),
                      NowSeconds(), model, g.top_logprobs};
  if (!g.stream) {
    Complete(res, call, outbox, chat, ids, g.echo);
    return;
  }
  auto state = std::make_shared<StreamState>();
  state->chat = chat;
  state->include_usage = g.include_usage;
  state->ids = ids;
  state->echo = g.echo.echo;
  StartStream(res, call, outbox, state);
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
