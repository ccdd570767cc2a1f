// Device: the small interface every compute backend implements (memory,
// memory info, synchronization, its op table), and DeviceRegistry, which maps
// a name ("cpu", later "cuda") to a shared Device instance; the factories are
// the registry kind "device" (runtime/common/registry.h).
// Thread-safe: Device methods and the registry may be called from any thread.
#ifndef INFERD_DEVICE_DEVICE_H_
#define INFERD_DEVICE_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/common/registry.h"

namespace inferd {

struct OpTable;    // device/op_table.h
class ThreadPool;  // device/cpu/thread_pool.h

struct MemoryInfo {
  // The limit that binds this process (CPU: its cgroup's memory limit when
  // one is set, else MemTotal).
  int64_t total_bytes = 0;
  // Memory the process could still allocate (CPU: MemAvailable, and under a
  // cgroup limit no more than the limit minus the cgroup's usage).
  int64_t free_bytes = 0;
  // Where total_bytes comes from, for logs ("cgroup v2 memory.max of ...").
  std::string source;
};

struct DeviceOptions {
  // Worker threads for host kernels; 0 = one per online core.
  int num_threads = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  // "cpu", "cuda:0", ...
  virtual absl::string_view name() const = 0;

  // Returns `bytes` of device memory aligned to `alignment` (a power of two).
  // The caller owns it and releases it with Free(). Zero bytes yields a valid
  // unique pointer. RESOURCE_EXHAUSTED when out of memory.
  virtual absl::StatusOr<void*> Allocate(size_t bytes,
                                         size_t alignment = 64) = 0;
  // Like Allocate(), but the memory reads as zeros and, where the device can,
  // is committed lazily: a page costs memory only once it is written (CPU:
  // anonymous mappings). For large buffers used a part at a time (the KV
  // cache). Released with Free().
  virtual absl::StatusOr<void*> AllocateZeroed(size_t bytes,
                                               size_t alignment = 64);
  // Releases memory from Allocate() or AllocateZeroed(); nullptr is a no-op.
  virtual void Free(void* ptr) = 0;
  // Bytes of [ptr, ptr + bytes) that take memory now (CPU: pages mincore
  // reports resident, for memory from AllocateZeroed that is committed as
  // it is written). The default counts everything.
  virtual int64_t ResidentBytes(const void* ptr, size_t bytes) const {
    (void)ptr;
    return static_cast<int64_t>(bytes);
  }

  virtual absl::StatusOr<MemoryInfo> GetMemoryInfo() const = 0;

  // Blocks until all work queued on this device has finished (CPU ops are
  // synchronous, so this returns immediately there).
  virtual absl::Status Synchronize() = 0;

  // True when device memory is directly addressable by host code (CPU).
  virtual bool host_accessible() const = 0;

  // The optimized kernels of this device. Entries left null fall back to the
  // reference ("native") kernels, which require host_accessible() memory.
  virtual const OpTable& ops() const = 0;

  // Host thread pool used by this device's kernels; nullptr for devices whose
  // kernels do not run on host threads. Owned by the device.
  virtual ThreadPool* thread_pool() const { return nullptr; }

  // True when this device's BF16 products (BF16 Linear weights,
  // AttentionParams::bf16_products) run faster than F32 ones: the CPU's
  // vdpbf16ps (AVX512_BF16, and in use: --bf16-gemm). `dtype=auto` picks
  // bfloat16 for encoders where this holds.
  virtual bool fast_bf16_products() const { return false; }
};

// Move-only owner of one Allocate()d block.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Allocates `bytes` on `device` (which must outlive the buffer).
  static absl::StatusOr<DeviceBuffer> Create(Device* device, size_t bytes,
                                             size_t alignment = 64);
  // Zero-filled, lazily committed memory (Device::AllocateZeroed).
  static absl::StatusOr<DeviceBuffer> CreateZeroed(Device* device,
                                                   size_t bytes,
                                                   size_t alignment = 64);
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  Device* device() const { return device_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }

 private:
  // Takes ownership of `data` (from `device`).
  static DeviceBuffer Own(Device* device, void* data, size_t bytes);

  Device* device_ = nullptr;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// The registry value of kind "device": builds an instance of the backend.
using DeviceFactory = std::function<absl::StatusOr<std::unique_ptr<Device>>(
    const DeviceOptions& options)>;

// The device kind's registry (name -> factory).
Registry<DeviceFactory>& Devices();

// Registers the built-in devices ("cpu"); a new backend adds one line in
// device_registry.cc. Called once at start-up (RegisterBuiltins, or a tool's
// main); idempotent.
void RegisterDeviceBuiltins();

// Builds devices from their factories (Devices()) and caches one shared
// instance per name.
class DeviceRegistry {
 public:
  using Factory = DeviceFactory;

  // Registers `factory` under `name`. ALREADY_EXISTS if taken;
  // INVALID_ARGUMENT for a null factory.
  static absl::Status Register(absl::string_view name, Factory factory,
                               std::string description = "",
                               std::string origin = "builtin");

  // The shared instance for `name`, created with default options on first
  // use. The registry owns it; it lives until process exit. NOT_FOUND for an
  // unknown name.
  static absl::StatusOr<Device*> Get(absl::string_view name);

  // Creates the shared instance with `options` (e.g. a thread count from a
  // flag). FAILED_PRECONDITION if the instance already exists.
  static absl::StatusOr<Device*> Init(absl::string_view name,
                                      const DeviceOptions& options);

  // Creates a new, caller-owned instance (tests, per-model pools).
  static absl::StatusOr<std::unique_ptr<Device>> Create(
      absl::string_view name, const DeviceOptions& options);

  // Registered names, sorted.
  static std::vector<std::string> Names();
};

}  // namespace inferd

#endif  // INFERD_DEVICE_DEVICE_H_
