// What every route of the OpenAI-compatible HTTP front end shares: OpenAI's
// error object (with the HTTP status of the gRPC code and `param` from the
// error's field path), readers of JSON body fields that answer a 400
// naming the field, server-sent events, and HttpCall: the call kit
// (call_scope.h) of one HTTP route. Internal to service/http/.
//
// Functions are pure and thread-safe; an HttpCall belongs to one request.
#ifndef INFERD_SERVICE_HTTP_HTTP_COMMON_H_
#define INFERD_SERVICE_HTTP_HTTP_COMMON_H_

#include <httplib.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "service/request/auth.h"
#include "service/request/call_scope.h"
#include "service/http/openai_names.h"
#include "service/request/request_layer.h"

namespace inferd::http {

using Json = nlohmann::ordered_json;

// ------------------------------------------------------------- errors

// The HTTP status of a gRPC code (400 for bad input, 404 unknown model,
// 429 queue full, 503 not ready or draining, 504 deadline ...).
int HttpStatusOf(absl::StatusCode code);
// OpenAI's error type for an HTTP status.
const char* ErrorType(int http_status);
// OpenAI's error object {"message", "type", "param", "code"}; `param` is the
// field path the status records (runtime/common/field_error.h), else null.
Json ErrorJson(const absl::Status& status);
// The error object as the response, with its HTTP status.
void ReplyError(httplib::Response& res, const absl::Status& status);
// Anthropic's error shape {"type": "error", "error": {"type", "message"}}
// with the HTTP status (529 for an overloaded server, as Anthropic's API).
const char* AnthropicErrorType(int http_status);
Json AnthropicErrorJson(const absl::Status& status);
void ReplyAnthropicError(httplib::Response& res, const absl::Status& status);
// A 400 about the body's field `param` (OpenAI's name).
absl::Status Invalid(absl::string_view param, absl::string_view what);

// ------------------------------------------------------- body fields

// Optional fields: unset or null leaves *out as it is; the wrong JSON type
// is a 400 naming the field. `set` (may be null) is set when present.
template <typename T>
absl::Status Number(const Json& body, const char* key, T* out,
                    bool* set = nullptr) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return Invalid(key, "must be a number");
  *out = it->get<T>();
  if (set != nullptr) *set = true;
  return absl::OkStatus();
}
absl::Status Bool(const Json& body, const char* key, bool* out);
// An object's string field, "" when absent or not a string (never throws).
std::string StringField(const Json& o, const char* key);
// A JSON array of token ids (integers in [0, 2^32)), appended to `out`.
absl::Status ToTokenIds(const Json& ids, const std::string& param,
                        std::vector<int64_t>* out);

int64_t NowSeconds();
int64_t NowNanos();

// One server-sent event, `data: <json>`; false when the client left.
bool SendEvent(httplib::DataSink& sink, const Json& event);

// Non-streaming answers that take a while: how often a space (JSON's
// leading whitespace) is written, to notice a client that left.
inline constexpr double kHeartbeatSeconds = 0.5;

// --------------------------------------------------------- the call kit

// What every route has: the request layer, the API key, the server's start
// time (OpenAI's `created` of the models).
class ResponseStore;
struct HttpContext {
  RequestLayer* requests = nullptr;
  const ApiKeyAuth* auth = nullptr;
  int64_t created = 0;
  ResponseStore* responses = nullptr;  // the Responses API's store
};

// One HTTP call: its CallScope (admission, active count, outcome report)
// and its replies. A streamed answer keeps it (by shared_ptr) until the
// last event is written. Not thread-safe: one worker thread serves it.
class HttpCall {
 public:
  HttpCall(const HttpContext& ctx, std::string route, Api api,
           CallScope::Kind kind = CallScope::Kind::kWork);

  // Admits the call (`Authorization: Bearer KEY` or `x-api-key: KEY`; not
  // draining). False: the error reply is written.
  bool Admit(const httplib::Request& req, httplib::Response& res);
  // Admit, then the body as a JSON object (`model`, when present, must be a
  // string). Nothing: the error reply is written.
  std::optional<Json> AdmitBody(const httplib::Request& req,
                                httplib::Response& res);

  // The error reply, its field named as this route's body names it; the
  // call's outcome.
  void Fail(httplib::Response& res, const absl::Status& status);
  // An error the route found in its own body (its field already named as
  // the body names it); the call's outcome.
  void Reject(httplib::Response& res, const absl::Status& status);
  // `status` with its field named as this route's body names it.
  absl::Status Named(const absl::Status& status) const;
  // This request sent the field OpenAiParam calls `param` under another
  // accepted name (chat's max_completion_tokens for max_tokens): errors
  // about it name `sent`.
  void Alias(std::string param, std::string sent) {
    alias_from_ = std::move(param);
    alias_to_ = std::move(sent);
  }

  // How this route writes an error (default: OpenAI's error object,
  // ReplyError); the Anthropic route writes Anthropic's.
  using ErrorReply =
      std::function<void(httplib::Response&, const absl::Status&)>;
  void set_error_reply(ErrorReply reply) { error_reply_ = std::move(reply); }

  void set_model(absl::string_view model) { scope_.set_model(model); }
  void set_status(const absl::Status& status) { scope_.set_status(status); }
  RequestLayer* requests() const { return ctx_.requests; }
  const HttpContext& context() const { return ctx_; }
  Api api() const { return api_; }

 private:
  const HttpContext ctx_;
  const Api api_;
  std::string alias_from_;
  std::string alias_to_;
  ErrorReply error_reply_ = ReplyError;
  CallScope scope_;
};

}  // namespace inferd::http

#endif  // INFERD_SERVICE_HTTP_HTTP_COMMON_H_
