// POST /v1/embeddings (OpenAI's shape), POST /v1/rerank (vLLM's, as Jina
// and Cohere clients send it) and TEI's POST /rerank: the body read into an
// inferd.v1 request, the engine's one answer waited for through the call's
// outbox, written in the route's shape.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"
#include "service/http/http_common.h"
#include "service/http/routes.h"
#include "service/request/outbox.h"

namespace inferd::http {
namespace {

// Submits a prefill request (RequestLayer::Embed, ::Rerank) and waits for
// its answer through an outbox; records the model on `call`.
template <typename Input, typename Answer>
absl::StatusOr<Answer> SubmitAndWait(
    HttpCall& call,
    absl::StatusOr<std::shared_ptr<RequestHandle>> (RequestLayer::*submit)(
        Input, RequestLayer::Sink<Answer>, std::string*),
    Input in, std::string* model) {
  auto outbox = std::make_shared<Outbox<Answer>>();
  absl::StatusOr<std::shared_ptr<RequestHandle>> handle =
      (call.requests()->*submit)(
          std::move(in),
          [outbox](absl::StatusOr<Answer> v) {
            if (v.ok()) outbox->Push(*std::move(v));
            outbox->End(v.status());
          },
          model);
  call.set_model(*model);
  if (!handle.ok()) return handle.status();
  typename Outbox<Answer>::Next next = outbox->Pull();
  if (!next.item.has_value()) return *next.end;
  return *std::move(next.item);
}

absl::Status ToEmbedRequest(const Json& body, EmbedInput* req) {
  req->model = body.value("model", "");
  EmbedParams& p = req->params;
  auto in = body.find("input");
  if (in == body.end()) return Invalid("input", "is required");
  auto ids = [&](const Json& arr) {
    return ToTokenIds(arr, "input", &req->token_ids.emplace_back());
  };
  if (in->is_string()) {
    p.texts.push_back(in->get<std::string>());
  } else if (in->is_array() && !in->empty()) {
    const Json& first = (*in)[0];
    if (first.is_string()) {
      for (const Json& t : *in) {
        if (!t.is_string()) return Invalid("input", "mixes strings and ids");
        p.texts.push_back(t.get<std::string>());
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
  p.dimensions = dims;
  return absl::OkStatus();
}


absl::Status ToRerankRequest(const Json& body, bool tei, RerankInput* req) {
  req->model = body.value("model", "");
  RerankParams& p = req->params;
  auto q = body.find("query");
  if (q == body.end() || !q->is_string()) {
    return Invalid("query", "is required: a string");
  }
  p.query = q->get<std::string>();
  const char* docs_key = tei ? "texts" : "documents";
  auto docs = body.find(docs_key);
  if (docs == body.end() || !docs->is_array() || docs->empty()) {
    return Invalid(docs_key, "is required: a non-empty list of strings");
  }
  for (size_t i = 0; i < docs->size(); ++i) {
    const Json& d = (*docs)[i];
    // Cohere / Jina clients may send {"text": ...} objects.
    if (d.is_string()) {
      p.documents.push_back(d.get<std::string>());
    } else if (!tei && d.is_object() && d.contains("text") &&
               d["text"].is_string()) {
      p.documents.push_back(d["text"].get<std::string>());
    } else {
      return Invalid(absl::StrCat(docs_key, "[", i, "]"),
                     "must be a string");
    }
  }
  // vLLM returns the documents unless told not to; TEI only when asked.
  bool ret = !tei;
  RETURN_IF_ERROR(Bool(body, tei ? "return_text" : "return_documents", &ret));
  req->return_documents = ret;
  if (auto it = body.find("top_n"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      return Invalid("top_n", "must be an integer >= 0");
    }
    req->top_n = it->get<int64_t>();
  }
  RETURN_IF_ERROR(Bool(body, "raw_scores", &p.raw_scores));
  RETURN_IF_ERROR(Bool(body, "truncate", &p.truncate));
  return absl::OkStatus();
}


Json EmbeddingsJson(const EmbedResult& r, bool base64,
                    const std::string& model) {
  Json data = Json::array();
  for (size_t i = 0; i < r.embeddings.size(); ++i) {
    const std::vector<float>& e = r.embeddings[i];
    Json item = {{"object", "embedding"}, {"index", i}};
    if (base64) {
      std::string bytes(reinterpret_cast<const char*>(e.data()),
                        sizeof(float) * e.size());
      item["embedding"] = absl::Base64Escape(bytes);
    } else {
      item["embedding"] = e;
    }
    data.push_back(std::move(item));
  }
  const int64_t tokens = r.total_tokens;
  return Json{{"object", "list"},
              {"data", data},
              {"model", model},
              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

void Embeddings(const HttpContext& ctx, const httplib::Request& req,
                httplib::Response& res) {
  HttpCall call(ctx, "POST /v1/embeddings", Api::kEmbeddings);
  std::optional<Json> body = call.AdmitBody(req, res);
  if (!body.has_value()) return;
  EmbedInput embed;
  absl::Status s = ToEmbedRequest(*body, &embed);
  const std::string format = body->value("encoding_format", "float");
  if (s.ok() && format != "float" && format != "base64") {
    s = Invalid("encoding_format", "must be float or base64");
  }
  std::string model;
  absl::StatusOr<EmbedResult> r =
      s.ok() ? SubmitAndWait<EmbedInput, EmbedResult>(
                   call, &RequestLayer::Embed, std::move(embed), &model)
             : absl::StatusOr<EmbedResult>(s);
  if (!r.ok()) {
    call.Fail(res, r.status());
    return;
  }
  call.set_status(absl::OkStatus());
  res.set_content(EmbeddingsJson(*r, format == "base64", model).dump(),
                  "application/json");
}

Json RerankJson(const RerankAnswer& r, bool tei, const std::string& model) {
  Json results = Json::array();
  for (const RerankAnswer::Item& x : r.results) {
    Json item = {{"index", x.index}};
    if (tei) {
      item["score"] = x.score;
      if (x.document.has_value()) item["text"] = *x.document;
    } else {
      item["relevance_score"] = x.score;
      if (x.document.has_value()) item["document"] = {{"text", *x.document}};
    }
    results.push_back(std::move(item));
  }
  if (tei) return results;
  return Json{{"id", absl::StrCat("rerank-", NowNanos())},
              {"model", model},
              {"usage", {{"total_tokens", r.total_tokens}}},
              {"results", results}};
}

void Rerank(const HttpContext& ctx, const httplib::Request& req,
            httplib::Response& res, bool tei) {
  HttpCall call(ctx, tei ? "POST /rerank" : "POST /v1/rerank",
                tei ? Api::kTeiRerank : Api::kRerank);
  std::optional<Json> body = call.AdmitBody(req, res);
  if (!body.has_value()) return;
  RerankInput rr;
  absl::Status s = ToRerankRequest(*body, tei, &rr);
  std::string model;
  absl::StatusOr<RerankAnswer> r =
      s.ok() ? SubmitAndWait<RerankInput, RerankAnswer>(
                   call, &RequestLayer::Rerank, std::move(rr), &model)
             : absl::StatusOr<RerankAnswer>(s);
  if (!r.ok()) {
    call.Fail(res, r.status());
    return;
  }
  call.set_status(absl::OkStatus());
  res.set_content(RerankJson(*r, tei, model).dump(), "application/json");
}

}  // namespace

void AddEmbeddingRoutes(httplib::Server& server, const HttpContext& ctx) {
  server.Post("/v1/embeddings",
              [ctx](const httplib::Request& q, httplib::Response& r) {
                Embeddings(ctx, q, r);
              });
  server.Post("/v1/rerank",
              [ctx](const httplib::Request& q, httplib::Response& r) {
                Rerank(ctx, q, r, /*tei=*/false);
              });
  server.Post("/rerank", [ctx](const httplib::Request& q, httplib::Response& r) {
    Rerank(ctx, q, r, /*tei=*/true);
  });
}

}  // namespace inferd::http
