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
#include "service/outbox.h"

namespace inferd::http {
namespace {

// Submits a prefill request (RequestLayer::Embed, ::Rerank) and waits for
// its answer; records the model and the outcome on `call`.
template <typename Req, typename Resp>
absl::StatusOr<Resp> SubmitAndWait(
    HttpCall& call,
    absl::StatusOr<std::shared_ptr<RequestHandle>> (RequestLayer::*submit)(
        const Req&, absl::Time, RequestLayer::Sink<Resp>, std::string*),
    const Req& r, std::string* model) {
  auto outbox = std::make_shared<Outbox<Resp>>();
  absl::StatusOr<std::shared_ptr<RequestHandle>> handle =
      (call.requests()->*submit)(
          r, absl::InfiniteFuture(),
          [outbox](absl::StatusOr<Resp> v) {
            if (v.ok()) outbox->Push(*std::move(v));
            outbox->End(v.status());
          },
          model);
  call.set_model(*model);
  if (!handle.ok()) return handle.status();
  typename Outbox<Resp>::Next next = outbox->Pull();
  if (!next.item.has_value()) return *next.end;
  return *std::move(next.item);
}

absl::Status ToEmbedRequest(const Json& body, v1::EmbedRequest* req) {
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


absl::Status ToRerankRequest(const Json& body, bool tei,
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


Json EmbeddingsJson(const v1::EmbedResponse& r, bool base64,
                    const std::string& model) {
  Json data = Json::array();
  for (int i = 0; i < r.embeddings_size(); ++i) {
    const v1::Embedding& e = r.embeddings(i);
    Json item = {{"object", "embedding"}, {"index", i}};
    if (base64) {
      std::string bytes(reinterpret_cast<const char*>(e.values().data()),
                        sizeof(float) * static_cast<size_t>(e.values_size()));
      item["embedding"] = absl::Base64Escape(bytes);
    } else {
      item["embedding"] =
          std::vector<float>(e.values().begin(), e.values().end());
    }
    data.push_back(std::move(item));
  }
  const uint32_t tokens = r.usage().total_tokens();
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
  v1::EmbedRequest embed;
  embed.set_model(body->value("model", ""));
  absl::Status s = ToEmbedRequest(*body, &embed);
  const std::string format = body->value("encoding_format", "float");
  if (s.ok() && format != "float" && format != "base64") {
    s = Invalid("encoding_format", "must be float or base64");
  }
  std::string model;
  absl::StatusOr<v1::EmbedResponse> r =
      s.ok() ? SubmitAndWait<v1::EmbedRequest, v1::EmbedResponse>(
                   call, &RequestLayer::Embed, embed, &model)
             : absl::StatusOr<v1::EmbedResponse>(s);
  if (!r.ok()) {
    call.Fail(res, r.status());
    return;
  }
  call.set_status(absl::OkStatus());
  res.set_content(EmbeddingsJson(*r, format == "base64", model).dump(),
                  "application/json");
}

Json RerankJson(const v1::RerankResponse& r, bool tei,
                const std::string& model) {
  Json results = Json::array();
  for (const v1::RerankResult& x : r.results()) {
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
  if (tei) return results;
  return Json{{"id", absl::StrCat("rerank-", NowNanos())},
              {"model", model},
              {"usage", {{"total_tokens", r.usage().total_tokens()}}},
              {"results", results}};
}

void Rerank(const HttpContext& ctx, const httplib::Request& req,
            httplib::Response& res, bool tei) {
  HttpCall call(ctx, tei ? "POST /rerank" : "POST /v1/rerank",
                tei ? Api::kTeiRerank : Api::kRerank);
  std::optional<Json> body = call.AdmitBody(req, res);
  if (!body.has_value()) return;
  v1::RerankRequest rr;
  absl::Status s = ToRerankRequest(*body, tei, &rr);
  std::string model;
  absl::StatusOr<v1::RerankResponse> r =
      s.ok() ? SubmitAndWait<v1::RerankRequest, v1::RerankResponse>(
                   call, &RequestLayer::Rerank, rr, &model)
             : absl::StatusOr<v1::RerankResponse>(s);
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
