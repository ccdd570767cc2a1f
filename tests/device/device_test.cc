// Device registry, CPU device memory/meminfo, thread pool, ISA cap.
#include <atomic>
#include <chrono>
#include <thread>
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
  ASSERT_TRUE(DeviceRegistry::Register("fake", [](const DeviceOptions& o) {
                return DeviceRegistry::Create("cpu", o);
              }).ok());
  EXPECT_EQ(DeviceRegistry::Register("fake", nullptr).code(), absl::StatusCode::kAlreadyExists);
  auto names = DeviceRegistry::Names();
  EXPECT_NE(std::find(names.begin(), names.end(), "fake"), names.end());
  EXPECT_TRUE(DeviceRegistry::Get("fake").ok());
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

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 1000, 100003}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n;
    }
  }
}

// Jobs separated by pauses long enough for the workers to fall asleep, and
// jobs issued back to back while they still spin: every job must see each
// index once (no job lost to a missed wakeup, no chunk run twice).
TEST(ThreadPoolTest, JobsAfterIdlePausesAndBackToBackComplete) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 200; ++rep) {
    const int64_t n = 1 + rep % 37;
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << rep;
    if (rep % 20 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

TEST(ThreadPoolTest, NestedAndConcurrentCallsComplete) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  auto job = [&] {
    for (int rep = 0; rep < 50; ++rep) {
      pool.ParallelFor(10, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          pool.ParallelFor(5, [&](int64_t b2, int64_t e2) { total.fetch_add(e2 - b2); });
        }
      });
    }
  };
  std::thread t1(job), t2(job);
  t1.join();
  t2.join();
  EXPECT_EQ(total.load(), 2 * 50 * 10 * 5);
}

TEST(CpuFeaturesTest, CapLimitsActiveIsa) {
  const CpuIsa saved = CpuIsaCap();
  SetCpuIsaCap(CpuIsa::kScalar);
  EXPECT_EQ(ActiveCpuIsa(), CpuIsa::kScalar);
  SetCpuIsaCap(CpuIsa::kAvx512Bf16);
  EXPECT_EQ(ActiveCpuIsa(), DetectedCpuIsa());
  SetCpuIsaCap(saved);
}

}  // namespace
}  // namespace inferd
