#include "service/http/openai_names.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/field_error.h"

namespace inferd::http {
namespace {

// The first segment of a path: up to its first '.' or '['.
absl::string_view Head(absl::string_view path) {
  const size_t end = path.find_first_of(".[");
  return end == absl::string_view::npos ? path : path.substr(0, end);
}

// `prefix[i]` + rest -> `prefix[i].function` + rest for the fields OpenAI
// nests under "function" (tools and the tool calls of messages).
std::string UnderFunction(absl::string_view path, absl::string_view list) {
  const size_t at = path.find(list);
  if (at == absl::string_view::npos) return std::string(path);
  const size_t close = path.find(']', at);
  if (close == absl::string_view::npos) return std::string(path);
  absl::string_view rest = path.substr(close + 1);
  for (absl::string_view nested :
       {".name", ".description", ".parameters", ".strict", ".arguments"}) {
    if (absl::StartsWith(rest, nested)) {
      return absl::StrCat(path.substr(0, close + 1), ".function", rest);
    }
  }
  return std::string(path);
}

// The Responses API's and Anthropic's names: their function tools are
// flat (Anthropic's schema is input_schema); the conversation is `input` /
// `messages` (the system turn counts among inferd's messages, so no index).
std::string AgentApiParam(Api api, absl::string_view path) {
  const bool anthropic = api == Api::kMessages;
  if (absl::StartsWith(path, "sampling.")) {
    absl::string_view field = path.substr(9);
    if (field == "max_tokens") {
      return anthropic ? "max_tokens" : "max_output_tokens";
    }
    if (field == "stop" && anthropic) return "stop_sequences";
    if (absl::StartsWith(field, "response_format") && !anthropic) {
      return "text.format";
    }
    return std::string(field);
  }
  const absl::string_view head = Head(path);
  if (head == "response_format") return anthropic ? "tools" : "text.format";
  if (head == "messages" || head == "prompt") {
    return anthropic ? "messages" : "input";
  }
  if (head == "tools" && anthropic) {
    const size_t at = path.find(".parameters");
    if (at != absl::string_view::npos) {
      return absl::StrCat(path.substr(0, at), ".input_schema",
                          path.substr(at + 11));
    }
  }
  return std::string(path);
}

}  // namespace

std::string OpenAiParam(Api api, absl::string_view path) {
  if (api == Api::kResponses || api == Api::kMessages) {
    return AgentApiParam(api, path);
  }
  const bool chat = api == Api::kChat || api == Api::kTokenize;
  if (absl::StartsWith(path, "sampling.")) {
    absl::string_view field = path.substr(9);
    if (field == "logprobs") return chat ? "top_logprobs" : "logprobs";
    if (field == "prompt_logprobs") return "logprobs";
    return std::string(field);
  }
  const absl::string_view head = Head(path);
  if (head == "tool_choice") return "tool_choice";
  if (head == "tools") return UnderFunction(path, "tools[");
  if (head == "messages") return UnderFunction(path, ".tool_calls[");
  if (head == "prompt_token_ids") return "prompt";
  if (head == "prompt" && api == Api::kChat) return "messages";
  switch (api) {
    case Api::kEmbeddings:
      if (head == "texts" || head == "token_ids") return "input";
      break;
    case Api::kTeiRerank:
      if (head == "documents") {
        return absl::StrCat("texts", path.substr(head.size()));
      }
      break;
    case Api::kTokenize:
      if (head == "text") return "prompt";
      break;
    case Api::kDetokenize:
      if (head == "token_ids") return "tokens";
      break;
    case Api::kModels:
      if (head == "name") return "model";
      break;
    default:
      break;
  }
  return std::string(path);
}

absl::Status OpenAiNamed(Api api, const absl::Status& status) {
  const std::string path = FieldPathOf(status);
  if (path.empty()) return status;
  return RenameField(status, OpenAiParam(api, path));
}

}  // namespace inferd::http
