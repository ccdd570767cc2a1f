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

// The shared instances, one per device name.
struct Instances {
  absl::Mutex mu;
  std::map<std::string, std::unique_ptr<Device>, std::less<>> devices
      ABSL_GUARDED_BY(mu);
};

Instances& GetInstances() {
  static Instances* const instances = new Instances;
  return *instances;
}

}  // namespace

Registry<DeviceFactory>& Devices() {
  static auto* const registry = new Registry<DeviceFactory>(
      "device", "a compute backend: memory, synchronization, op table");
  return *registry;
}

void RegisterDeviceBuiltins() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Built-in devices: one line per backend.
    absl::Status s = Devices().Add(
        "cpu",
        "host CPU: AVX-512 / AVX2 kernels chosen at run time, portable C++ "
        "otherwise; one thread pool",
        &CreateCpuDevice);
    (void)s;  // call_once: registered once
  });
}

absl::Status DeviceRegistry::Register(absl::string_view name, Factory factory,
                                      std::string description,
                                      std::string origin) {
  if (!factory) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", name, "' was registered without a factory"));
  }
  return Devices().Add(std::string(name), std::move(description),
                       std::move(factory), std::move(origin));
}

absl::StatusOr<std::unique_ptr<Device>> DeviceRegistry::Create(
    absl::string_view name, const DeviceOptions& options) {
  absl::StatusOr<DeviceFactory> factory = Devices().Get(name);
  if (!factory.ok()) return factory.status();
  return (*factory)(options);
}

absl::StatusOr<Device*> DeviceRegistry::Init(absl::string_view name,
                                             const DeviceOptions& options) {
  Instances& r = GetInstances();
  {
    absl::MutexLock lock(&r.mu);
    if (r.devices.find(name) != r.devices.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("device '", name, "' is already initialized"));
    }
  }
  absl::StatusOr<std::unique_ptr<Device>> device = Create(name, options);
  if (!device.ok()) return device.status();
  absl::MutexLock lock(&r.mu);
  auto [it, inserted] = r.devices.emplace(std::string(name), nullptr);
  if (!inserted) {
    return absl::FailedPreconditionError(
        absl::StrCat("device '", name, "' is already initialized"));
  }
  it->second = std::move(*device);
  return it->second.get();
}

absl::StatusOr<Device*> DeviceRegistry::Get(absl::string_view name) {
  Instances& r = GetInstances();
  {
    absl::MutexLock lock(&r.mu);
    auto it = r.devices.find(name);
    if (it != r.devices.end()) return it->second.get();
  }
  absl::StatusOr<Device*> device = Init(name, DeviceOptions{});
  if (device.ok() || !absl::IsFailedPrecondition(device.status())) {
    return device;
  }
  // Lost a race with another initializer: use its instance.
  absl::MutexLock lock(&r.mu);
  return r.devices.find(name)->second.get();
}

std::vector<std::string> DeviceRegistry::Names() { return Devices().Names(); }

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
