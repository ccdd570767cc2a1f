// The built-in executors, registered as "prefill_loop" and
// "continuous_batching_loop" (builtins.cc); defined in
// engine_factory.cc. Each reads the model's workflow and builds its
// components from the registry.
#ifndef INFERD_RUNTIME_ENGINE_EXECUTORS_H_
#define INFERD_RUNTIME_ENGINE_EXECUTORS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/engine/components.h"
#include "runtime/engine/engine.h"

namespace inferd {

// PrefillEngine: input processor + prefill scheduler + output processor +
// one model runner per replica.
absl::StatusOr<std::unique_ptr<Engine>> BuildPrefillLoop(
    const EngineBuildContext& context);

// GenerateEngine: prompt input processor + continuous-batching scheduler +
// sampler + a model runner with a paged KV cache.
absl::StatusOr<std::unique_ptr<Engine>> BuildContinuousBatchingLoop(
    const EngineBuildContext& context);

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_EXECUTORS_H_
