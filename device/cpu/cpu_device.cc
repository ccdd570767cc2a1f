#include "device/cpu/cpu_device.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"

namespace inferd {

CpuDevice::CpuDevice(const DeviceOptions& options)
    : pool_(std::make_unique<ThreadPool>(options.num_threads)) {}

absl::StatusOr<void*> CpuDevice::Allocate(size_t bytes, size_t alignment) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("alignment ", alignment, " is not a power of two >= ",
                     sizeof(void*)));
  }
  // aligned_alloc needs a size that is a multiple of the alignment.
  const size_t rounded = ((bytes == 0 ? 1 : bytes) + alignment - 1) /
                         alignment * alignment;
  void* p = std::aligned_alloc(alignment, rounded);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cpu: failed to allocate ", bytes, " bytes"));
  }
  return p;
}

void CpuDevice::Free(void* ptr) { std::free(ptr); }

absl::StatusOr<MemoryInfo> CpuDevice::GetMemoryInfo() const {
  std::ifstream in("/proc/meminfo");
  if (!in) return absl::UnavailableError("cannot read /proc/meminfo");
  MemoryInfo info;
  bool have_total = false, have_available = false;
  std::string key;
  int64_t value_kb = 0;
  std::string unit;
  while (in >> key >> value_kb) {
    std::getline(in, unit);
    if (key == "MemTotal:") {
      info.total_bytes = value_kb * 1024;
      have_total = true;
    } else if (key == "MemAvailable:") {
      info.free_bytes = value_kb * 1024;
      have_available = true;
    }
  }
  if (!have_total || !have_available) {
    return absl::UnavailableError("MemTotal/MemAvailable not in /proc/meminfo");
  }
  return info;
}

const OpTable& CpuDevice::ops() const { return CpuOpTable(); }

absl::StatusOr<std::unique_ptr<Device>> CreateCpuDevice(
    const DeviceOptions& options) {
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError("cpu: num_threads must be >= 0");
  }
  return std::unique_ptr<Device>(new CpuDevice(options));
}

}  // namespace inferd
