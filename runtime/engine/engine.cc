#include "runtime/engine/engine.h"

#include "absl/strings/str_cat.h"

namespace inferd {
namespace {

absl::Status NotServed(absl::string_view task) {
  return absl::FailedPreconditionError(
      absl::StrCat("this model's workflow does not ", task));
}

}  // namespace

absl::StatusOr<std::shared_ptr<RequestHandle>> Engine::SubmitEmbed(
    EmbedParams, ResultCallback<EmbedResult>) {
  return NotServed("embed");
}
absl::StatusOr<std::shared_ptr<RequestHandle>> Engine::SubmitClassify(
    ClassifyParams, ResultCallback<ClassifyResult>) {
  return NotServed("classify");
}
absl::StatusOr<std::shared_ptr<RequestHandle>> Engine::SubmitRerank(
    RerankParams, ResultCallback<RerankResult>) {
  return NotServed("rerank");
}
absl::StatusOr<std::shared_ptr<RequestHandle>> Engine::SubmitGenerate(
    GenerateParams, GenerateCallback) {
  return NotServed("generate");
}

}  // namespace inferd
