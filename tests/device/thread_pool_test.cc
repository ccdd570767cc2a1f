// ThreadPool: every index covered once, jobs after idle pauses and back to
// back, nested and concurrent callers. Also built into the TSan tier
// (tests/tsan), which runs it against an instrumented thread_pool.cc.
#include "device/cpu/thread_pool.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace inferd {
namespace {

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

// Plain (non-atomic) data handed over both ways: what the caller wrote
// before ParallelFor is what the workers read, and what they wrote is what
// the caller reads after it returns. Under the TSan tier a missing
// happens-before edge in the pool is reported as a race here.
TEST(ThreadPoolTest, PlainDataIsHandedOverBothWays) {
  ThreadPool pool(3);
  std::vector<int64_t> in(4096), out(4096);
  for (int rep = 0; rep < 50; ++rep) {
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int64_t>(i) * rep;
    pool.ParallelFor(static_cast<int64_t>(in.size()), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = in[i] * 2 + 1;
    }, 64);
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_EQ(out[i], static_cast<int64_t>(i) * rep * 2 + 1) << rep;
    }
    if (rep % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace
}  // namespace inferd
