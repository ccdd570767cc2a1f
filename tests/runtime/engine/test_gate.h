// Gate: holds the threads that enter it until released, and tells a test how
// many have entered (synchronization without sleeps). Shared by the engine
// tests. Thread-safe.
#ifndef INFERD_TESTS_RUNTIME_ENGINE_TEST_GATE_H_
#define INFERD_TESTS_RUNTIME_ENGINE_TEST_GATE_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace inferd {
namespace testing_internal {

class Gate {
 public:
  void Enter() {
    {
      absl::MutexLock lock(&mu_);
      ++entered_;
      cv_.SignalAll();
    }
    release_.WaitForNotification();
  }
  void WaitEntered(int n) {
    absl::MutexLock lock(&mu_);
    while (entered_ < n) cv_.Wait(&mu_);
  }
  void Notify() { release_.Notify(); }

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Notification release_;
};

}  // namespace testing_internal
}  // namespace inferd

#endif  // INFERD_TESTS_RUNTIME_ENGINE_TEST_GATE_H_
