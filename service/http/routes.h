// The routes of the HTTP front end, one file per family; each adds its
// handlers to the server. Internal to service/http/.
#ifndef INFERD_SERVICE_HTTP_ROUTES_H_
#define INFERD_SERVICE_HTTP_ROUTES_H_

#include <httplib.h>

#include <functional>
#include <string>

#include "service/http/http_common.h"

namespace inferd::http {

// models_route.cc: /health, /v1/models, /v1/models/{id}, and /metrics
// when `metrics` is set.
void AddModelRoutes(httplib::Server& server, const HttpContext& ctx,
                    std::function<std::string()> metrics);
// completions_route.cc: /v1/chat/completions, /v1/completions.
void AddCompletionRoutes(httplib::Server& server, const HttpContext& ctx);
// responses_route.cc: /v1/responses (POST), /v1/responses/{id} (GET,
// DELETE), /v1/responses/{id}/input_items.
void AddResponsesRoutes(httplib::Server& server, const HttpContext& ctx);
// messages_route.cc: Anthropic's /v1/messages, /v1/messages/count_tokens.
void AddMessagesRoutes(httplib::Server& server, const HttpContext& ctx);
// embeddings_route.cc: /v1/embeddings, /v1/rerank, /rerank.
void AddEmbeddingRoutes(httplib::Server& server, const HttpContext& ctx);
// tokenize_route.cc: /tokenize, /detokenize.
void AddTokenizeRoutes(httplib::Server& server, const HttpContext& ctx);

}  // namespace inferd::http

#endif  // INFERD_SERVICE_HTTP_ROUTES_H_
