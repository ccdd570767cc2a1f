// Generation answers in OpenAI's shapes: finish reasons, and the logprobs
// of chat completions (`content` entries with `top_logprobs`) and of legacy
// completions (parallel token / logprob / offset lists, echoed prompts
// first). Pure functions; thread-safe.
#ifndef INFERD_SERVICE_HTTP_OPENAI_LOGPROBS_H_
#define INFERD_SERVICE_HTTP_OPENAI_LOGPROBS_H_

#include <cstdint>
#include <string>

#include <vector>

#include "service/request/requests.h"
#include "service/http/http_common.h"

namespace inferd::http {

using LogprobList = std::vector<NamedLogprobs>;

// OpenAI's finish_reason of a final output ("stop", "length",
// "tool_calls").
const char* FinishReasonName(const GenerateOutput& out);

// Characters (code points) of well-formed UTF-8 text; bytes otherwise.
int64_t TextLength(const std::string& s);

// Chat completions' logprobs: {"content": [{token, logprob, bytes,
// top_logprobs}]} with at most `top` alternatives per token.
Json LogprobsJson(const LogprobList& lps, int top);

// /v1/completions' (legacy) logprobs: parallel lists of tokens, their
// logprobs, {token: logprob} maps of the top ones, and each token's offset
// in the completion text, counted from `*offset` (advanced past them).
Json LegacyLogprobsJson(const LogprobList& lps, int top, int64_t* offset);

// Completions' logprobs with an echo: the prompt's first token (null
// logprob and alternatives: it has no context), the prompt's other tokens,
// then the generated ones, offsets running over all of them.
Json EchoLogprobsJson(const std::string& first_token,
                      const LogprobList& prompt, const LogprobList& generated,
                      int top);

}  // namespace inferd::http

#endif  // INFERD_SERVICE_HTTP_OPENAI_LOGPROBS_H_
