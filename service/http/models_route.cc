// GET /health (200 when every model is ready and the server is not
// draining, else 503, with each model's state), GET /v1/models,
// GET /v1/models/{id} (OpenAI's model objects, with inferd's max_model_len,
// dtype and activations), and GET /metrics when the server has them.
#include <string>
#include <vector>

#include "service/http/http_common.h"
#include "service/http/routes.h"

namespace inferd::http {
namespace {

void Health(const HttpContext& ctx, httplib::Response& res) {
  const std::vector<ServedModelInfo> list = ctx.requests->ListModels();
  Json models = Json::object();
  bool ready = !list.empty();
  for (const ServedModelInfo& m : list) {
    const bool ok = m.state == ModelState::kReady;
    ready = ready && ok;
    models[m.name] = ok                                 ? "ready"
                     : m.state == ModelState::kLoading ? "loading"
                                                       : "failed";
  }
  if (!ctx.requests->accepting()) ready = false;
  res.status = ready ? 200 : 503;
  res.set_content(
      Json{{"status", ready ? "ok" : "unavailable"}, {"models", models}}.dump(),
      "application/json");
}

Json ModelJson(const HttpContext& ctx, const ServedModelInfo& m) {
  return Json{{"id", m.name},
              {"object", "model"},
              {"created", ctx.created},
              {"owned_by", "inferd"},
              {"max_model_len", m.max_input_tokens},
              {"dtype", m.dtype},
              {"activations", m.activations}};
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
  if (metrics) {
    server.Get("/metrics", [metrics = std::move(metrics)](
                               const httplib::Request&, httplib::Response& r) {
      r.set_content(metrics(), "text/plain; version=0.0.4");
    });
  }
}

}  // namespace inferd::http
