#include "service/http/http_common.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/common/field_error.h"

namespace inferd::http {

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

Json ErrorJson(const absl::Status& status) {
  const std::string field = FieldPathOf(status);
  return Json{
      {"message", std::string(status.message())},
      {"type", ErrorType(HttpStatusOf(status.code()))},
      {"param", field.empty() ? Json() : Json(field)},
      {"code", absl::AsciiStrToLower(absl::StatusCodeToString(status.code()))}};
}

void ReplyError(httplib::Response& res, const absl::Status& status) {
  res.status = HttpStatusOf(status.code());
  // A message may quote the client's bytes (a JSON parse error does):
  // invalid UTF-8 in them is replaced, not thrown.
  res.set_content(Json{{"error", ErrorJson(status)}}.dump(
                      -1, ' ', false, Json::error_handler_t::replace),
                  "application/json");
}

const char* AnthropicErrorType(int http_status) {
  switch (http_status) {
    case 400:
    case 409:
    case 422:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return http_status < 500 ? "invalid_request_error" : "api_error";
  }
}

Json AnthropicErrorJson(const absl::Status& status) {
  return Json{{"type", "error"},
              {"error",
               {{"type", AnthropicErrorType(HttpStatusOf(status.code()))},
                {"message", std::string(status.message())}}}};
}

void ReplyAnthropicError(httplib::Response& res, const absl::Status& status) {
  res.status = HttpStatusOf(status.code());
  res.set_content(AnthropicErrorJson(status).dump(
                      -1, ' ', false, Json::error_handler_t::replace),
                  "application/json");
}

absl::Status Invalid(absl::string_view param, absl::string_view what) {
  return FieldError(param, absl::StrCat(": ", what));
}

absl::Status Bool(const Json& body, const char* key, bool* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return Invalid(key, "must be true or false");
  *out = it->get<bool>();
  return absl::OkStatus();
}

std::string StringField(const Json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

absl::Status ToTokenIds(const Json& ids, const std::string& param,
                        std::vector<int64_t>* out) {
  if (!ids.is_array()) return Invalid(param, "must be a list of token ids");
  for (const Json& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > UINT32_MAX) {
      return Invalid(param, "token ids must be integers in [0, 2^32)");
    }
    out->push_back(id.get<int64_t>());
  }
  return absl::OkStatus();
}

int64_t NowSeconds() { return absl::ToUnixSeconds(absl::Now()); }
int64_t NowNanos() { return absl::ToUnixNanos(absl::Now()); }

bool SendEvent(httplib::DataSink& sink, const Json& event) {
  const std::string line = absl::StrCat("data: ", event.dump(), "\n\n");
  return sink.write(line.data(), line.size());
}

// ------------------------------------------------------------- HttpCall

HttpCall::HttpCall(const HttpContext& ctx, std::string route, Api api,
                   CallScope::Kind kind)
    : ctx_(ctx), api_(api), scope_(ctx.requests, std::move(route), kind) {}

bool HttpCall::Admit(const httplib::Request& req, httplib::Response& res) {
  std::string key;
  const std::string h = req.get_header_value("Authorization");
  if (absl::StartsWithIgnoreCase(h, "bearer ")) {
    key = std::string(absl::StripAsciiWhitespace(h.substr(7)));
  } else if (req.has_header("x-api-key")) {
    // Anthropic's clients send the key this way.
    key = std::string(
        absl::StripAsciiWhitespace(req.get_header_value("x-api-key")));
  }
  absl::Status s = scope_.Admit(ctx_.auth, key,
                                "'Authorization: Bearer <key>' or "
                                "'x-api-key: <key>'");
  if (s.ok()) return true;
  error_reply_(res, s);
  return false;
}

std::optional<Json> HttpCall::AdmitBody(const httplib::Request& req,
                                        httplib::Response& res) {
  if (!Admit(req, res)) return std::nullopt;
  Json body;
  try {
    body = Json::parse(req.body);
  } catch (const Json::parse_error& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 1,
    // column 6: syntax error while parsing ...": keep from "parse error".
    const std::string what = e.what();
    const size_t at = what.find("parse error");
    Fail(res, absl::InvalidArgumentError(absl::StrCat(
                  "the request body is not valid JSON: ",
                  at == std::string::npos ? what : what.substr(at))));
    return std::nullopt;
  }
  if (!body.is_object()) {
    Fail(res,
         absl::InvalidArgumentError("the request body must be a JSON object"));
    return std::nullopt;
  }
  if (auto m = body.find("model"); m != body.end() && !m->is_string()) {
    Fail(res, Invalid("model", "must be a string (a model name)"));
    return std::nullopt;
  }
  return body;
}

absl::Status HttpCall::Named(const absl::Status& status) const {
  absl::Status named = OpenAiNamed(api_, status);
  if (!alias_from_.empty() && FieldPathOf(named) == alias_from_) {
    return RenameField(named, alias_to_);
  }
  return named;
}

void HttpCall::Reject(httplib::Response& res, const absl::Status& status) {
  scope_.set_status(status);
  error_reply_(res, status);
}

void HttpCall::Fail(httplib::Response& res, const absl::Status& status) {
  const absl::Status named = Named(status);
  scope_.set_status(named);
  error_reply_(res, named);
}

}  // namespace inferd::http
