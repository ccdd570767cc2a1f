#include "service/http_api.h"

#include <httplib.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "runtime/chat/tool_parser.h"
#include "runtime/common/status_macros.h"

namespace inferd {
namespace {

using Json = nlohmann::ordered_json;

// --------------------------------------------------------------- errors

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

const char* ErrorType(int http_status) {
  switch (http_status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    default:
      return http_status < 500 ? "invalid_request_error" : "server_error";
  }
}

// The status payload under which Invalid records the field an error is
// about (OpenAI's `param`).
constexpr char kParamPayload[] = "type.inferd.dev/http-param";

// The OpenAI name of the tool field a request-layer error names
// ("tools[1].parameters: ..." -> tools[1].function.parameters), else "".
std::string ToolParam(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument &&
      status.code() != absl::StatusCode::kFailedPrecondition) {
    return "";
  }
  absl::string_view m = status.message();
  const size_t colon = m.find(": ");
  if (colon == absl::string_view::npos) return "";
  absl::string_view f = m.substr(0, colon);
  if (absl::StartsWith(f, "tool_choice")) return "tool_choice";
  if (f == "tools" || f == "parallel_tool_calls") return std::string(f);
  if (absl::StartsWith(f, "tools[")) {
    const size_t close = f.find(']');
    if (close == absl::string_view::npos) return "";
    absl::string_view rest = f.substr(close + 1);
    return absl::StrCat(f.substr(0, close + 1),
                        rest.empty() ? "" : absl::StrCat(".function", rest));
  }
  return "";
}

// OpenAI's error object, with the HTTP status of the gRPC code. `param`
// names the request field when the error is about one (default: the one
// Invalid recorded in the status).
void ReplyError(httplib::Response& res, const absl::Status& status,
                const std::string& param = "") {
  const int http = HttpStatusOf(status.code());
  std::string field = param;
  if (field.empty()) {
    if (absl::optional<absl::Cord> p = status.GetPayload(kParamPayload)) {
      field = std::string(*p);
    }
  }
  if (field.empty()) field = ToolParam(status);
  Json e = {{"message", std::string(status.message())},
            {"type", ErrorType(http)},
            {"param", field.empty() ? Json() : Json(field)},
            {"code", absl::AsciiStrToLower(absl::StatusCodeToString(status.code()))}};
  res.status = http;
  // A message may quote the client's bytes (a JSON parse error does):
  // invalid UTF-8 in them is replaced, not thrown.
  res.set_content(
      Json{{"error", e}}.dump(-1, ' ', false, Json::error_handler_t::replace),
      "application/json");
}

// A 400 naming the field (in the message, and as `param` for ReplyError).
absl::Status Invalid(const std::string& param, absl::string_view what) {
  absl::Status s = absl::InvalidArgumentError(absl::StrCat(param, ": ", what));
  s.SetPayload(kParamPayload, absl::Cord(param));
  return s;
}

// ------------------------------------------------------ waiting for answers

// One engine answer, waited for on the HTTP worker thread.
template <typename T>
class Answer {
 public:
  void Set(absl::StatusOr<T> v) {
    std::lock_guard<std::mutex> lock(mu_);
    value_ = std::move(v);
    cv_.notify_all();
  }
  absl::StatusOr<T> Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return value_.has_value(); });
    return std::move(*value_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<absl::StatusOr<T>> value_;
};

// A generation's messages, in order, until the last one (or an error).
class MessageQueue {
 public:
  void Push(absl::StatusOr<v1::GenerateResponse> m, bool last) {
    std::lock_guard<std::mutex> lock(mu_);
    const bool end = last || !m.ok();
    queue_.emplace_back(std::move(m), end);
    cv_.notify_all();
  }
  // Blocks for the next message; `last` is set on the final one.
  absl::StatusOr<v1::GenerateResponse> Pop(bool* last) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !queue_.empty(); });
    return Take(last);
  }
  // Pop, waiting at most `timeout`; nothing when none came by then.
  std::optional<absl::StatusOr<v1::GenerateResponse>> PopFor(
      absl::Duration timeout, bool* last) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                      [this] { return !queue_.empty(); })) {
      return std::nullopt;
    }
    return Take(last);
  }

 private:
  absl::StatusOr<v1::GenerateResponse> Take(bool* last) {
    auto item = std::move(queue_.front());
    queue_.pop_front();
    *last = item.second;
    return std::move(item.first);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<absl::StatusOr<v1::GenerateResponse>, bool>> queue_;
};

// Non-streaming answers: how often a space is written while the engine
// works, to notice a client that left.
constexpr double kHeartbeatSeconds = 0.5;

// Counts an HTTP call as active (the drain waits for it) and reports it.
class HttpCall {
 public:
  HttpCall(RequestLayer* requests, std::string route)
      : requests_(requests), route_(std::move(route)), start_(absl::Now()) {
    requests_->active_counter().fetch_add(1);
  }
  ~HttpCall() {
    requests_->active_counter().fetch_sub(1);
    if (requests_->observer() != nullptr) {
      requests_->observer()->OnRpcDone(
          route_, model_, status_, absl::ToDoubleSeconds(absl::Now() - start_));
    }
  }
  void set_model(const std::string& m) { model_ = m; }
  void set_status(const absl::Status& s) { status_ = s; }

 private:
  RequestLayer* requests_;
  std::string route_;
  std::string model_;
  absl::Status status_;
  absl::Time start_;
};

// ------------------------------------------------------------ requests

int64_t NowSeconds() { return absl::ToUnixSeconds(absl::Now()); }

// The text of a message's content: a string, null, or text parts.
absl::StatusOr<std::string> ContentText(const Json& content,
                                        const std::string& param) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return Invalid(param, "must be a string or an array of content parts");
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string p = absl::StrCat(param, "[", i, "]");
    if (!part.is_object() || part.value("type", "") != "text" ||
        !part.contains("text") || !part["text"].is_string()) {
      return Invalid(p, "only {\"type\": \"text\", \"text\": ...} parts are "
                        "supported (this server serves text models)");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

template <typename T>
absl::Status Number(const Json& body, const char* key, T* out, bool* set = nullptr) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return Invalid(key, "must be a number");
  *out = it->get<T>();
  if (set != nullptr) *set = true;
  return absl::OkStatus();
}

// An optional boolean field: unset or null leaves *out as it is.
absl::Status Bool(const Json& body, const char* key, bool* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return Invalid(key, "must be true or false");
  *out = it->get<bool>();
  return absl::OkStatus();
}

// A JSON array of token ids, appended to `out`.
absl::Status ToTokenIds(const Json& ids, const std::string& param,
                        google::protobuf::RepeatedField<uint32_t>* out) {
  if (!ids.is_array()) return Invalid(param, "must be a list of token ids");
  for (const Json& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > UINT32_MAX) {
      return Invalid(param, "token ids must be integers in [0, 2^32)");
    }
    out->Add(id.get<uint32_t>());
  }
  return absl::OkStatus();
}

