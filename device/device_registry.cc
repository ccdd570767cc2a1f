#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "device/cpu/cpu_device.h"
#include "device/device.h"

namespace inferd {
namespace {

struct Registry {
  absl::Mutex mu;
  std::map<std::string, DeviceRegistry::Factory, std::less<>> factories
      ABSL_GUARDED_BY(mu);
  std::map<std::string, std::unique_ptr<Device>, std::less<>> instances
      ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* registry = [] {
    auto* r = new Registry;
    absl::MutexLock lock(&r->mu);
    // Built-in devices: one line per backend.
    r->factories.emplace("cpu", &CreateCpuDevice);
    return r;
  }();
  return *registry;
}

}  // namespace

absl::Status DeviceRegistry::Register(absl::string_view name,
                                      Factory factory) {
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  if (!r.factories.emplace(std::string(name), std::move(factory)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("device '", name, "' is already registered"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Device>> DeviceRegistry::Create(
    absl::string_view name, const DeviceOptions& options) {
  Factory factory;
  {
    Registry& r = GetRegistry();
    absl::MutexLock lock(&r.mu);
    auto it = r.factories.find(name);
    if (it == r.factories.end()) {
      return absl::NotFoundError(absl::StrCat("unknown device '", name, "'"));
    }
    factory = it->second;
  }
  return factory(options);
}

absl::StatusOr<Device*> DeviceRegistry::Init(absl::string_view name,
                                             const DeviceOptions& options) {
  Registry& r = GetRegistry();
  {
    absl::MutexLock lock(&r.mu);
    if (r.instances.find(name) != r.instances.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("device '", name, "' is already initialized"));
    }
  }
  absl::StatusOr<std::unique_ptr<Device>> device = Create(name, options);
  if (!device.ok()) return device.status();
  absl::MutexLock lock(&r.mu);
  auto [it, inserted] = r.instances.emplace(std::string(name), nullptr);
  if (!inserted) {
    return absl::FailedPreconditionError(
        absl::StrCat("device '", name, "' is already initialized"));
  }
  it->second = std::move(*device);
  return it->second.get();
}

absl::StatusOr<Device*> DeviceRegistry::Get(absl::string_view name) {
  Registry& r = GetRegistry();
  {
    absl::MutexLock lock(&r.mu);
    auto it = r.instances.find(name);
    if (it != r.instances.end()) return it->second.get();
  }
  absl::StatusOr<Device*> device = Init(name, DeviceOptions{});
  if (device.ok() || !absl::IsFailedPrecondition(device.status())) {
    return device;
  }
  // Lost a race with another initializer: use its instance.
  absl::MutexLock lock(&r.mu);
  return r.instances.find(name)->second.get();
}

std::vector<std::string> DeviceRegistry::Names() {
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  std::vector<std::string> names;
  for (const auto& [name, factory] : r.factories) names.push_back(name);
  return names;
}

DeviceBuffer DeviceBuffer::Own(Device* device, void* data, size_t bytes) {
  DeviceBuffer buffer;
  buffer.device_ = device;
  buffer.data_ = data;
  buffer.size_ = bytes;
  return buffer;
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Create(Device* device, size_t bytes,
                                                  size_t alignment) {
  absl::StatusOr<void*> data = device->Allocate(bytes, alignment);
  if (!data.ok()) return data.status();
  return Own(device, *data, bytes);
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::CreateZeroed(Device* device,
                                                        size_t bytes,
                                                        size_t alignment) {
  absl::StatusOr<void*> data = device->AllocateZeroed(bytes, alignment);
  if (!data.ok()) return data.status();
  return Own(device, *data, bytes);
}

absl::StatusOr<void*> Device::AllocateZeroed(size_t bytes, size_t alignment) {
  if (!host_accessible()) {
    return absl::UnimplementedError(absl::StrCat(
        name(), ": AllocateZeroed needs a device implementation"));
  }
  absl::StatusOr<void*> data = Allocate(bytes, alignment);
  if (data.ok() && bytes > 0) std::memset(*data, 0, bytes);
  return data;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(std::exchange(other.device_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (device_ != nullptr) device_->Free(data_);
    device_ = std::exchange(other.device_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (device_ != nullptr) device_->Free(data_);
}

}  // namespace inferd
