// One generation over HTTP, whatever the route's wire format: the request
// layer's outputs go through the call's outbox to an AnswerWriter (the
// route's shape: OpenAI Responses, Anthropic Messages), written as one
// response (with heartbeats while the engine works: a client that left is
// noticed and its generation aborted) or as server-sent events. Internal to
// service/http/. An AnswerWriter belongs to one call (not thread-safe; the
// worker thread serving the call uses it).
#ifndef INFERD_SERVICE_HTTP_GENERATION_RUNNER_H_
#define INFERD_SERVICE_HTTP_GENERATION_RUNNER_H_

#include <httplib.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "service/http/http_common.h"
#include "service/request/requests.h"

namespace inferd::http {

// A route's answer, built from the generation's outputs in order.
class AnswerWriter {
 public:
  virtual ~AnswerWriter() = default;
  // The resolved model's name, before any output.
  virtual void Start(const std::string& model) = 0;
  // One output (streaming: returns the server-sent events it makes, text
  // ready to write; whole answers: returns "").
  virtual std::string Add(const GenerateOutput& m) = 0;
  // After the last output: the final events (streaming) or the body.
  virtual std::string Finish() = 0;
  // Streaming: the events of an error after the headers went out.
  virtual std::string StreamError(const absl::Status& status) = 0;
  // A whole answer's error after its status went out (the body's error).
  virtual std::string BodyError(const absl::Status& status) = 0;
};

// One server-sent event with an event name: `event: NAME`, `data: JSON`.
std::string NamedEvent(const std::string& name, const Json& data);

// Submits `in` and answers through `writer`: streamed (text/event-stream)
// or whole (application/json). Errors before the first output are the
// call's error reply (HttpCall::Fail).
void RunGeneration(const HttpContext& ctx, std::shared_ptr<HttpCall> call,
                   GenerateInput in, std::shared_ptr<AnswerWriter> writer,
                   bool stream, httplib::Response& res);

}  // namespace inferd::http

#endif  // INFERD_SERVICE_HTTP_GENERATION_RUNNER_H_