// An object's string field, "" when absent or not a string (never throws).
std::string StringField(const Json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

// One chat message (OpenAI's shape) as inferd's; `i` its index. Assistant
// messages may carry tool_calls (content then may be null), tool messages
// tool_call_id (and name).
absl::Status ToChatMessage(const Json& m, size_t i, v1::ChatMessage* out) {
  const std::string p = absl::StrCat("messages[", i, "]");
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
    return Invalid(p, "must be an object with a role");
  }
  std::string role = m["role"].get<std::string>();
  if (role == "developer") role = "system";  // OpenAI's newer name
  ASSIGN_OR_RETURN(std::string content,
                   ContentText(m.value("content", Json()),
                               absl::StrCat(p, ".content")));
  if (auto calls = m.find("tool_calls");
      calls != m.end() && !calls->is_null()) {
    const std::string cp = absl::StrCat(p, ".tool_calls");
    if (role != "assistant") return Invalid(cp, "only assistant messages call tools");
    if (!calls->is_array()) return Invalid(cp, "must be an array");
    for (size_t j = 0; j < calls->size(); ++j) {
      const Json& c = (*calls)[j];
      const std::string q = absl::StrCat(cp, "[", j, "]");
      if (!c.is_object() || !c.contains("function") ||
          !c["function"].is_object()) {
        return Invalid(q, "must be {\"id\", \"type\": \"function\", "
                          "\"function\": {\"name\", \"arguments\"}}");
      }
      if ((c.contains("type") && StringField(c, "type") != "function")) {
        return Invalid(absl::StrCat(q, ".type"), "must be \"function\"");
      }
      const Json& f = c["function"];
      if (!f.contains("name") || !f["name"].is_string()) {
        return Invalid(absl::StrCat(q, ".function.name"), "must be a string");
      }
      v1::ToolCall* t = out->add_tool_calls();
      if (c.contains("id") && c["id"].is_string()) t->set_id(c["id"].get<std::string>());
      t->set_name(f["name"].get<std::string>());
      if (auto a = f.find("arguments"); a != f.end() && !a->is_null()) {
        // OpenAI clients send a string; an object is taken as well.
        if (a->is_string()) {
          t->set_arguments(a->get<std::string>());
        } else if (a->is_object()) {
          t->set_arguments(a->dump());
        } else {
          return Invalid(absl::StrCat(q, ".function.arguments"),
                         "must be a JSON string");
        }
      }
    }
  }
  if (auto id = m.find("tool_call_id"); id != m.end() && !id->is_null()) {
    if (!id->is_string()) return Invalid(absl::StrCat(p, ".tool_call_id"), "must be a string");
    out->set_tool_call_id(id->get<std::string>());
  }
  if (auto n = m.find("name"); n != m.end() && n->is_string()) {
    out->set_name(n->get<std::string>());
  }
  for (const char* key : {"reasoning_content", "reasoning"}) {
    if (auto r = m.find(key); r != m.end() && r->is_string()) {
      out->set_reasoning_content(r->get<std::string>());
    }
  }
  out->set_role(std::move(role));
  out->set_content(std::move(content));
  return absl::OkStatus();
}

// `tools` (OpenAI's shape: function tools).
absl::Status ToToolList(const Json& body,
                        google::protobuf::RepeatedPtrField<v1::Tool>* tools) {
  if (auto t = body.find("tools"); t != body.end() && !t->is_null()) {
    if (!t->is_array()) return Invalid("tools", "must be an array");
    for (size_t i = 0; i < t->size(); ++i) {
      const Json& tool = (*t)[i];
      const std::string p = absl::StrCat("tools[", i, "]");
      if (!tool.is_object() || StringField(tool, "type") != "function") {
        return Invalid(absl::StrCat(p, ".type"),
                       "only {\"type\": \"function\", \"function\": {...}} "
                       "tools are supported");
      }
      auto f = tool.find("function");
      if (f == tool.end() || !f->is_object()) {
        return Invalid(absl::StrCat(p, ".function"), "must be an object");
      }
      if (!f->contains("name") || !(*f)["name"].is_string()) {
        return Invalid(absl::StrCat(p, ".function.name"), "must be a string");
      }
      v1::Tool* out = tools->Add();
      out->set_name((*f)["name"].get<std::string>());
      if (auto st = f->find("strict"); st != f->end() && st->is_boolean()) {
        out->set_strict(st->get<bool>());
      }
      if (auto d = f->find("description"); d != f->end() && !d->is_null()) {
        if (!d->is_string()) {
          return Invalid(absl::StrCat(p, ".function.description"), "must be a string");
        }
        out->set_description(d->get<std::string>());
      }
      if (auto ps = f->find("parameters"); ps != f->end() && !ps->is_null()) {
        if (!ps->is_object()) {
          return Invalid(absl::StrCat(p, ".function.parameters"),
                         "must be a JSON Schema object");
        }
        out->set_parameters(ps->dump());
      }
    }
  }
  return absl::OkStatus();
}

// tools, tool_choice, parallel_tool_calls (OpenAI's shapes).
absl::Status ToTools(const Json& body, v1::GenerateRequest* req) {
  if (auto f = body.find("functions");
      f != body.end() && f->is_array() && !f->empty()) {
    return Invalid("functions",
                   "the legacy functions field is not supported; use tools");
  }
  RETURN_IF_ERROR(ToToolList(body, req->mutable_tools()));
  if (auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) {
    v1::ToolChoice* tc = req->mutable_tool_choice();
    if (c->is_string()) {
      const std::string v = c->get<std::string>();
      if (v == "none") {
        tc->set_mode(v1::TOOL_CHOICE_MODE_NONE);
      } else if (v == "auto") {
        tc->set_mode(v1::TOOL_CHOICE_MODE_AUTO);
      } else if (v == "required") {
        tc->set_mode(v1::TOOL_CHOICE_MODE_REQUIRED);
      } else {
        return Invalid("tool_choice",
                       "must be none, auto, required or {\"type\": "
                       "\"function\", \"function\": {\"name\": ...}}");
      }
    } else if (c->is_object() && StringField(*c, "type") == "function" &&
               c->contains("function") && (*c)["function"].is_object() &&
               (*c)["function"].contains("name") &&
               (*c)["function"]["name"].is_string()) {
      tc->set_function_name((*c)["function"]["name"].get<std::string>());
    } else {
      return Invalid("tool_choice",
                     "must be none, auto, required or {\"type\": "
                     "\"function\", \"function\": {\"name\": ...}}");
    }
  }
  if (auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    bool v = true;
    RETURN_IF_ERROR(Bool(body, "parallel_tool_calls", &v));
    req->set_parallel_tool_calls(v);
  }
  return absl::OkStatus();
}

