// Device registry, CPU device memory/meminfo, ISA cap (the thread pool:
// thread_pool_test.cc).
#include <fstream>
#include <string>
#include <vector>

#include "device/cpu/cpu_features.h"
#include "device/cpu/thread_pool.h"
#include "device/device.h"
#include "device/op_table.h"
#include "gtest/gtest.h"

namespace inferd {
namespace {

TEST(DeviceRegistryTest, CpuIsRegisteredAndShared) {
  auto a = DeviceRegistry::Get("cpu");
  auto b = DeviceRegistry::Get("cpu");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ((*a)->name(), "cpu");
  EXPECT_TRUE((*a)->host_accessible());
  EXPECT_NE((*a)->ops().linear, nullptr);
  EXPECT_EQ(DeviceRegistry::Get("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(DeviceRegistryTest, RegistersNewDeviceOnceByName) {
  DeviceFactory fake = [](const DeviceOptions& o) {
    return DeviceRegistry::Create("cpu", o);
  };
  ASSERT_TRUE(DeviceRegistry::Register("fake", fake, "a test", "device_test").ok());
  absl::Status again = DeviceRegistry::Register("fake", fake, "again", "second");
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(again.message().find("device_test"), std::string::npos) << again;
  EXPECT_EQ(DeviceRegistry::Register("empty", nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  auto names = DeviceRegistry::Names();
  EXPECT_NE(std::find(names.begin(), names.end(), "fake"), names.end());
  EXPECT_TRUE(DeviceRegistry::Get("fake").ok());
  // The device kind is one registry among the others, with its origins.
  bool listed = false;
  for (const RegistryListing& e : Devices().List()) {
    if (e.name == "cpu") {
      EXPECT_EQ(e.origin, "builtin");
    }
    if (e.name == "fake") {
      listed = true;
      EXPECT_EQ(e.kind, "device");
      EXPECT_EQ(e.origin, "device_test");
    }
  }
  EXPECT_TRUE(listed);
}

TEST(CpuDeviceTest, AllocatesAlignedMemoryAndReportsMemInfo) {
  auto dev = DeviceRegistry::Create("cpu", DeviceOptions{2});
  ASSERT_TRUE(dev.ok());
  auto buf = DeviceBuffer::Create(dev->get(), 1000, 256);
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % 256, 0u);
  static_cast<char*>(buf->data())[999] = 1;
  EXPECT_EQ((*dev)->Allocate(10, 3).status().code(), absl::StatusCode::kInvalidArgument);
  auto info = (*dev)->GetMemoryInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_GT(info->total_bytes, 0);
  EXPECT_GT(info->free_bytes, 0);
  EXPECT_LE(info->free_bytes, info->total_bytes);
  EXPECT_EQ((*dev)->thread_pool()->num_threads(), 2);
}

TEST(CpuFeaturesTest, CapLimitsActiveIsa) {
  const CpuIsa saved = CpuIsaCap();
  SetCpuIsaCap(CpuIsa::kScalar);
  EXPECT_EQ(ActiveCpuIsa(), CpuIsa::kScalar);
  SetCpuIsaCap(CpuIsa::kAvx512Bf16);
  EXPECT_EQ(ActiveCpuIsa(), DetectedCpuIsa());
  SetCpuIsaCap(saved);
}

// AMX detection against the kernel's own view of the CPU: /proc/cpuinfo's
// amx_tile, amx_bf16 and amx_int8 flags (Linux lists them only when the
// CPU has them and the kernel supports the tile state). Without them
// AmxUsable is false and says why; with them it is true (Linux 5.16+ grants
// the tile data permission to any process that asks).
TEST(CpuFeaturesTest, AmxUsableAgreesWithProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo to compare with";
  std::string line, flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      flags = " " + line.substr(line.find(':') + 1) + " ";
      break;
    }
  }
  ASSERT_FALSE(flags.empty()) << "no flags line in /proc/cpuinfo";
  const bool listed = flags.find(" amx_tile ") != std::string::npos &&
                      flags.find(" amx_bf16 ") != std::string::npos &&
                      flags.find(" amx_int8 ") != std::string::npos;
  std::string why;
  const bool usable = AmxUsable(&why);
  EXPECT_EQ(usable, listed) << "AmxUsable says: " << why;
  EXPECT_EQ(why.empty(), usable) << why;
  if (!usable) {
    EXPECT_NE(why.find("AMX"), std::string::npos) << why;
  }
}

}  // namespace
}  // namespace inferd
