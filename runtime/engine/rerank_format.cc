#include "runtime/engine/rerank_format.h"

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"

namespace inferd {

std::string RerankFormat::Pair(const std::string& query,
                               const std::string& document) const {
  // One pass, so a query that contains "{document}" stays as it is.
  return absl::StrReplaceAll(pair, {{"{instruction}", instruction},
                                    {"{query}", query},
                                    {"{document}", document}});
}

bool RerankFormat::UsesBos() const {
  return absl::StrContains(prefix + pair + suffix, "{bos}");
}

RerankFormat RerankFormat::ForModel(const std::string& bos_token) const {
  RerankFormat f = *this;
  for (std::string* s : {&f.prefix, &f.suffix}) {
    *s = absl::StrReplaceAll(*s, {{"{bos}", bos_token},
                                  {"{instruction}", instruction}});
  }
  f.pair = absl::StrReplaceAll(f.pair, {{"{bos}", bos_token}});
  return f;
}

Registry<RerankFormat>& RerankFormats() {
  static auto* const registry = new Registry<RerankFormat>(
      "rerank_format",
      "a decoder reranker's prompt and the tokens whose logits score it");
  return *registry;
}

}  // namespace inferd