// The sampling fields chat and completions share (OpenAI's names, and the
// extras vLLM accepts: top_k, min_p, repetition_penalty, ignore_eos,
// min_tokens).
absl::Status ToSampling(const Json& body, v1::GenerateRequest* req,
                        bool chat) {
  v1::SamplingParams* s = req->mutable_sampling();
  int64_t max_tokens = 0;
  bool has_max = false;
  RETURN_IF_ERROR(Number(body, "max_tokens", &max_tokens, &has_max));
  if (chat) {
    RETURN_IF_ERROR(
        Number(body, "max_completion_tokens", &max_tokens, &has_max));
  }
  if (has_max) {
    if (max_tokens < 1) return Invalid("max_tokens", "must be at least 1");
    s->set_max_tokens(static_cast<uint32_t>(
        std::min<int64_t>(max_tokens, std::numeric_limits<uint32_t>::max())));
  }
  double temperature = 1.0;
  bool has_t = false;
  RETURN_IF_ERROR(Number(body, "temperature", &temperature, &has_t));
  if (has_t) s->set_temperature(static_cast<float>(temperature));
  double top_p = 1.0;
  bool has_p = false;
  RETURN_IF_ERROR(Number(body, "top_p", &top_p, &has_p));
  if (has_p) s->set_top_p(static_cast<float>(top_p));
  int64_t top_k = 0;
  RETURN_IF_ERROR(Number(body, "top_k", &top_k));
  if (top_k > 0) s->set_top_k(static_cast<int32_t>(top_k));
  double min_p = 0, presence = 0, frequency = 0, repetition = 1;
  bool has_rep = false;
  RETURN_IF_ERROR(Number(body, "min_p", &min_p));
  RETURN_IF_ERROR(Number(body, "presence_penalty", &presence));
  RETURN_IF_ERROR(Number(body, "frequency_penalty", &frequency));
  RETURN_IF_ERROR(Number(body, "repetition_penalty", &repetition, &has_rep));
  s->set_min_p(static_cast<float>(min_p));
  s->set_presence_penalty(static_cast<float>(presence));
  s->set_frequency_penalty(static_cast<float>(frequency));
  if (has_rep) s->set_repetition_penalty(static_cast<float>(repetition));
  // vLLM's extras: ignore_eos (benchmarks' fixed output lengths) and
  // min_tokens.
  bool ignore_eos = false;
  RETURN_IF_ERROR(Bool(body, "ignore_eos", &ignore_eos));
  s->set_ignore_eos(ignore_eos);
  int64_t min_tokens = 0;
  RETURN_IF_ERROR(Number(body, "min_tokens", &min_tokens));
  if (min_tokens < 0) return Invalid("min_tokens", "must be 0 or more");
  s->set_min_tokens(static_cast<uint32_t>(
      std::min<int64_t>(min_tokens, std::numeric_limits<uint32_t>::max())));
  int64_t seed = 0;
  bool has_seed = false;
  RETURN_IF_ERROR(Number(body, "seed", &seed, &has_seed));
  if (has_seed) s->set_seed(static_cast<uint64_t>(seed));
  int64_t n = 1;
  RETURN_IF_ERROR(Number(body, "n", &n));
  if (n < 1 || n > 128) return Invalid("n", "must be 1 to 128");
  if (n > 1) s->set_n(static_cast<uint32_t>(n));
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      s->add_stop(it->get<std::string>());
    } else if (it->is_array()) {
      for (const Json& x : *it) {
        if (!x.is_string()) return Invalid("stop", "must hold strings");
        s->add_stop(x.get<std::string>());
      }
    } else {
      return Invalid("stop", "must be a string or an array of strings");
    }
  }
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return Invalid("logit_bias", "must be an object");
    for (const auto& [k, v] : it->items()) {
      uint32_t id = 0;
      if (!absl::SimpleAtoi(k, &id) || !v.is_number()) {
        return Invalid("logit_bias",
                       "keys are token ids, values numbers (-100 to 100)");
      }
      (*s->mutable_logit_bias())[id] = v.get<float>();
    }
  }
  // logprobs: chat has logprobs (bool) + top_logprobs; completions has
  // logprobs (int, the top count).
  int64_t top = 0;
  if (chat) {
    bool want = false;
    RETURN_IF_ERROR(Bool(body, "logprobs", &want));
    RETURN_IF_ERROR(Number(body, "top_logprobs", &top));
    if (top > 0 && !want) {
      return Invalid("top_logprobs", "needs \"logprobs\": true");
    }
    if (want) s->set_logprobs(static_cast<uint32_t>(std::max<int64_t>(top, 1)));
  } else {
    RETURN_IF_ERROR(Number(body, "logprobs", &top));
    if (top > 0) s->set_logprobs(static_cast<uint32_t>(top));
  }
  return absl::OkStatus();
}

absl::Status ToResponseFormat(const Json& body, v1::GenerateRequest* req) {
  auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return Invalid("response_format", "must be an object");
  const std::string type = it->value("type", "");
  if (type == "text") return absl::OkStatus();
  if (type == "json_object") {
    req->mutable_response_format()->set_json_schema("{\"type\": \"object\"}");
    return absl::OkStatus();
  }
  if (type == "json_schema") {
    auto js = it->find("json_schema");
    if (js == it->end() || !js->is_object() || !js->contains("schema")) {
      return Invalid("response_format.json_schema",
                     "needs {\"name\": ..., \"schema\": {...}}");
    }
    req->mutable_response_format()->set_json_schema((*js)["schema"].dump());
    if (js->value("strict", false)) {
      req->mutable_response_format()->set_strict(true);
    }
    return absl::OkStatus();
  }
  return Invalid("response_format.type",
                 "must be text, json_object or json_schema");
}

absl::Status ToChatRequest(const Json& body, v1::GenerateRequest* req) {
  RETURN_IF_ERROR(ToTools(body, req));
  auto msgs = body.find("messages");
  if (msgs == body.end() || !msgs->is_array() || msgs->empty()) {
    return Invalid("messages", "must be a non-empty array");
  }
  for (size_t i = 0; i < msgs->size(); ++i) {
    RETURN_IF_ERROR(ToChatMessage((*msgs)[i], i, req->add_messages()));
  }
  RETURN_IF_ERROR(ToSampling(body, req, /*chat=*/true));
  return ToResponseFormat(body, req);
}

// `*echo`: the request asks for its prompt before each completion.
// Completions' `echo`: the prompt text before each choice; with
// `logprobs`, the prompt's tokens lead each choice's logprobs (the first
// one with null logprob, as it has no context); with `max_tokens` 0 the
// answer is the prompt alone (how evaluation harnesses score a text: the
// engine generates one token, which is dropped).
struct EchoPlan {
  bool echo = false;
  bool logprobs = false;
  bool prompt_only = false;
  std::string text;         // the prompt as text
  std::string first_token;  // the prompt's first token as text
};

absl::Status ToCompletionRequest(const Json& body, v1::GenerateRequest* req,
                                 EchoPlan* echo) {
  *echo = EchoPlan();
  RETURN_IF_ERROR(Bool(body, "echo", &echo->echo));
  const Json* source = &body;
  Json with_one_token;
  if (echo->echo) {
    int64_t logprobs = 0;
    bool has_logprobs = false;
    RETURN_IF_ERROR(Number(body, "logprobs", &logprobs, &has_logprobs));
    echo->logprobs = has_logprobs && logprobs >= 0;
    if (auto m = body.find("max_tokens");
        m != body.end() && m->is_number_integer() && m->get<int64_t>() == 0) {
      echo->prompt_only = true;
      with_one_token = body;
      with_one_token["max_tokens"] = 1;
      source = &with_one_token;
    }
    if (echo->logprobs) {
      req->mutable_sampling()->set_prompt_logprobs(static_cast<uint32_t>(
          std::clamp<int64_t>(logprobs, 1, 20)));
    }
  }
  if (body.contains("suffix") && !body["suffix"].is_null()) {
    return Invalid("suffix", "is not supported");
  }
  auto prompt = body.find("prompt");
  if (prompt == body.end()) return Invalid("prompt", "is required");
  const Json* p = &*prompt;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() ||
                                          (*p)[0].is_array())) {
    p = &(*p)[0];  // a batch of one
  }
  if (p->is_string()) {
    req->set_prompt(p->get<std::string>());
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
    RETURN_IF_ERROR(ToTokenIds(
        *p, "prompt", req->mutable_prompt_token_ids()->mutable_ids()));
  } else {
    return Invalid("prompt",
                   "must be a string or token ids (one prompt per request)");
  }
  RETURN_IF_ERROR(ToSampling(*source, req, /*chat=*/false));
  return ToResponseFormat(*source, req);
}

const char* FinishReasonName(v1::FinishReason r) {
  switch (r) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STOP:
    case v1::FINISH_REASON_EOS:
      return "stop";
    case v1::FINISH_REASON_TOOL_CALLS:
      return "tool_calls";
    default:
      return "stop";
  }
}

// Whether `s` is well-formed UTF-8 (shortest forms, no surrogates).
bool IsUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    int len = 0;
    uint32_t c = 0;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b >> 5) == 0x6) {
      len = 2;
      c = b & 0x1F;
    } else if ((b >> 4) == 0xE) {
      len = 3;
      c = b & 0x0F;
    } else if ((b >> 3) == 0x1E) {
      len = 4;
      c = b & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(len) > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto cb = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
      if ((cb >> 6) != 0x2) return false;
      c = (c << 6) | (cb & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < kMin[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
      return false;
    }
    i += static_cast<size_t>(len);
  }
  return true;
}

// OpenAI's token entry: the text the token adds, its UTF-8 bytes, and its
// logprob. A token that is part of a multi-byte character is written as
// "bytes:\xNN..." (its bytes alone are not text), as OpenAI does.
Json TokenJson(const v1::TokenLogprob& t) {
  const std::string& b = t.text_bytes();
  std::string text;
  if (IsUtf8(b)) {
    text = b;
  } else {
    text = "bytes:";
    for (char c : b) {
      absl::StrAppend(&text, "\\x",
                      absl::Hex(static_cast<uint8_t>(c), absl::kZeroPad2));
    }
  }
  std::vector<int> bytes;
  for (char c : b) bytes.push_back(static_cast<uint8_t>(c));
  return Json{{"token", text}, {"logprob", t.logprob()}, {"bytes", bytes}};
}

