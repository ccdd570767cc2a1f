// CpuDevice: host memory, the memory limit (device/cpu/host_resources.h), a
// ThreadPool for kernels and the op
// table of optimized CPU kernels (ISA picked at run time per call).
// Thread-safe.
#ifndef INFERD_DEVICE_CPU_CPU_DEVICE_H_
#define INFERD_DEVICE_CPU_CPU_DEVICE_H_

#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "device/cpu/thread_pool.h"
#include "device/device.h"

namespace inferd {

class CpuDevice : public Device {
 public:
  explicit CpuDevice(const DeviceOptions& options);

  absl::string_view name() const override { return "cpu"; }
  absl::StatusOr<void*> Allocate(size_t bytes, size_t alignment) override;
  // Anonymous private mappings: zero pages until written, so a large KV
  // cache costs resident memory only as its blocks are used.
  absl::StatusOr<void*> AllocateZeroed(size_t bytes, size_t alignment) override;
  void Free(void* ptr) override;
  int64_t ResidentBytes(const void* ptr, size_t bytes) const override;
  absl::StatusOr<MemoryInfo> GetMemoryInfo() const override;
  absl::Status Synchronize() override { return absl::OkStatus(); }
  bool host_accessible() const override { return true; }
  const OpTable& ops() const override;
  ThreadPool* thread_pool() const override { return pool_.get(); }
  bool fast_bf16_products() const override;

 private:
  std::unique_ptr<ThreadPool> pool_;
  // Sizes of the AllocateZeroed() mappings, for munmap in Free().
  absl::Mutex mapped_mu_;
  std::map<void*, size_t> mapped_ ABSL_GUARDED_BY(mapped_mu_);
};

// Factory registered as "cpu".
absl::StatusOr<std::unique_ptr<Device>> CreateCpuDevice(
    const DeviceOptions& options);

// The optimized CPU kernels (device/cpu/*_cpu.cc).
const OpTable& CpuOpTable();

}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_CPU_DEVICE_H_
