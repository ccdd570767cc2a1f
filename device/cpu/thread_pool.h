// ThreadPool: a fixed pool of worker threads for data-parallel host kernels.
// Thread-safe: ParallelFor may be called from any thread; concurrent callers
// take turns, and a ParallelFor issued from inside a running ParallelFor body
// runs inline on the calling thread (no deadlock, no oversubscription).
#ifndef INFERD_DEVICE_CPU_THREAD_POOL_H_
#define INFERD_DEVICE_CPU_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace inferd {

// Function-pointer callback for ParallelForRaw.
using RangeFn = void (*)(void* arg, int64_t begin, int64_t end);

class ThreadPool {
 public:
  // A pool running work on `num_threads` threads in total: the caller of
  // ParallelFor plus num_threads - 1 workers. num_threads <= 0 = one per
  // online core.
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

 private:

  void WorkerLoop(int worker_index);
  // Runs task chunks until none are left.
  void RunChunks();

  const int num_threads_;
  std::vector<std::thread> workers_;

  std::mutex submit_mu_;  // serializes ParallelFor callers

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  bool stop_ = false;        // guarded by mu_

  // Current job (valid while a job runs).
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  std::atomic<int64_t> next_{0};
  std::atomic<int> pending_workers_{0};
  std::atomic<uint64_t> published_generation_{0};
};

// ParallelFor without std::function, for ISA-specific translation units
// (which must not instantiate shared inline templates); pool == nullptr runs
// fn(arg, 0, n) on the caller.
void ParallelForRaw(ThreadPool* pool, int64_t n, int64_t min_chunk, RangeFn fn,
                    void* arg);

}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_THREAD_POOL_H_
