// GET /health (200 once the models given at start loaded and none of them
// is FAILED, while the server is not draining, else 503, with each model's
// state), GET /v1/models, GET /v1/models/{id} (OpenAI's model objects, with
// inferd's max_model_len, dtype, activations and state), POST /v1/models
// (load a model while serving), DELETE /v1/models/{id} (unload it), and
// GET /metrics when the server has them.
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"
#include "service/http/http_common.h"
#include "service/http/routes.h"

namespace inferd::http {
namespace {

void Health(const HttpContext& ctx, httplib::Response& res) {
  const std::vector<ServedModelInfo> list = ctx.requests->ListModels();
  Json models = Json::object();
  bool ready = !list.empty();
  for (const ServedModelInfo& m : list) {
    // Loads and unloads while serving do not make the server unready: a
    // model given at start that failed does.
    ready = ready && (m.state != ModelState::kFailed || m.added_while_serving);
    models[m.name] = ModelStateName(m.state);
  }
  if (!ctx.requests->models()->AllLoaded()) ready = false;
  if (!ctx.requests->accepting()) ready = false;
  res.status = ready ? 200 : 503;
  res.set_content(
      Json{{"status", ready ? "ok" : "unavailable"}, {"models", models}}.dump(),
      "application/json");
}

Json ModelJson(const HttpContext& ctx, const ServedModelInfo& m) {
  Json j{{"id", m.name},
         {"object", "model"},
         {"created", ctx.created},
         {"owned_by", "inferd"},
         {"max_model_len", m.max_input_tokens},
         {"dtype", m.dtype},
         {"activations", m.activations},
         {"state", ModelStateName(m.state)},
         {"source", m.source}};
  if (!m.error.empty()) j["error"] = m.error;
  if (m.download_bytes_total > 0) {
    j["download"] = {{"bytes_done", m.download_bytes_done},
                     {"bytes_total", m.download_bytes_total}};
  }
  return j;
}

void ListModels(const HttpContext& ctx, const httplib::Request& req,
                httplib::Response& res) {
  HttpCall call(ctx, "GET /v1/models", Api::kModels, CallScope::Kind::kQuery);
  if (!call.Admit(req, res)) return;
  Json data = Json::array();
  for (const ServedModelInfo& m : ctx.requests->ListModels()) {
    data.push_back(ModelJson(ctx, m));
  }
  res.set_content(Json{{"object", "list"}, {"data", data}}.dump(),
                  "application/json");
}

void GetModel(const HttpContext& ctx, const httplib::Request& req,
              httplib::Response& res) {
  HttpCall call(ctx, "GET /v1/models/{id}", Api::kModels,
                CallScope::Kind::kQuery);
  if (!call.Admit(req, res)) return;
  absl::StatusOr<ServedModelInfo> info = ctx.requests->GetModel(req.matches[1]);
  if (!info.ok()) {
    call.Fail(res, info.status());
    return;
  }
  call.set_model(info->name);
  res.set_content(ModelJson(ctx, *info).dump(), "application/json");
}

absl::Status ToLoadModel(const Json& body, LoadModelInput* in) {
  for (const char* key : {"name", "path"}) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_string()) return Invalid(key, "must be a string");
    (key[0] == 'n' ? in->name : in->path) = it->get<std::string>();
  }
  // OpenAI-style bodies name the model `model`.
  if (in->name.empty()) in->name = body.value("model", "");
  if (in->name.empty()) {
    return Invalid("name", "is required: the model's name (as --model "
                           "NAME=PATH)");
  }
  auto opts = body.find("options");
  if (opts != body.end() && !opts->is_null()) {
    if (!opts->is_object()) {
      return Invalid("options", "must be an object of --model options, "
                                "e.g. {\"max-seqs\": 16}");
    }
    for (auto it = opts->begin(); it != opts->end(); ++it) {
      const Json& v = it.value();
      std::string text;
      if (v.is_string()) {
        text = v.get<std::string>();
      } else if (v.is_number() || v.is_boolean()) {
        text = v.dump();
      } else {
        return Invalid(absl::StrCat("options.", it.key()),
                       "must be a string, number or boolean");
      }
      in->options.emplace_back(it.key(), std::move(text));
    }
  }
  RETURN_IF_ERROR(Bool(body, "replace", &in->replace));
  RETURN_IF_ERROR(Bool(body, "wait", &in->wait));
  return absl::OkStatus();
}

void LoadModel(const HttpContext& ctx, const httplib::Request& req,
               httplib::Response& res) {
  HttpCall call(ctx, "POST /v1/models", Api::kModels);
  std::optional<Json> body = call.AdmitBody(req, res);
  if (!body.has_value()) return;
  LoadModelInput in;
  if (absl::Status s = ToLoadModel(*body, &in); !s.ok()) {
    call.Reject(res, s);
    return;
  }
  call.set_model(in.name);
  absl::StatusOr<ServedModelInfo> info = ctx.requests->LoadModel(in);
  if (!info.ok()) {
    call.Fail(res, info.status());
    return;
  }
  call.set_status(absl::OkStatus());
  res.status = info->state == ModelState::kReady ? 200 : 202;
  res.set_content(ModelJson(ctx, *info).dump(), "application/json");
}

void UnloadModel(const HttpContext& ctx, const httplib::Request& req,
                 httplib::Response& res) {
  HttpCall call(ctx, "DELETE /v1/models/{id}", Api::kModels);
  if (!call.Admit(req, res)) return;
  UnloadModelInput in;
  in.name = req.matches[1];
  call.set_model(in.name);
  if (req.has_param("grace_seconds")) {
    const std::string g = req.get_param_value("grace_seconds");
    double d;
    if (!absl::SimpleAtod(g, &d)) {
      call.Reject(res, Invalid("grace_seconds",
                               absl::StrCat("must be a number of seconds; "
                                            "got '", g, "'")));
      return;
    }
    in.grace_seconds = d;
  }
  absl::StatusOr<ServedModelInfo> info = ctx.requests->UnloadModel(in);
  if (!info.ok()) {
    call.Fail(res, info.status());
    return;
  }
  call.set_status(absl::OkStatus());
  // OpenAI's deletion object, with the model's state.
  Json out = ModelJson(ctx, *info);
  out["deleted"] = true;
  res.set_content(out.dump(), "application/json");
}

}  // namespace

void AddModelRoutes(httplib::Server& server, const HttpContext& ctx,
                    std::function<std::string()> metrics) {
  server.Get("/health", [ctx](const httplib::Request&, httplib::Response& r) {
    Health(ctx, r);
  });
  server.Get("/v1/models", [ctx](const httplib::Request& q,
                                 httplib::Response& r) {
    ListModels(ctx, q, r);
  });
  server.Get(R"(/v1/models/(.+))",
             [ctx](const httplib::Request& q, httplib::Response& r) {
               GetModel(ctx, q, r);
             });
  server.Post("/v1/models", [ctx](const httplib::Request& q,
                                  httplib::Response& r) {
    LoadModel(ctx, q, r);
  });
  server.Delete(R"(/v1/models/(.+))",
                [ctx](const httplib::Request& q, httplib::Response& r) {
                  UnloadModel(ctx, q, r);
                });
  if (metrics) {
    server.Get("/metrics", [metrics = std::move(metrics)](
                               const httplib::Request&, httplib::Response& r) {
      r.set_content(metrics(), "text/plain; version=0.0.4");
    });
  }
}

}  // namespace inferd::http
