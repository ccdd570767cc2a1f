// Model registry: HF `architectures[0]` -> the factory that builds that
// model. A new architecture is one model file plus one line in
// model_registry.cc. Thread-safe (the table is immutable).
#ifndef INFERD_RUNTIME_MODEL_MODEL_REGISTRY_H_
#define INFERD_RUNTIME_MODEL_MODEL_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/loader/model_config.h"
#include "runtime/loader/weights.h"
#include "runtime/model/model.h"

namespace inferd {

using ModelFactory = absl::StatusOr<std::unique_ptr<Model>> (*)(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options);

// NOT_FOUND listing the supported architectures for an unknown one.
absl::StatusOr<ModelFactory> FindModelFactory(absl::string_view architecture);

// Sorted.
std::vector<std::string> SupportedArchitectures();

// Builds config.architectures[0]. `weights` must outlive the model.
absl::StatusOr<std::unique_ptr<Model>> CreateModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options);

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_MODEL_REGISTRY_H_
