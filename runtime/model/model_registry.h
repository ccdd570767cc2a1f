// Model classes: HF `architectures[0]` -> the factory that builds that
// model, kept in the model kind's registry (runtime/common/registry.h).
// A new architecture is one model file plus one registration (built-ins in
// model_registry.cc; plug-ins through runtime/engine/plugin_api.h).
// Thread-safe.
#ifndef INFERD_RUNTIME_MODEL_MODEL_REGISTRY_H_
#define INFERD_RUNTIME_MODEL_MODEL_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/common/registry.h"
#include "runtime/loader/model_config.h"
#include "runtime/loader/weights.h"
#include "runtime/model/model.h"

namespace inferd {

using ModelFactory = std::function<absl::StatusOr<std::unique_ptr<Model>>(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options)>;

// The model kind's registry (model class name -> factory).
Registry<ModelFactory>& ModelClasses();

// Registers the model layer's built-ins: model classes, attention backends
// and model runners, after the layers below (RegisterLoaderBuiltins,
// RegisterDeviceBuiltins). Called once at start-up (RegisterBuiltins, or the
// main of a tool that links only this layer); idempotent.
void RegisterModelBuiltins();

// NOT_FOUND listing the supported architectures for an unknown one.
absl::StatusOr<ModelFactory> FindModelFactory(absl::string_view architecture);

// Sorted.
std::vector<std::string> SupportedArchitectures();

// Builds `model_class` (empty: config.architectures[0]). `weights` must
// outlive the model.
absl::StatusOr<std::unique_ptr<Model>> CreateModel(
    const ModelConfig& config, const WeightStore& weights,
    const ModelLoadOptions& options, const std::string& model_class = "");

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_MODEL_REGISTRY_H_
