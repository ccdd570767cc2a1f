// The names the HTTP front end's bodies give the fields of the inferd.v1
// API. The request layer and the engines name a field by its inferd.v1 path
// in the error's payload (runtime/common/field_error.h): this maps that path
// to the field of the route's body (OpenAI's `param`), without reading the
// message text. Pure functions; thread-safe.
#ifndef INFERD_SERVICE_HTTP_OPENAI_NAMES_H_
#define INFERD_SERVICE_HTTP_OPENAI_NAMES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace inferd::http {

// Which body shape a route reads.
enum class Api {
  kChat,         // POST /v1/chat/completions
  kCompletions,  // POST /v1/completions
  kEmbeddings,   // POST /v1/embeddings
  kRerank,       // POST /v1/rerank (vLLM / Jina / Cohere shape)
  kTeiRerank,    // POST /rerank (TEI's shape)
  kTokenize,     // POST /tokenize
  kDetokenize,   // POST /detokenize
  kModels,       // GET /v1/models/{id}
  kResponses,    // POST /v1/responses (OpenAI's Responses API)
  kMessages,     // POST /v1/messages (Anthropic's Messages API)
};

// The body's name of the inferd.v1 field `path` (`sampling.max_tokens` ->
// `max_tokens`, `tools[1].parameters` -> `tools[1].function.parameters`);
// a path the body names the same way is returned as it is.
std::string OpenAiParam(Api api, absl::string_view path);

// `status` with its field (if it records one) renamed by OpenAiParam.
absl::Status OpenAiNamed(Api api, const absl::Status& status);

}  // namespace inferd::http

#endif  // INFERD_SERVICE_HTTP_OPENAI_NAMES_H_
