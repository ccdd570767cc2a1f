#include "device/cpu/cpu_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/cpu/cpu_features.h"
#include "device/cpu/host_resources.h"

namespace inferd {

CpuDevice::CpuDevice(const DeviceOptions& options)
    : pool_(std::make_unique<ThreadPool>(options.num_threads)) {}

bool CpuDevice::fast_bf16_products() const { return Bf16DotInUse(); }

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

absl::StatusOr<void*> CpuDevice::AllocateZeroed(size_t bytes,
                                               size_t alignment) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0 ||
      alignment > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "alignment ", alignment, " is not a power of two in [", sizeof(void*),
        ", 4096]"));
  }
  const size_t len = bytes == 0 ? 1 : bytes;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cpu: failed to map ", bytes, " bytes"));
  }
  absl::MutexLock lock(&mapped_mu_);
  mapped_[p] = len;
  return p;
}

void CpuDevice::Free(void* ptr) {
  if (ptr == nullptr) return;
  {
    absl::MutexLock lock(&mapped_mu_);
    auto it = mapped_.find(ptr);
    if (it != mapped_.end()) {
      munmap(it->first, it->second);
      mapped_.erase(it);
      return;
    }
  }
  std::free(ptr);
}

int64_t CpuDevice::ResidentBytes(const void* ptr, size_t bytes) const {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(ptr) + bytes;
  const size_t pages = (end - begin + page - 1) / page;
  std::vector<unsigned char> resident(pages);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, resident.data()) !=
      0) {
    return static_cast<int64_t>(bytes);  // not a mapping: all of it counts
  }
  int64_t n = 0;
  for (unsigned char r : resident) n += r & 1;
  return std::min<int64_t>(n * static_cast<int64_t>(page),
                           static_cast<int64_t>(bytes));
}

absl::StatusOr<MemoryInfo> CpuDevice::GetMemoryInfo() const {
  absl::StatusOr<HostMemory> host = ReadHostMemory();
  if (!host.ok()) return host.status();
  MemoryInfo info;
  info.total_bytes = host->limit_bytes();
  info.free_bytes = host->available_bytes();
  info.source = host->limit_source;
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
