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

}  // namespace

std::string OpenAiParam(Api api, absl::string_view path) {
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
