// The OpenAI-compatible HTTP API (--http-listen): the second front end on
// the request layer (request_layer.h), so the same models, engines, limits
// and errors serve the clients that speak OpenAI's API (the `openai` SDKs,
// LangChain, LiteLLM, gateways routing on the JSON body).
//
// Routes (one file per family, routes.h): GET /health (200 when every
// model is ready, else 503),
// GET /v1/models, GET /v1/models/{id}, POST /v1/chat/completions and
// POST /v1/completions (with `stream`: server-sent events, `data: {...}`
// chunks then `data: [DONE]`), POST /v1/embeddings. Request bodies are
// mapped onto inferd.v1 messages (unknown fields ignored, as OpenAI's API
// does; a field inferd cannot honour is a 400 naming it); answers and
// errors use OpenAI's shapes, errors as {"error": {"message", "type",
// "param", "code"}} with the HTTP status of the gRPC code. The API key is
// the gRPC one, as `Authorization: Bearer KEY`; with --tls-cert it is
// HTTPS (and mTLS with --tls-client-ca), as the gRPC port. The library is
// cpp-httplib (Debian's libcpp-httplib-dev); requests run on its worker
// threads, which wait for the engine's answer.
//
// Thread-safe. Stop() ends listening and waits for in-flight requests.
#ifndef INFERD_SERVICE_HTTP_HTTP_API_H_
#define INFERD_SERVICE_HTTP_HTTP_API_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "service/request/auth.h"
#include "service/request/request_layer.h"

namespace httplib {
class Server;
}
namespace inferd::http {
class ResponseStore;
}

namespace inferd {

struct HttpApiOptions {
  std::string listen;  // HOST:PORT; port 0 picks a free one
  // Concurrent requests (HTTP worker threads; a streaming response holds
  // one for its duration). --http-max-concurrent-requests.
  int max_concurrent_requests = 256;
  // Largest request body accepted.
  size_t max_body_bytes = 16 << 20;
  // HTTPS with the gRPC port's TLS files (--tls-cert, --tls-key; with
  // --tls-client-ca, clients must present a certificate it signed). Empty:
  // plain HTTP.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // When set, GET /metrics answers its Prometheus text (no API key, as on
  // the metrics port), so scrapers that read the serving port (an
  // inference gateway's endpoint picker) find it there.
  std::function<std::string()> metrics;
  // The Responses API's store (http/response_store.h).
  size_t responses_store_size = 1000;
  size_t responses_store_bytes = size_t{256} << 20;
  absl::Duration responses_store_ttl = absl::Hours(1);
};

class HttpApi {
 public:
  // Binds and starts serving on its own threads. `requests` and `auth` (may
  // be null: no key) must outlive the HttpApi.
  static absl::StatusOr<std::unique_ptr<HttpApi>> Start(
      RequestLayer* requests, const ApiKeyAuth* auth,
      const HttpApiOptions& options);
  ~HttpApi();

  int port() const { return port_; }
  // Stops accepting connections and joins the server (idempotent).
  void Stop();

 private:
  HttpApi() = default;
  void Routes();

  RequestLayer* requests_ = nullptr;
  const ApiKeyAuth* auth_ = nullptr;
  HttpApiOptions options_;
  std::unique_ptr<http::ResponseStore> responses_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace inferd

#endif  // INFERD_SERVICE_HTTP_HTTP_API_H_
