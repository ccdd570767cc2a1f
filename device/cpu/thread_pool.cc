#include "device/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define INFERD_CPU_RELAX() _mm_pause()
#else
#define INFERD_CPU_RELAX() \
  do {                     \
  } while (0)
#endif

#include "device/cpu/host_resources.h"

namespace inferd {
namespace {

// True on a thread currently executing ParallelFor work (worker or caller);
// nested ParallelFor calls then run inline.
thread_local bool in_parallel_region = false;

// Idle workers spin this long before sleeping: kernels of one step are issued
// back to back, so a short spin skips a futex round trip, while a long one
// would steal the core from other threads when the machine is busy.
constexpr std::chrono::microseconds kWorkerSpin{60};
// A caller waiting for chunks other threads are running.
constexpr std::chrono::microseconds kCallerSpin{200};

constexpr uint64_t kChunkMask = (uint64_t{1} << 32) - 1;
// Chunk index meaning "job being set up": nothing can be claimed.
constexpr uint64_t kBusy = kChunkMask;

// Calls done() until it returns true or `budget` has passed; false on
// timeout.
template <typename Done>
bool SpinUntil(Done done, std::chrono::microseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      INFERD_CPU_RELAX();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

void CallStdFunction(void* arg, int64_t begin, int64_t end) {
  (*static_cast<const std::function<void(int64_t, int64_t)>*>(arg))(begin, end);
}

}  // namespace

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads > 0
                       ? num_threads
                       : UsableCpus()) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 0; i < num_threads_ - 1; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    stopping_.store(true, std::memory_order_seq_cst);
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

bool ThreadPool::WaitForJob(uint64_t seen) {
  auto changed = [&] {
    return (state_.load(std::memory_order_acquire) >> kChunkBits) != seen ||
           stopping_.load(std::memory_order_relaxed);
  };
  if (!SpinUntil(changed, kWorkerSpin)) {
    std::unique_lock<std::mutex> lock(mu_);
    sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
    while (!stop_ &&
           (state_.load(std::memory_order_seq_cst) >> kChunkBits) == seen) {
      work_cv_.wait(lock);
    }
    sleeping_workers_.fetch_sub(1, std::memory_order_relaxed);
  }
  return !stopping_.load(std::memory_order_acquire);
}

void ThreadPool::WorkerLoop() {
  in_parallel_region = true;
  uint64_t seen = 0;
  while (WaitForJob(seen)) {
    seen = state_.load(std::memory_order_acquire) >> kChunkBits;
    RunChunks(seen);
  }
}

void ThreadPool::RunChunks(uint64_t gen) {
  uint64_t s = state_.load(std::memory_order_acquire);
  while (true) {
    if ((s >> kChunkBits) != gen) return;
    const uint64_t index = s & kChunkMask;
    if (index == kBusy) {  // the submitter is about to open this job
      INFERD_CPU_RELAX();
      s = state_.load(std::memory_order_acquire);
      continue;
    }
    // Read before claiming; a successful claim of (gen, index) proves these
    // belong to job `gen` (the next job's fields are written only after its
    // generation is published as busy).
    const int64_t num_chunks = num_chunks_.load(std::memory_order_acquire);
    if (static_cast<int64_t>(index) >= num_chunks) return;
    const RangeFn fn = fn_.load(std::memory_order_acquire);
    void* const arg = arg_.load(std::memory_order_acquire);
    const int64_t n = n_.load(std::memory_order_acquire);
    const int64_t chunk = chunk_.load(std::memory_order_acquire);
    if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      continue;  // s reloaded
    }
    const int64_t begin = static_cast<int64_t>(index) * chunk;
    fn(arg, begin, std::min(n, begin + chunk));
    const int64_t done = done_.fetch_add(1, std::memory_order_seq_cst) + 1;
    if (done == num_chunks &&
        caller_sleeping_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_all();
    }
    s = state_.load(std::memory_order_acquire);
  }
}

void ThreadPool::ParallelForRaw(int64_t n, int64_t min_chunk, RangeFn fn,
                                void* arg) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  if (workers_.empty() || in_parallel_region || n <= min_chunk) {
    fn(arg, 0, n);
    return;
  }
  std::lock_guard<std::mutex> submit_lock(submit_mu_);
  in_parallel_region = true;
  int64_t chunk =
      std::max(min_chunk, (n + 4 * num_threads_ - 1) / (4 * num_threads_));
  chunk = std::max(chunk, (n + (int64_t{1} << 30) - 1) >> 30);  // index fits
  const int64_t num_chunks = (n + chunk - 1) / chunk;

  const uint64_t gen =
      ((state_.load(std::memory_order_relaxed) >> kChunkBits) + 1) & kChunkMask;
  state_.store(gen << kChunkBits | kBusy, std::memory_order_seq_cst);
  fn_.store(fn, std::memory_order_release);
  arg_.store(arg, std::memory_order_release);
  n_.store(n, std::memory_order_release);
  chunk_.store(chunk, std::memory_order_release);
  num_chunks_.store(num_chunks, std::memory_order_release);
  done_.store(0, std::memory_order_relaxed);
  state_.store(gen << kChunkBits, std::memory_order_seq_cst);

  // Wake sleepers only when there is work for them.
  const int sleeping = sleeping_workers_.load(std::memory_order_seq_cst);
  if (sleeping > 0) {
    const int64_t wanted = std::min<int64_t>(num_chunks - 1, sleeping);
    std::lock_guard<std::mutex> lock(mu_);  // orders with the sleeper's check
    if (wanted >= sleeping) {
      work_cv_.notify_all();
    } else {
      for (int64_t i = 0; i < wanted; ++i) work_cv_.notify_one();
    }
  }

  RunChunks(gen);
  // Only chunks already claimed by running workers remain.
  auto finished = [&] {
    return done_.load(std::memory_order_acquire) == num_chunks;
  };
  if (!SpinUntil(finished, kCallerSpin)) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_sleeping_.store(true, std::memory_order_seq_cst);
    while (done_.load(std::memory_order_seq_cst) != num_chunks) {
      done_cv_.wait(lock);
    }
    caller_sleeping_.store(false, std::memory_order_relaxed);
  }
  in_parallel_region = false;
}

void ThreadPool::ParallelFor(int64_t n,
                             const std::function<void(int64_t, int64_t)>& fn,
                             int64_t min_chunk) {
  ParallelForRaw(n, min_chunk, &CallStdFunction,
                 const_cast<std::function<void(int64_t, int64_t)>*>(&fn));
}

void ParallelForRaw(ThreadPool* pool, int64_t n, int64_t min_chunk, RangeFn fn,
                    void* arg) {
  if (n <= 0) return;
  if (pool == nullptr) {
    fn(arg, 0, n);
    return;
  }
  pool->ParallelForRaw(n, min_chunk, fn, arg);
}

}  // namespace inferd