// Characters (code points) of well-formed UTF-8 text; bytes otherwise.
int64_t TextLength(const std::string& s) {
  if (!IsUtf8(s)) return static_cast<int64_t>(s.size());
  int64_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

// /v1/completions' (legacy) logprobs: parallel lists of tokens, their
// logprobs, {token: logprob} maps of the top ones, and each token's offset
// in the completion text, counted from `*offset` (advanced past them).
Json LegacyLogprobsJson(
    const google::protobuf::RepeatedPtrField<v1::SampledLogprobs>& lps,
    int top, int64_t* offset) {
  Json tokens = Json::array();
  Json token_logprobs = Json::array();
  Json top_logprobs = Json::array();
  Json text_offset = Json::array();
  for (const v1::SampledLogprobs& lp : lps) {
    const Json t = TokenJson(lp.sampled());
    tokens.push_back(t["token"]);
    token_logprobs.push_back(lp.sampled().logprob());
    Json tops = Json::object();
    for (int k = 0; k < lp.top_size() && k < top; ++k) {
      tops[TokenJson(lp.top(k))["token"].get<std::string>()] =
          lp.top(k).logprob();
    }
    top_logprobs.push_back(std::move(tops));
    text_offset.push_back(*offset);
    *offset += TextLength(lp.sampled().text_bytes());
  }
  return Json{{"tokens", tokens},
              {"token_logprobs", token_logprobs},
              {"top_logprobs", top_logprobs},
              {"text_offset", text_offset}};
}

// Completions' logprobs with an echo: the prompt's first token (null
// logprob and alternatives: it has no context), the prompt's other tokens,
// then the generated ones, offsets running over all of them.
Json EchoLogprobsJson(
    const std::string& first_token,
    const google::protobuf::RepeatedPtrField<v1::SampledLogprobs>& prompt,
    const google::protobuf::RepeatedPtrField<v1::SampledLogprobs>& generated,
    int top) {
  google::protobuf::RepeatedPtrField<v1::SampledLogprobs> all = prompt;
  for (const v1::SampledLogprobs& lp : generated) *all.Add() = lp;
  int64_t offset = TextLength(first_token);
  Json rest = LegacyLogprobsJson(all, top, &offset);
  Json out = {{"tokens", Json::array({first_token})},
              {"token_logprobs", Json::array({nullptr})},
              {"top_logprobs", Json::array({nullptr})},
              {"text_offset", Json::array({0})}};
  for (const char* key :
       {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    for (Json& v : rest[key]) out[key].push_back(std::move(v));
  }
  return out;
}

Json LogprobsJson(const google::protobuf::RepeatedPtrField<v1::SampledLogprobs>& lps,
                  int top) {
  Json content = Json::array();
  for (const v1::SampledLogprobs& lp : lps) {
    Json tops = Json::array();
    for (int k = 0; k < lp.top_size() && k < top; ++k) {
      tops.push_back(TokenJson(lp.top(k)));
    }
    Json entry = TokenJson(lp.sampled());
    entry["top_logprobs"] = std::move(tops);
    content.push_back(std::move(entry));
  }
  return Json{{"content", content}};
}

// ------------------------------------------------------------- handlers

class Handlers {
 public:
  Handlers(RequestLayer* requests, const ApiKeyAuth* auth)
      : requests_(requests), auth_(auth) {}

  // OK when the call may go on; else the error reply is written.
  bool Admit(const httplib::Request& req, httplib::Response& res) {
    if (auth_ == nullptr) return true;
    std::string key;
    const std::string h = req.get_header_value("Authorization");
    if (absl::StartsWithIgnoreCase(h, "bearer ")) {
      key = std::string(absl::StripAsciiWhitespace(h.substr(7)));
    }
    absl::Status s = auth_->CheckKey(key, "'Authorization: Bearer <key>'");
    if (s.ok()) return true;
    ReplyError(res, s);
    return false;
  }

  // The body as a JSON object; a 400 saying where the JSON breaks, or
  // naming `model` when it is not a string (every route reads it).
  absl::StatusOr<Json> Body(const httplib::Request& req) {
    Json body;
    try {
      body = Json::parse(req.body);
    } catch (const Json::parse_error& e) {
      // e.what(): "[json.exception.parse_error.101] parse error at line 1,
      // column 6: syntax error while parsing ...": keep from "parse error".
      const std::string what = e.what();
      const size_t at = what.find("parse error");
      return absl::InvalidArgumentError(absl::StrCat(
          "the request body is not valid JSON: ",
          at == std::string::npos ? what : what.substr(at)));
    }
    if (!body.is_object()) {
      return absl::InvalidArgumentError(
          "the request body must be a JSON object");
    }
    if (auto m = body.find("model"); m != body.end() && !m->is_string()) {
      return Invalid("model", "must be a string (a model name)");
    }
    return body;
  }

  void Health(const httplib::Request&, httplib::Response& res) {
    v1::ListModelsResponse list = requests_->ListModels();
    Json models = Json::object();
    bool ready = list.models_size() > 0;
    for (const v1::ModelInfo& m : list.models()) {
      const bool ok = m.state() == v1::MODEL_STATE_READY;
      ready = ready && ok;
      models[m.name()] = ok ? "ready"
                         : m.state() == v1::MODEL_STATE_LOADING ? "loading"
                                                                : "failed";
    }
    if (!requests_->accepting()) ready = false;
    res.status = ready ? 200 : 503;
    res.set_content(Json{{"status", ready ? "ok" : "unavailable"},
                         {"models", models}}
                        .dump(),
                    "application/json");
  }

  Json ModelJson(const v1::ModelInfo& m) {
    return Json{{"id", m.name()},
                {"object", "model"},
                {"created", created_},
                {"owned_by", "inferd"},
                {"max_model_len", m.max_input_tokens()},
                {"dtype", m.dtype()},
                {"activations", m.activations()}};
  }

  void ListModels(const httplib::Request& req, httplib::Response& res) {
    if (!Admit(req, res)) return;
    Json data = Json::array();
    const v1::ListModelsResponse list = requests_->ListModels();
    for (const v1::ModelInfo& m : list.models()) {
      data.push_back(ModelJson(m));
    }
    res.set_content(Json{{"object", "list"}, {"data", data}}.dump(),
                    "application/json");
  }

  void GetModel(const httplib::Request& req, httplib::Response& res) {
    if (!Admit(req, res)) return;
    v1::GetModelRequest get;
    get.set_name(req.matches[1]);
    absl::StatusOr<v1::ModelInfo> info = requests_->GetModel(get);
    if (!info.ok()) {
      ReplyError(res, info.status(), "model");
      return;
    }
    res.set_content(ModelJson(*info).dump(), "application/json");
  }

  // /v1/chat/completions and /v1/completions.
  void Generate(const httplib::Request& req, httplib::Response& res,
                bool chat) {
    // Shared with a stream's provider: the call stays active (the drain
    // waits for it) until the last event is written.
    auto call_ptr = std::make_shared<HttpCall>(
        requests_, chat ? "POST /v1/chat/completions" : "POST /v1/completions");
    HttpCall& call = *call_ptr;
    absl::StatusOr<Json> body = AdmitBody(req, res, &call);
    if (!body.ok()) return;
    v1::GenerateRequest gen;
    gen.set_model(body->value("model", ""));
    EchoPlan echo;
    absl::Status s = chat ? ToChatRequest(*body, &gen)
                          : ToCompletionRequest(*body, &gen, &echo);
    bool stream = false;
    if (s.ok()) s = Bool(*body, "stream", &stream);
    if (s.ok() && stream && (echo.logprobs || echo.prompt_only)) {
      s = Invalid("stream", "echo with logprobs or max_tokens 0 is answered "
                            "whole; ask with stream false");
    }
    if (s.ok() && echo.echo) s = FillEcho(gen, &echo);
    if (!s.ok()) {
      Fail(call, res, s);
      return;
    }
    bool include_usage = false;
    if (auto so = body->find("stream_options"); so != body->end() &&
                                                 so->is_object()) {
      include_usage = so->value("include_usage", false);
    }
    const int top_logprobs =
        chat ? body->value("top_logprobs", 0) : body->value("logprobs", 0);
    auto queue = std::make_shared<MessageQueue>();
    std::string model;
    absl::StatusOr<std::shared_ptr<RequestHandle>> handle =
        requests_->Generate(
            gen, absl::InfiniteFuture(),
            [queue](absl::StatusOr<v1::GenerateResponse> m, bool last) {
              queue->Push(std::move(m), last);
            },
            &model);
    call.set_model(model);
    if (!handle.ok()) {
      Fail(call, res, handle.status());
      return;
    }
    const std::string id =
        absl::StrCat(chat ? "chatcmpl-" : "cmpl-", NowNanos());
    const int64_t created = NowSeconds();
    if (!stream) {
      Complete(res, call_ptr, queue, *handle, chat, id, created, model,
               top_logprobs, echo);
      return;
    }
    // Server-sent events; the provider runs on this worker thread, pulling
    // the engine's messages as they come.
    auto state = std::make_shared<StreamState>();
    state->handle = *handle;
    state->echo = std::move(echo.text);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [queue, state, chat, id, created, model, include_usage, top_logprobs](
            size_t, httplib::DataSink& sink) {
          return StreamNext(*queue, *state, sink, chat, id, created, model,
                            include_usage, top_logprobs);
        },
        [state, call_ptr](bool success) {
          if (!success || !state->done) {
            state->handle->Abort();
            call_ptr->set_status(
                absl::CancelledError("the client closed the stream"));
          }
        });
    call.set_status(absl::OkStatus());
  }

  void Embeddings(const httplib::Request& req, httplib::Response& res) {
    HttpCall call(requests_, "POST /v1/embeddings");
    absl::StatusOr<Json> body = AdmitBody(req, res, &call);
    if (!body.ok()) return;
    v1::EmbedRequest embed;
    embed.set_model(body->value("model", ""));
    absl::Status s = ToEmbedRequest(*body, &embed);
    const std::string format = body->value("encoding_format", "float");
    if (s.ok() && format != "float" && format != "base64") {
      s = Invalid("encoding_format", "must be float or base64");
    }
    if (!s.ok()) {
      Fail(call, res, s);
      return;
    }
    std::string model;
    absl::StatusOr<v1::EmbedResponse> r =
        SubmitAndWait<v1::EmbedRequest, v1::EmbedResponse>(
            &RequestLayer::Embed, embed, &call, &model);
    if (!r.ok()) {
      ReplyError(res, r.status());
      return;
    }
    Json data = Json::array();
    for (int i = 0; i < r->embeddings_size(); ++i) {
      const v1::Embedding& e = r->embeddings(i);
      Json item = {{"object", "embedding"}, {"index", i}};
      if (format == "base64") {
        std::string bytes(reinterpret_cast<const char*>(e.values().data()),
                          sizeof(float) * static_cast<size_t>(e.values_size()));
        item["embedding"] = absl::Base64Escape(bytes);
      } else {
        item["embedding"] =
            std::vector<float>(e.values().begin(), e.values().end());
      }
      data.push_back(std::move(item));
    }
    const uint32_t tokens = r->usage().total_tokens();
    res.set_content(Json{{"object", "list"},
                         {"data", data},
                         {"model", model},
                         {"usage", {{"prompt_tokens", tokens},
                                    {"total_tokens", tokens}}}}
                        .dump(),
                    "application/json");
  }

  // POST /v1/rerank (the shape vLLM and Jina / Cohere clients use) and TEI's
  // POST /rerank.
  void Rerank(const httplib::Request& req, httplib::Response& res, bool tei) {
    HttpCall call(requests_, tei ? "POST /rerank" : "POST /v1/rerank");
    absl::StatusOr<Json> body = AdmitBody(req, res, &call);
    if (!body.ok()) return;
    v1::RerankRequest rr;
    if (absl::Status s = ToRerankRequest(*body, tei, &rr); !s.ok()) {
      Fail(call, res, s);
      return;
    }
    std::string model;
    absl::StatusOr<v1::RerankResponse> r =
        SubmitAndWait<v1::RerankRequest, v1::RerankResponse>(
            &RequestLayer::Rerank, rr, &call, &model);
    if (!r.ok()) {
      ReplyError(res, r.status());
      return;
    }
    Json results = Json::array();
    for (const v1::RerankResult& x : r->results()) {
      Json item = {{"index", x.index()}};
      if (tei) {
        item["score"] = x.score();
        if (x.has_document()) item["text"] = x.document();
      } else {
        item["relevance_score"] = x.score();
        if (x.has_document()) item["document"] = {{"text", x.document()}};
      }
      results.push_back(std::move(item));
    }
    if (tei) {
      res.set_content(results.dump(), "application/json");
      return;
    }
    res.set_content(
        Json{{"id", absl::StrCat("rerank-", NowNanos())},
             {"model", model},
             {"usage", {{"total_tokens", r->usage().total_tokens()}}},
             {"results", results}}
            .dump(),
        "application/json");
  }

  // POST /tokenize (vLLM's shape): a prompt or chat messages -> ids.
  void Tokenize(const httplib::Request& req, httplib::Response& res) {
    HttpCall call(requests_, "POST /tokenize");
    absl::StatusOr<Json> body = AdmitBody(req, res, &call);
    if (!body.ok()) return;
    v1::TokenizeRequest tr;
    tr.set_model(body->value("model", ""));
    if (absl::Status s = ToTokenizeRequest(*body, &tr); !s.ok()) {
      Fail(call, res, s);
      return;
    }
    std::string model;
    absl::StatusOr<v1::TokenizeResponse> r = requests_->Tokenize(tr, &model);
    call.set_model(model);
    if (!r.ok()) {
      Fail(call, res, r.status());
      return;
    }
    Json out = {{"count", r->token_ids_size()},
                {"tokens", std::vector<uint32_t>(r->token_ids().begin(),
                                                 r->token_ids().end())}};
    v1::GetModelRequest get;
    get.set_name(model);
    if (absl::StatusOr<v1::ModelInfo> info = requests_->GetModel(get);
        info.ok()) {
      out["max_model_len"] = info->max_input_tokens();
    }
    if (body->value("return_token_strs", false)) {
      out["token_strs"] =
          std::vector<std::string>(r->tokens().begin(), r->tokens().end());
    }
    res.set_content(out.dump(), "application/json");
  }

  // POST /detokenize (vLLM's shape): ids -> text.
  void Detokenize(const httplib::Request& req, httplib::Response& res) {
    HttpCall call(requests_, "POST /detokenize");
    absl::StatusOr<Json> body = AdmitBody(req, res, &call);
    if (!body.ok()) return;
    v1::DetokenizeRequest dr;
    dr.set_model(body->value("model", ""));
    auto ids = body->find("tokens");
    absl::Status s =
        ids == body->end()
            ? Invalid("tokens", "is required: a list of token ids")
            : ToTokenIds(*ids, "tokens", dr.mutable_token_ids());
    bool skip = true;
    if (s.ok()) s = Bool(*body, "skip_special_tokens", &skip);
    if (!s.ok()) {
      Fail(call, res, s);
      return;
    }
    dr.set_skip_special_tokens(skip);
    std::string model;
    absl::StatusOr<v1::DetokenizeResponse> r =
        requests_->Detokenize(dr, &model);
    call.set_model(model);
    if (!r.ok()) {
      Fail(call, res, r.status());
      return;
    }
    res.set_content(Json{{"prompt", r->text()}}.dump(), "application/json");
  }

 private:
  // Admit + Body for a counted call: the parsed body, or the error already
  // written (and recorded on `call`).
  absl::StatusOr<Json> AdmitBody(const httplib::Request& req,
                                 httplib::Response& res, HttpCall* call) {
    if (!Admit(req, res)) {
      const absl::Status s = absl::UnauthenticatedError("");
      call->set_status(s);
      return s;
    }
    absl::StatusOr<Json> body = Body(req);
    if (!body.ok()) Fail(*call, res, body.status());
    return body;
  }

  // A completion request's prompt as text (token ids detokenized).
  absl::StatusOr<std::string> PromptText(const v1::GenerateRequest& gen) {
    if (!gen.has_prompt_token_ids()) return gen.prompt();
    v1::DetokenizeRequest d;
    d.set_model(gen.model());
    *d.mutable_token_ids() = gen.prompt_token_ids().ids();
    ASSIGN_OR_RETURN(v1::DetokenizeResponse text, requests_->Detokenize(d));
    return text.text();
  }

  // The echo's prompt text and, with logprobs, its first token.
  absl::Status FillEcho(const v1::GenerateRequest& gen, EchoPlan* echo) {
    ASSIGN_OR_RETURN(echo->text, PromptText(gen));
    if (!echo->logprobs) return absl::OkStatus();
    uint32_t first = 0;
    if (gen.has_prompt_token_ids()) {
      first = gen.prompt_token_ids().ids(0);
    } else {
      // The ids Generate will see: the same tokenizer defaults.
      v1::TokenizeRequest t;
      t.set_model(gen.model());
      t.set_text(gen.prompt());
      ASSIGN_OR_RETURN(v1::TokenizeResponse ids, requests_->Tokenize(t));
      if (ids.token_ids_size() == 0) {
        return Invalid("prompt", "has no tokens");
      }
      first = ids.token_ids(0);
    }
    v1::DetokenizeRequest d;
    d.set_model(gen.model());
    d.add_token_ids(first);
    d.set_skip_special_tokens(false);
    ASSIGN_OR_RETURN(v1::DetokenizeResponse text, requests_->Detokenize(d));
    echo->first_token = text.text();
    return absl::OkStatus();
  }

  // The error answer of a counted call.
  static void Fail(HttpCall& call, httplib::Response& res,
                   const absl::Status& s) {
    call.set_status(s);
    ReplyError(res, s);
  }

  // Submits a prefill request (RequestLayer::Embed, ::Rerank) and waits for
  // its answer; records the model and the outcome on `call`.
  template <typename Req, typename Resp>
  absl::StatusOr<Resp> SubmitAndWait(
      absl::StatusOr<std::shared_ptr<RequestHandle>> (RequestLayer::*submit)(
          const Req&, absl::Time, RequestLayer::Sink<Resp>, std::string*),
      const Req& r, HttpCall* call, std::string* model) {
    auto answer = std::make_shared<Answer<Resp>>();
    absl::StatusOr<std::shared_ptr<RequestHandle>> handle = (requests_->*submit)(
        r, absl::InfiniteFuture(),
        [answer](absl::StatusOr<Resp> v) { answer->Set(std::move(v)); },
        model);
    call->set_model(*model);
    absl::StatusOr<Resp> out = handle.ok() ? answer->Wait() : handle.status();
    call->set_status(out.status());
    return out;
  }

  static absl::Status ToRerankRequest(const Json& body, bool tei,
                                      v1::RerankRequest* req) {
    req->set_model(body.value("model", ""));
    auto q = body.find("query");
    if (q == body.end() || !q->is_string()) {
      return Invalid("query", "is required: a string");
    }
    req->set_query(q->get<std::string>());
    const char* docs_key = tei ? "texts" : "documents";
    auto docs = body.find(docs_key);
    if (docs == body.end() || !docs->is_array() || docs->empty()) {
      return Invalid(docs_key, "is required: a non-empty list of strings");
    }
    for (size_t i = 0; i < docs->size(); ++i) {
      const Json& d = (*docs)[i];
      // Cohere / Jina clients may send {"text": ...} objects.
      if (d.is_string()) {
        req->add_documents(d.get<std::string>());
      } else if (!tei && d.is_object() && d.contains("text") &&
                 d["text"].is_string()) {
        req->add_documents(d["text"].get<std::string>());
      } else {
        return Invalid(absl::StrCat(docs_key, "[", i, "]"),
                       "must be a string");
      }
    }
    // vLLM returns the documents unless told not to; TEI only when asked.
    bool ret = !tei;
    RETURN_IF_ERROR(Bool(body, tei ? "return_text" : "return_documents", &ret));
    req->set_return_documents(ret);
    if (auto it = body.find("top_n"); it != body.end() && !it->is_null()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 0) {
        return Invalid("top_n", "must be an integer >= 0");
      }
      req->set_top_n(static_cast<uint32_t>(
          std::min<int64_t>(it->get<int64_t>(), UINT32_MAX)));
    }
    bool raw = false;
    RETURN_IF_ERROR(Bool(body, "raw_scores", &raw));
    req->set_raw_scores(raw);
    if (body.contains("truncate") && !body["truncate"].is_null()) {
      bool truncate = true;
      RETURN_IF_ERROR(Bool(body, "truncate", &truncate));
      req->set_truncate(truncate);
    }
    return absl::OkStatus();
  }

  static absl::Status ToTokenizeRequest(const Json& body,
                                        v1::TokenizeRequest* req) {
    auto msgs = body.find("messages");
    auto prompt = body.find("prompt");
    if (msgs != body.end() && !msgs->is_null()) {
      if (prompt != body.end()) {
        return Invalid("messages", "give prompt or messages, not both");
      }
      if (!msgs->is_array() || msgs->empty()) {
        return Invalid("messages", "must be a non-empty list");
      }
      for (size_t i = 0; i < msgs->size(); ++i) {
        RETURN_IF_ERROR(ToChatMessage((*msgs)[i], i, req->add_messages()));
      }
      if (body.contains("add_generation_prompt")) {
        bool add = true;
        RETURN_IF_ERROR(Bool(body, "add_generation_prompt", &add));
        req->set_add_generation_prompt(add);
      }
      RETURN_IF_ERROR(ToToolList(body, req->mutable_tools()));
    } else {
      if (prompt == body.end() || !prompt->is_string()) {
        return Invalid("prompt", "is required: a string (or give messages)");
      }
      req->set_text(prompt->get<std::string>());
    }
    if (body.contains("add_special_tokens") &&
        !body["add_special_tokens"].is_null()) {
      bool add = true;
      RETURN_IF_ERROR(Bool(body, "add_special_tokens", &add));
      req->set_add_special_tokens(add);
    }
    return absl::OkStatus();
  }

  struct StreamState {
    std::shared_ptr<RequestHandle> handle;
    bool started = false;
    bool done = false;
    std::vector<bool> role_sent;
    // Completions' echo: the prompt text, and which choices have had it.
    std::string echo;
    std::vector<bool> echoed;
    // Completions' logprobs: each choice's text offset so far.
    std::vector<int64_t> text_offset;
    uint32_t prompt_tokens = 0;
    uint32_t completion_tokens = 0;
  };

  static int64_t NowNanos() { return absl::ToUnixNanos(absl::Now()); }

  static absl::Status ToEmbedRequest(const Json& body, v1::EmbedRequest* req) {
    auto in = body.find("input");
    if (in == body.end()) return Invalid("input", "is required");
    auto ids = [&](const Json& arr) {
      return ToTokenIds(arr, "input", req->add_token_ids()->mutable_ids());
    };
    if (in->is_string()) {
      req->add_texts(in->get<std::string>());
    } else if (in->is_array() && !in->empty()) {
      const Json& first = (*in)[0];
      if (first.is_string()) {
        for (const Json& t : *in) {
          if (!t.is_string()) return Invalid("input", "mixes strings and ids");
          req->add_texts(t.get<std::string>());
        }
      } else if (first.is_number_integer()) {
        RETURN_IF_ERROR(ids(*in));
      } else if (first.is_array()) {
        for (const Json& t : *in) {
          if (!t.is_array()) return Invalid("input", "mixes lists and ids");
          RETURN_IF_ERROR(ids(t));
        }
      } else {
        return Invalid("input", "must be a string, strings or token ids");
      }
    } else {
      return Invalid("input", "must be a string, strings or token ids");
    }
    int64_t dims = 0;
    RETURN_IF_ERROR(Number(body, "dimensions", &dims));
    if (dims < 0) return Invalid("dimensions", "must be positive");
    req->set_dimensions(static_cast<uint32_t>(dims));
    return absl::OkStatus();
  }

  // A non-streaming answer: every message, then one response.
  // A non-streaming answer, built message by message.
  class Completion {
   public:
    Completion(bool chat, const EchoPlan& echo) : chat_(chat), echo_(echo) {}

    void Add(const v1::GenerateResponse& m) {
      const size_t i = m.sample_index();
      if (i >= choices_.size()) choices_.resize(i + 1);
      Choice& c = choices_[i];
      if (!c.echoed) {
        c.text = echo_.text;
        c.echoed = true;
      }
      if (m.prompt_logprobs_size() > 0) prompt_logprobs_ = m.prompt_logprobs();
      if (echo_.prompt_only) {
        // The one generated token is not part of the answer.
        if (m.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
          c.finish = "length";
          prompt_tokens_ = m.usage().prompt_tokens();
        }
        return;
      }
      c.text += m.text();
      c.reasoning += m.reasoning();
      for (const v1::ToolCallDelta& t : m.tool_calls()) {
        c.tool_calls.push_back(ToolCallDelta{static_cast<int>(t.index()),
                                             t.id(), t.name(), t.arguments()});
      }
      for (const auto& lp : m.logprobs()) *c.logprobs.Add() = lp;
      c.any_logprobs |= m.logprobs_size() > 0;
      if (m.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
        c.finish = FinishReasonName(m.finish_reason());
        prompt_tokens_ = m.usage().prompt_tokens();
        completion_tokens_ += m.usage().completion_tokens();
      }
    }

    Json Finish(const std::string& id, int64_t created,
                const std::string& model, int top_logprobs) const {
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
            echo_.logprobs ? EchoLogprobsJson(echo_.first_token,
                                              prompt_logprobs_, ch.logprobs,
                                              top_logprobs)
            : !ch.any_logprobs ? Json()
            : chat_ ? LogprobsJson(ch.logprobs, top_logprobs)
                    : LegacyLogprobsJson(ch.logprobs, top_logprobs, &offset);
        c["finish_reason"] = ch.finish;
        out_choices.push_back(std::move(c));
      }
      return Json{{"id", id},
                  {"object", chat_ ? "chat.completion" : "text_completion"},
                  {"created", created},
                  {"model", model},
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
      google::protobuf::RepeatedPtrField<v1::SampledLogprobs> logprobs;
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
    std::vector<Choice> choices_;
    uint32_t prompt_tokens_ = 0;
    uint32_t completion_tokens_ = 0;
    // Echo with logprobs: the prompt's entries (sample 0 carries them).
    google::protobuf::RepeatedPtrField<v1::SampledLogprobs> prompt_logprobs_;
  };

  // A non-streaming answer. The first message (or the error a request
  // meets in preparation) decides the status; when more follow, the answer
  // is sent chunked, a space (JSON's leading whitespace) every
  // kHeartbeatSeconds while the engine works: a client that left fails
  // that write and its generation is aborted, as a stream's is. An error
  // after that point is the body's error object (the status was sent).
  void Complete(httplib::Response& res, std::shared_ptr<HttpCall> call,
                std::shared_ptr<MessageQueue> queue,
                std::shared_ptr<RequestHandle> handle, bool chat,
                const std::string& id, int64_t created,
                const std::string& model, int top_logprobs,
                const EchoPlan& echo) {
    auto built = std::make_shared<Completion>(chat, echo);
    bool last = false;
    absl::StatusOr<v1::GenerateResponse> first = queue->Pop(&last);
    if (!first.ok()) {
      Fail(*call, res, first.status());
      return;
    }
    built->Add(*first);
    call->set_status(absl::OkStatus());
    if (last) {
      res.set_content(built->Finish(id, created, model, top_logprobs).dump(),
                      "application/json");
      return;
    }
    auto done = std::make_shared<bool>(false);
    auto next_beat = std::make_shared<absl::Time>(
        absl::Now() + absl::Seconds(kHeartbeatSeconds));
    res.set_chunked_content_provider(
        "application/json",
        [queue, built, done, next_beat, id, created, model, top_logprobs](
            size_t, httplib::DataSink& sink) {
          // A heartbeat when one is due, however busy the queue is.
          if (absl::Now() >= *next_beat) {
            *next_beat = absl::Now() + absl::Seconds(kHeartbeatSeconds);
            if (!sink.write(" ", 1)) return false;
          }
          bool last = false;
          std::optional<absl::StatusOr<v1::GenerateResponse>> m =
              queue->PopFor(*next_beat - absl::Now(), &last);
          if (!m.has_value()) return true;  // the heartbeat comes next
          std::string body;
          if (!m->ok()) {
            httplib::Response err;
            ReplyError(err, m->status());
            body = err.body;
          } else {
            built->Add(**m);
            if (!last) return true;
            body = built->Finish(id, created, model, top_logprobs).dump();
          }
          *done = true;
          if (!sink.write(body.data(), body.size())) return false;
          sink.done();
          return true;
        },
        [handle, call, done](bool success) {
          if (!success || !*done) {
            handle->Abort();
            call->set_status(
                absl::CancelledError("the client closed the connection"));
          }
        });
  }

  static bool Send(httplib::DataSink& sink, const Json& j) {
    const std::string line = absl::StrCat("data: ", j.dump(), "\n\n");
    return sink.write(line.data(), line.size());
  }

  // One message of the engine as SSE chunks; false ends the stream.
  static bool StreamNext(MessageQueue& queue, StreamState& st,
                         httplib::DataSink& sink, bool chat,
                         const std::string& id, int64_t created,
                         const std::string& model, bool include_usage,
                         int top_logprobs) {
    if (st.done) return false;
    bool last = false;
    absl::StatusOr<v1::GenerateResponse> m = queue.Pop(&last);
    const std::string object =
        chat ? "chat.completion.chunk" : "text_completion";
    if (!m.ok()) {
      // Headers are gone: the error travels as an event, then the stream
      // ends (as OpenAI-compatible servers do).
      const int http = HttpStatusOf(m.status().code());
      Send(sink, Json{{"error",
                       {{"message", std::string(m.status().message())},
                        {"type", ErrorType(http)},
                        {"param", Json()},
                        {"code", absl::AsciiStrToLower(
                                     absl::StatusCodeToString(m.status().code()))}}}});
      st.done = true;
      sink.done();
      return true;
    }
    const size_t i = m->sample_index();
    if (i >= st.role_sent.size()) st.role_sent.resize(i + 1, false);
    Json choice = {{"index", i}};
    if (chat) {
      Json delta = Json::object();
      if (!st.role_sent[i]) {
        delta["role"] = "assistant";
        st.role_sent[i] = true;
      }
      if (!m->reasoning().empty()) delta["reasoning_content"] = m->reasoning();
      delta["content"] =
          m->text().empty() && (m->tool_calls_size() > 0 || !m->reasoning().empty())
              ? Json()
              : Json(m->text());
      if (m->tool_calls_size() > 0) {
        Json calls = Json::array();
        for (const v1::ToolCallDelta& t : m->tool_calls()) {
          Json c = {{"index", t.index()}};
          if (!t.id().empty()) {
            c["id"] = t.id();
            c["type"] = "function";
          }
          Json f = Json::object();
          if (!t.name().empty()) f["name"] = t.name();
          f["arguments"] = t.arguments();
          c["function"] = std::move(f);
          calls.push_back(std::move(c));
        }
        delta["tool_calls"] = std::move(calls);
      }
      choice["delta"] = delta;
    } else {
      // An echo puts the prompt before each choice's first text.
      if (i >= st.echoed.size()) st.echoed.resize(i + 1, false);
      choice["text"] = st.echoed[i] ? m->text() : st.echo + m->text();
      st.echoed[i] = true;
    }
    if (i >= st.text_offset.size()) st.text_offset.resize(i + 1, 0);
    choice["logprobs"] =
        m->logprobs_size() == 0 ? Json()
        : chat ? LogprobsJson(m->logprobs(), top_logprobs)
               : LegacyLogprobsJson(m->logprobs(), top_logprobs,
                                    &st.text_offset[i]);
    const bool finished = m->finish_reason() != v1::FINISH_REASON_UNSPECIFIED;
    choice["finish_reason"] =
        finished ? Json(FinishReasonName(m->finish_reason())) : Json();
    if (finished) {
      st.prompt_tokens = m->usage().prompt_tokens();
      st.completion_tokens += m->usage().completion_tokens();
    }
    Json chunk = {{"id", id},
                  {"object", object},
                  {"created", created},
                  {"model", model},
                  {"choices", Json::array({choice})}};
    if (include_usage) chunk["usage"] = Json();
    if (!Send(sink, chunk)) return false;  // the client left: aborted
    if (last) {
      if (include_usage) {
        Send(sink, Json{{"id", id},
                        {"object", object},
                        {"created", created},
                        {"model", model},
                        {"choices", Json::array()},
                        {"usage",
                         {{"prompt_tokens", st.prompt_tokens},
                          {"completion_tokens", st.completion_tokens},
                          {"total_tokens",
                           st.prompt_tokens + st.completion_tokens}}}});
      }
      const std::string done = "data: [DONE]\n\n";
      sink.write(done.data(), done.size());
      st.done = true;
      sink.done();
    }
    return true;
  }

  RequestLayer* requests_;
  const ApiKeyAuth* auth_;
  const int64_t created_ = NowSeconds();
};

}  // namespace

