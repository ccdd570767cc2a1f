// StepRunner: what an engine loop calls to run one step (a BatchPlan
// through the model's forward pass). Both engines use it: the prefill
// engine has one per replica, the generate engine one. Not thread-safe; one
// per loop.
#ifndef INFERD_RUNTIME_ENGINE_STEP_RUNNER_H_
#define INFERD_RUNTIME_ENGINE_STEP_RUNNER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/model/batch_plan.h"

namespace inferd {

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual absl::StatusOr<BatchResult> Execute(const BatchPlan& plan) = 0;
  // KV cache bytes committed so far (0 without a cache); callable from any
  // thread.
  virtual int64_t kv_cache_resident_bytes() const { return 0; }
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_STEP_RUNNER_H_
