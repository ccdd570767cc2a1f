#include "runtime/model/model.h"

#include "absl/strings/str_cat.h"

namespace inferd {

absl::Status Model::ComputeLogits(const ForwardContext& ctx,
                                  const TensorView& rows,
                                  const TensorView& out) {
  return absl::FailedPreconditionError(absl::StrCat(
      "model ", info_.architecture, " has no language-model head"));
}

absl::Status Model::Classify(const ForwardContext& ctx, const TensorView& rows,
                             const TensorView& out) {
  return absl::FailedPreconditionError(absl::StrCat(
      "model ", info_.architecture, " has no classification head"));
}

}  // namespace inferd