absl::StatusOr<std::unique_ptr<HttpApi>> HttpApi::Start(
    RequestLayer* requests, const ApiKeyAuth* auth,
    const HttpApiOptions& options) {
  std::unique_ptr<HttpApi> api(new HttpApi());
  api->requests_ = requests;
  api->auth_ = auth;
  api->options_ = options;
  if (options.tls_cert.empty()) {
    api->server_ = std::make_unique<httplib::Server>();
  } else {
    auto tls = std::make_unique<httplib::SSLServer>(
        options.tls_cert.c_str(), options.tls_key.c_str(),
        options.tls_client_ca.empty() ? nullptr
                                      : options.tls_client_ca.c_str());
    if (!tls->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--http-listen with TLS: cannot use --tls-cert=", options.tls_cert,
          " and --tls-key=", options.tls_key,
          options.tls_client_ca.empty()
              ? std::string()
              : absl::StrCat(" and --tls-client-ca=", options.tls_client_ca),
          " (PEM files; the key must match the certificate)"));
    }
    api->server_ = std::move(tls);
  }
  const int threads = std::max(1, options.max_concurrent_requests);
  api->server_->new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<size_t>(threads));
  };
  api->server_->set_payload_max_length(options.max_body_bytes);
  // A handler that throws (a JSON field of an unexpected type read before
  // it was checked) is a 400 with the library's message, not a 500, and
  // the worker thread goes on.
  api->server_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res,
         std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const Json::type_error& e) {
          ReplyError(res, absl::InvalidArgumentError(absl::StrCat(
                              "a field has the wrong type: ", e.what())));
        } catch (const std::exception& e) {
          ReplyError(res, absl::InternalError(e.what()));
        } catch (...) {
          ReplyError(res, absl::InternalError("unknown error"));
        }
      });
  api->Routes();
  const size_t colon = options.listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(options.listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http-listen=", options.listen, ": expected HOST:PORT"));
  }
  std::string host = options.listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const int bound = port == 0 ? api->server_->bind_to_any_port(host)
                              : (api->server_->bind_to_port(host, port) ? port
                                                                        : -1);
  if (bound <= 0) {
    return absl::UnavailableError(absl::StrCat(
        "--http-listen=", options.listen,
        ": cannot listen there (address in use, or not this host's)"));
  }
  api->port_ = bound;
  httplib::Server* server = api->server_.get();
  api->thread_ = std::thread([server] { server->listen_after_bind(); });
  return api;
}

