#include "device/cpu/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define INFERD_CPU_RELAX() _mm_pause()
#else
#define INFERD_CPU_RELAX() \
  do {                     \
  } while (0)
#endif

namespace inferd {
namespace {

// True on a thread currently executing ParallelFor work (worker or caller);
// nested ParallelFor calls then run inline.
thread_local bool in_parallel_region = false;

// Busy-wait iterations before sleeping: kernels are issued back to back
// (one per layer), so workers that spin a little skip a futex round trip.
constexpr int kSpinIterations = 20000;

}  // namespace

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads > 0
                       ? num_threads
                       : std::max(1u, std::thread::hardware_concurrency())) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 0; i < num_threads_ - 1; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    published_generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunChunks() {
  const std::function<void(int64_t, int64_t)>& fn = *fn_;
  while (true) {
    const int64_t begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (begin >= n_) break;
    fn(begin, std::min(n_, begin + chunk_));
  }
}

void ThreadPool::WorkerLoop(int worker_index) {
  in_parallel_region = true;
  uint64_t seen = 0;
  while (true) {
    // Wait for a new job: spin first, then sleep.
    bool ready = false;
    for (int i = 0; i < kSpinIterations; ++i) {
      if (published_generation_.load(std::memory_order_acquire) != seen) {
        ready = true;
        break;
      }
      INFERD_CPU_RELAX();
    }
    if (!ready) {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] {
        return published_generation_.load(std::memory_order_acquire) != seen;
      });
    }
    seen = published_generation_.load(std::memory_order_acquire);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    RunChunks();
    if (pending_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n,
                             const std::function<void(int64_t, int64_t)>& fn,
                             int64_t min_chunk) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  if (workers_.empty() || in_parallel_region || n <= min_chunk) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> submit_lock(submit_mu_);
  in_parallel_region = true;
  fn_ = &fn;
  n_ = n;
  chunk_ = std::max(min_chunk, (n + 4 * num_threads_ - 1) / (4 * num_threads_));
  next_.store(0, std::memory_order_relaxed);
  pending_workers_.store(static_cast<int>(workers_.size()),
                         std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    published_generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  RunChunks();
  // Wait for the workers to finish their chunks.
  bool done = false;
  for (int i = 0; i < kSpinIterations; ++i) {
    if (pending_workers_.load(std::memory_order_acquire) == 0) {
      done = true;
      break;
    }
    INFERD_CPU_RELAX();
  }
  if (!done) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] {
      return pending_workers_.load(std::memory_order_acquire) == 0;
    });
  }
  fn_ = nullptr;
  in_parallel_region = false;
}

void ParallelForRaw(ThreadPool* pool, int64_t n, int64_t min_chunk, RangeFn fn,
                    void* arg) {
  if (n <= 0) return;
  if (pool == nullptr) {
    fn(arg, 0, n);
    return;
  }
  pool->ParallelFor(
      n, [fn, arg](int64_t begin, int64_t end) { fn(arg, begin, end); },
      min_chunk);
}

}  // namespace inferd
