// vLLM's POST /tokenize (a prompt, or chat messages through the model's
// template, to token ids) and POST /detokenize (ids to text).
#include <string>
#include <vector>

#include "runtime/common/status_macros.h"
#include "service/http/chat_request.h"
#include "service/http/http_common.h"
#include "service/http/routes.h"

namespace inferd::http {
namespace {

absl::Status ToTokenizeRequest(const Json& body, TokenizeInput* req) {
  req->model = body.value("model", "");
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
      RETURN_IF_ERROR(
          ToChatMessage((*msgs)[i], i, &req->messages.emplace_back()));
    }
    if (body.contains("add_generation_prompt")) {
      bool add = true;
      RETURN_IF_ERROR(Bool(body, "add_generation_prompt", &add));
      req->add_generation_prompt = add;
    }
    RETURN_IF_ERROR(ToToolList(body, &req->tools));
  } else {
    if (prompt == body.end() || !prompt->is_string()) {
      return Invalid("prompt", "is required: a string (or give messages)");
    }
    req->text = prompt->get<std::string>();
  }
  if (body.contains("add_special_tokens") &&
      !body["add_special_tokens"].is_null()) {
    bool add = true;
    RETURN_IF_ERROR(Bool(body, "add_special_tokens", &add));
    req->add_special_tokens = add;
  }
  return absl::OkStatus();
}


void Tokenize(const HttpContext& ctx, const httplib::Request& req,
              httplib::Response& res) {
  HttpCall call(ctx, "POST /tokenize", Api::kTokenize);
  std::optional<Json> body = call.AdmitBody(req, res);
  if (!body.has_value()) return;
  TokenizeInput tr;
  absl::Status s = ToTokenizeRequest(*body, &tr);
  std::string model;
  absl::StatusOr<TokenizeAnswer> r =
      s.ok() ? ctx.requests->Tokenize(tr, &model)
             : absl::StatusOr<TokenizeAnswer>(s);
  call.set_model(model);
  if (!r.ok()) {
    call.Fail(res, r.status());
    return;
  }
  call.set_status(absl::OkStatus());
  Json out = {{"count", r->token_ids.size()},
              {"tokens", r->token_ids},
              {"max_model_len", r->max_input_tokens}};
  if (body->value("return_token_strs", false)) out["token_strs"] = r->tokens;
  res.set_content(out.dump(), "application/json");
}

absl::Status ToDetokenizeRequest(const Json& body, DetokenizeInput* req) {
  req->model = body.value("model", "");
  auto ids = body.find("tokens");
  if (ids == body.end()) {
    return Invalid("tokens", "is required: a list of token ids");
  }
  RETURN_IF_ERROR(ToTokenIds(*ids, "tokens", &req->token_ids));
  bool skip = true;
  RETURN_IF_ERROR(Bool(body, "skip_special_tokens", &skip));
  req->skip_special_tokens = skip;
  return absl::OkStatus();
}

void Detokenize(const HttpContext& ctx, const httplib::Request& req,
                httplib::Response& res) {
  HttpCall call(ctx, "POST /detokenize", Api::kDetokenize);
  std::optional<Json> body = call.AdmitBody(req, res);
  if (!body.has_value()) return;
  DetokenizeInput dr;
  absl::Status s = ToDetokenizeRequest(*body, &dr);
  std::string model;
  absl::StatusOr<std::string> r =
      s.ok() ? ctx.requests->Detokenize(dr, &model)
             : absl::StatusOr<std::string>(s);
  call.set_model(model);
  if (!r.ok()) {
    call.Fail(res, r.status());
    return;
  }
  call.set_status(absl::OkStatus());
  res.set_content(Json{{"prompt", *r}}.dump(), "application/json");
}

}  // namespace

void AddTokenizeRoutes(httplib::Server& server, const HttpContext& ctx) {
  server.Post("/tokenize", [ctx](const httplib::Request& q,
                                 httplib::Response& r) { Tokenize(ctx, q, r); });
  server.Post("/detokenize",
              [ctx](const httplib::Request& q, httplib::Response& r) {
                Detokenize(ctx, q, r);
              });
}

}  // namespace inferd::http