void HttpApi::Routes() {
  auto h = std::make_shared<Handlers>(requests_, auth_);
  httplib::Server& s = *server_;
  s.Get("/health", [h](const httplib::Request& q, httplib::Response& r) {
    h->Health(q, r);
  });
  s.Get("/v1/models", [h](const httplib::Request& q, httplib::Response& r) {
    h->ListModels(q, r);
  });
  s.Get(R"(/v1/models/(.+))",
        [h](const httplib::Request& q, httplib::Response& r) {
          h->GetModel(q, r);
        });
  s.Post("/v1/chat/completions",
         [h](const httplib::Request& q, httplib::Response& r) {
           h->Generate(q, r, /*chat=*/true);
         });
  s.Post("/v1/completions",
         [h](const httplib::Request& q, httplib::Response& r) {
           h->Generate(q, r, /*chat=*/false);
         });
  s.Post("/v1/rerank", [h](const httplib::Request& q, httplib::Response& r) {
    h->Rerank(q, r, /*tei=*/false);
  });
  s.Post("/rerank", [h](const httplib::Request& q, httplib::Response& r) {
    h->Rerank(q, r, /*tei=*/true);
  });
  s.Post("/tokenize", [h](const httplib::Request& q, httplib::Response& r) {
    h->Tokenize(q, r);
  });
  s.Post("/detokenize", [h](const httplib::Request& q, httplib::Response& r) {
    h->Detokenize(q, r);
  });
  if (options_.metrics) {
    s.Get("/metrics", [render = options_.metrics](const httplib::Request&,
                                                  httplib::Response& r) {
      r.set_content(render(), "text/plain; version=0.0.4");
    });
  }
  s.Post("/v1/embeddings",
         [h](const httplib::Request& q, httplib::Response& r) {
           h->Embeddings(q, r);
         });
  // Errors without a body of their own (an unknown route, and what
  // cpp-httplib refuses itself: a body over the limit, an oversized or
  // malformed request line or header) answer OpenAI's error object too.
  s.set_error_handler(httplib::Server::HandlerWithResponse(
      [max = options_.max_body_bytes](const httplib::Request& q,
                                      httplib::Response& r) {
        if (!r.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        const int status = r.status;
        std::string what;
        switch (status) {
          case 404:
            ReplyError(r, absl::NotFoundError(absl::StrCat(
                              "no route ", q.method, " ", q.path,
                              " (this server serves /v1/models, /v1/chat/"
                              "completions, /v1/completions, /v1/embeddings, "
                              "/v1/rerank, /rerank, /tokenize, /detokenize, "
                              "/health)")));
            return httplib::Server::HandlerResponse::Handled;
          case 413:
            what = absl::StrCat("the request body is larger than the "
                                "server's limit of ", max, " bytes");
            break;
          case 414:
            what = "the request line (URI) is too long";
            break;
          case 400:
            what = absl::StrCat(
                "malformed HTTP request (or a request line or header longer "
                "than ", CPPHTTPLIB_HEADER_MAX_LENGTH, " bytes)");
            break;
          default:
            what = absl::StrCat("HTTP ", status);
        }
        ReplyError(r, absl::InvalidArgumentError(what));
        r.status = status;
        return httplib::Server::HandlerResponse::Handled;
      }));
}

void HttpApi::Stop() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

HttpApi::~HttpApi() { Stop(); }

}  // namespace inferd
