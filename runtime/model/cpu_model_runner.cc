#include "runtime/model/cpu_model_runner.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "device/cpu/thread_pool.h"
#include "runtime/common/registry.h"
#include "runtime/common/status_macros.h"

namespace inferd {

CpuModelRunner::CpuModelRunner(std::unique_ptr<Device> owned_device)
    : owned_device_(std::move(owned_device)) {}

// owned_device_ dies before the base's members, so the base's device
// buffers are released first.
CpuModelRunner::~CpuModelRunner() { ReleaseDeviceMemory(); }

absl::StatusOr<std::unique_ptr<CpuModelRunner>> CpuModelRunner::Create(
    const ModelRunnerOptions& options) {
  if (options.threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be >= 0; got ", options.threads));
  }
  std::unique_ptr<Device> owned;
  Device* device = nullptr;
  if (options.threads > 0) {
    DeviceOptions device_options;
    device_options.num_threads = options.threads;
    ASSIGN_OR_RETURN(owned, DeviceRegistry::Create("cpu", device_options));
    device = owned.get();
  } else {
    ASSIGN_OR_RETURN(device, DeviceRegistry::Get("cpu"));
  }
  std::unique_ptr<CpuModelRunner> runner(new CpuModelRunner(std::move(owned)));
  RETURN_IF_ERROR(runner->Init(device, options));
  return runner;
}

int CpuModelRunner::num_threads() const {
  ThreadPool* pool = device()->thread_pool();
  return pool != nullptr ? pool->num_threads() : 1;
}

void RegisterCpuModelRunner() {
  ModelRunnerFactory factory = [](const ModelRunnerOptions& options)
      -> absl::StatusOr<std::unique_ptr<ModelRunnerBase>> {
    ASSIGN_OR_RETURN(std::unique_ptr<CpuModelRunner> runner,
                     CpuModelRunner::Create(options));
    return std::unique_ptr<ModelRunnerBase>(std::move(runner));
  };
  absl::Status s = ModelRunners().Add(
      "cpu",
      "host CPU: the shared cpu device, or a private one when a thread "
      "count is given",
      std::move(factory));
  (void)s;  // RegisterModelBuiltins' call_once: registered once
}

}  // namespace inferd
