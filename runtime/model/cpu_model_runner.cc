#include "runtime/model/cpu_model_runner.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "device/cpu/thread_pool.h"
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

absl::StatusOr<int64_t> CpuModelRunner::NumKvBlocksForMemory(
    double fraction, int64_t bytes, int block_size,
    int64_t max_batched_tokens) const {
  if (bytes > 0) {
    return ModelRunnerBase::NumKvBlocksForMemory(fraction, bytes, block_size,
                                                 max_batched_tokens);
  }
  const int64_t per_block = KvCacheBytesPerBlock(block_size);
  if (per_block == 0) return 0;
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache fraction must be in (0, 1]; got ", fraction));
  }
  ASSIGN_OR_RETURN(MemoryInfo mem, device()->GetMemoryInfo());
  // MemAvailable counts reclaimable page cache, which is where the mapped
  // weights live once read; they must stay resident, so they are not free.
  const int64_t reserved =
      weight_bytes_mapped() +
      EstimateActivationBytes(max_batched_tokens, max_batched_tokens);
  const int64_t free_bytes = std::max<int64_t>(mem.free_bytes - reserved, 0);
  const int64_t budget =
      static_cast<int64_t>(static_cast<double>(free_bytes) * fraction);
  const int64_t blocks = budget / per_block;
  if (blocks <= 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no room for a KV cache block (", per_block,
                     " bytes): ", mem.free_bytes, " bytes available, ",
                     reserved, " reserved for weights and activations"));
  }
  return blocks;
}

int CpuModelRunner::num_threads() const {
  ThreadPool* pool = device()->thread_pool();
  return pool != nullptr ? pool->num_threads() : 1;
}

absl::StatusOr<std::unique_ptr<ModelRunnerBase>> CreateCpuModelRunner(
    const ModelRunnerOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<CpuModelRunner> runner,
                   CpuModelRunner::Create(options));
  return std::unique_ptr<ModelRunnerBase>(std::move(runner));
}

}  // namespace inferd
