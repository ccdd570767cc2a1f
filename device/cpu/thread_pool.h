// ThreadPool: a fixed pool of worker threads for data-parallel host kernels.
// Thread-safe: ParallelFor may be called from any thread; concurrent callers
// take turns, and a ParallelFor issued from inside a running ParallelFor body
// runs inline on the calling thread (no deadlock, no oversubscription).
//
// Scheduling: a job is split into chunks claimed dynamically by the caller
// and the workers; the caller waits only for chunks that were claimed, never
// for a worker that has not woken up yet (a descheduled worker costs nothing
// when the machine is oversubscribed: the caller runs its share). Idle
// workers spin for a bounded time (kernels are issued back to back within a
// step), then sleep on a condition variable and are woken only when a job
// has chunks for them.
#ifndef INFERD_DEVICE_CPU_THREAD_POOL_H_
#define INFERD_DEVICE_CPU_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace inferd {

// Function-pointer callback for ParallelForRaw.
using RangeFn = void (*)(void* arg, int64_t begin, int64_t end);

class ThreadPool {
 public:
  // A pool running work on `num_threads` threads in total: the caller of
  // ParallelFor plus num_threads - 1 workers. num_threads <= 0 = one per
  // CPU this process may use (UsableCpus(): affinity mask and cgroup quota).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Splits [0, n) into contiguous chunks of at least `min_chunk` items and
  // calls fn(begin, end) on them from up to num_threads() threads (chunks are
  // handed out dynamically, a few per thread, to balance uneven work);
  // returns when all calls are done. fn must not throw.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                   int64_t min_chunk = 1);

  // As ParallelFor, without std::function.
  void ParallelForRaw(int64_t n, int64_t min_chunk, RangeFn fn, void* arg);

 private:
  // The job's state word: generation << 32 | next unclaimed chunk.
  static constexpr int kChunkBits = 32;

  void WorkerLoop();
  // Claims and runs chunks of job `gen` until none are left (or the job
  // changed).
  void RunChunks(uint64_t gen);
  // Waits (spin, then sleep) for a generation other than `seen`; false on
  // shutdown.
  bool WaitForJob(uint64_t seen);

  const int num_threads_;
  std::vector<std::thread> workers_;

  std::mutex submit_mu_;  // serializes ParallelFor callers

  // The current job, written by the submitting thread before it publishes
  // the generation in state_ (relaxed fields, ordered by state_).
  std::atomic<RangeFn> fn_{nullptr};
  std::atomic<void*> arg_{nullptr};
  std::atomic<int64_t> n_{0};
  std::atomic<int64_t> chunk_{1};
  std::atomic<int64_t> num_chunks_{0};
  std::atomic<uint64_t> state_{0};
  // Chunks of the current job finished.
  std::atomic<int64_t> done_{0};

  // Sleeping: workers waiting for a job, a caller waiting for the last chunk.
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> stopping_{false};
};

// ParallelFor without std::function, for ISA-specific translation units
// (which must not instantiate shared inline templates); pool == nullptr runs
// fn(arg, 0, n) on the caller.
void ParallelForRaw(ThreadPool* pool, int64_t n, int64_t min_chunk, RangeFn fn,
                    void* arg);

}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_THREAD_POOL_H_
