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

absl::Status ToTokenizeRequest(const Json& body,
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


void Tokenize(const HttpContext& ctx, const httplib::Request& req,
              httplib::Response& res) {
  HttpCall call(ctx, "POST /tokenize", Api::kTokenize);
  std::optional<Json> body = call.AdmitBody(req, res);
  if (!body.has_value()) return;
  v1::TokenizeRequest tr;
  tr.set_model(body->value("model", ""));
  absl::Status s = ToTokenizeRequest(*body, &tr);
  std::string model;
  absl::StatusOr<v1::TokenizeResponse> r =
      s.ok() ? ctx.requests->Tokenize(tr, &model)
             : absl::StatusOr<v1::TokenizeResponse>(s);
  call.set_model(model);
  if (!r.ok()) {
    call.Fail(res, r.status());
    return;
  }
  call.set_status(absl::OkStatus());
  Json out = {{"count", r->token_ids_size()},
              {"tokens", std::vector<uint32_t>(r->token_ids().begin(),
                                               r->token_ids().end())}};
  v1::GetModelRequest get;
  get.set_name(model);
  if (absl::StatusOr<v1::ModelInfo> info = ctx.requests->GetModel(get);
      info.ok()) {
    out["max_model_len"] = info->max_input_tokens();
  }
  if (body->value("return_token_strs", false)) {
    out["token_strs"] =
        std::vector<std::string>(r->tokens().begin(), r->tokens().end());
  }
  res.set_content(out.dump(), "application/json");
}

absl::Status ToDetokenizeRequest(const Json& body, v1::DetokenizeRequest* req) {
  req->set_model(body.value("model", ""));
  auto ids = body.find("tokens");
  if (ids == body.end()) {
    return Invalid("tokens", "is required: a list of token ids");
  }
  RETURN_IF_ERROR(ToTokenIds(*ids, "tokens", req->mutable_token_ids()));
  bool skip = true;
  RETURN_IF_ERROR(Bool(body, "skip_special_tokens", &skip));
  req->set_skip_special_tokens(skip);
  return absl::OkStatus();
}

void Detokenize(const HttpContext& ctx, const httplib::Request& req,
                httplib::Response& res) {
  HttpCall call(ctx, "POST /detokenize", Api::kDetokenize);
  std::optional<Json> body = call.AdmitBody(req, res);
  if (!body.has_value()) return;
  v1::DetokenizeRequest dr;
  absl::Status s = ToDetokenizeRequest(*body, &dr);
  std::string model;
  absl::StatusOr<v1::DetokenizeResponse> r =
      s.ok() ? ctx.requests->Detokenize(dr, &model)
             : absl::StatusOr<v1::DetokenizeResponse>(s);
  call.set_model(model);
  if (!r.ok()) {
    call.Fail(res, r.status());
    return;
  }
  call.set_status(absl::OkStatus());
  res.set_content(Json{{"prompt", r->text()}}.dump(), "application/json");
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
