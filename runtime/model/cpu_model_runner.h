// CpuModelRunner: ModelRunnerBase on the host CPU. Adds what only the CPU
// needs: a private kernel thread pool when a thread count is asked for.
// Not thread-safe (see ModelRunnerBase).
#ifndef INFERD_RUNTIME_MODEL_CPU_MODEL_RUNNER_H_
#define INFERD_RUNTIME_MODEL_CPU_MODEL_RUNNER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "device/device.h"
#include "runtime/model/model_runner.h"

namespace inferd {

class CpuModelRunner : public ModelRunnerBase {
 public:
  // options.threads > 0: a private CPU device with that many kernel
  // threads; 0: the shared "cpu" device.
  static absl::StatusOr<std::unique_ptr<CpuModelRunner>> Create(
      const ModelRunnerOptions& options);

  ~CpuModelRunner() override;

  // Kernel threads in use.
  int num_threads() const;

 private:
  explicit CpuModelRunner(std::unique_ptr<Device> owned_device);

  std::unique_ptr<Device> owned_device_;  // null when using the shared one
};

// Registers CpuModelRunner::Create as the model runner of device kind "cpu"
// (registry kind "model_runner"). RegisterModelBuiltins calls it once.
void RegisterCpuModelRunner();

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_CPU_MODEL_RUNNER_H_
