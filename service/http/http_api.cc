#include "service/http/http_api.h"

#include <httplib.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service/http/response_store.h"
#include "service/http/routes.h"

namespace inferd {

using http::Json;
using http::ReplyError;

absl::StatusOr<std::unique_ptr<HttpApi>> HttpApi::Start(
    RequestLayer* requests, const ApiKeyAuth* auth,
    const HttpApiOptions& options) {
  std::unique_ptr<HttpApi> api(new HttpApi());
  api->requests_ = requests;
  api->auth_ = auth;
  api->options_ = options;
  if (options.tls_cert.empty()) {
    api->server_ = std::make_unique<httplib::Server>();
  } else {
    auto tls = std::make_unique<httplib::SSLServer>(
        options.tls_cert.c_str(), options.tls_key.c_str(),
        options.tls_client_ca.empty() ? nullptr
                                      : options.tls_client_ca.c_str());
    if (!tls->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--http-listen with TLS: cannot use --tls-cert=", options.tls_cert,
          " and --tls-key=", options.tls_key,
          options.tls_client_ca.empty()
              ? std::string()
              : absl::StrCat(" and --tls-client-ca=", options.tls_client_ca),
          " (PEM files; the key must match the certificate)"));
    }
    api->server_ = std::move(tls);
  }
  const int threads = std::max(1, options.max_concurrent_requests);
  api->server_->new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<size_t>(threads));
  };
  api->server_->set_payload_max_length(options.max_body_bytes);
  // A handler that throws (a JSON field of an unexpected type read before
  // it was checked) is a 400 with the library's message, not a 500, and
  // the worker thread goes on.
  api->server_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res,
         std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const Json::type_error& e) {
          ReplyError(res, absl::InvalidArgumentError(absl::StrCat(
                              "a field has the wrong type: ", e.what())));
        } catch (const std::exception& e) {
          ReplyError(res, absl::InternalError(e.what()));
        } catch (...) {
          ReplyError(res, absl::InternalError("unknown error"));
        }
      });
  api->Routes();
  const size_t colon = options.listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(options.listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http-listen=", options.listen, ": expected HOST:PORT"));
  }
  std::string host = options.listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const int bound = port == 0 ? api->server_->bind_to_any_port(host)
                              : (api->server_->bind_to_port(host, port) ? port
                                                                        : -1);
  if (bound <= 0) {
    return absl::UnavailableError(absl::StrCat(
        "--http-listen=", options.listen,
        ": cannot listen there (address in use, or not this host's)"));
  }
  api->port_ = bound;
  httplib::Server* server = api->server_.get();
  api->thread_ = std::thread([server] { server->listen_after_bind(); });
  return api;
}

void HttpApi::Routes() {
  httplib::Server& s = *server_;
  responses_ = std::make_unique<http::ResponseStore>(
      options_.responses_store_size, options_.responses_store_bytes,
      options_.responses_store_ttl);
  const http::HttpContext ctx{requests_, auth_, http::NowSeconds(),
                              responses_.get()};
  http::AddModelRoutes(s, ctx, options_.metrics);
  http::AddCompletionRoutes(s, ctx);
  http::AddResponsesRoutes(s, ctx);
  http::AddMessagesRoutes(s, ctx);
  http::AddEmbeddingRoutes(s, ctx);
  http::AddTokenizeRoutes(s, ctx);
  // Errors without a body of their own (an unknown route, and what
  // cpp-httplib refuses itself: a body over the limit, an oversized or
  // malformed request line or header) answer OpenAI's error object too.
  s.set_error_handler(httplib::Server::HandlerWithResponse(
      [max = options_.max_body_bytes](const httplib::Request& q,
                                      httplib::Response& r) {
        if (!r.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        const int status = r.status;
        // Anthropic's routes answer in Anthropic's error shape.
        void (*reply)(httplib::Response&, const absl::Status&) =
            absl::StartsWith(q.path, "/v1/messages")
                ? http::ReplyAnthropicError
                : http::ReplyError;
        std::string what;
        switch (status) {
          case 404:
            reply(r, absl::NotFoundError(absl::StrCat(
                         "no route ", q.method, " ", q.path,
                         " (this server serves /v1/models, /v1/chat/"
                         "completions, /v1/completions, /v1/responses, "
                         "/v1/messages, /v1/embeddings, /v1/rerank, "
                         "/rerank, /tokenize, /detokenize, /health)")));
            return httplib::Server::HandlerResponse::Handled;
          case 413:
            what = absl::StrCat("the request body is larger than the "
                                "server's limit of ", max, " bytes");
            break;
          case 414:
            what = "the request line (URI) is too long";
            break;
          case 400:
            what = absl::StrCat(
                "malformed HTTP request (or a request line or header longer "
                "than ", CPPHTTPLIB_HEADER_MAX_LENGTH, " bytes)");
            break;
          default:
            what = absl::StrCat("HTTP ", status);
        }
        reply(r, absl::InvalidArgumentError(what));
        r.status = status;
        return httplib::Server::HandlerResponse::Handled;
      }));
}

void HttpApi::Stop() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

HttpApi::~HttpApi() { Stop(); }

}  // namespace inferd
