// AdmissionFront: the front every engine executor shares. Bounded admission
// (RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE once stopping), a
// pool of prep workers that run the input processor off the callers'
// threads, and the cancel / deadline checks before and after preparation, so
// a dropped request costs no tokenization and never reaches the scheduler.
// The executor supplies the stages (what preparing, handing off and
// answering mean for its requests). Thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_ADMISSION_FRONT_H_
#define INFERD_RUNTIME_ENGINE_ADMISSION_FRONT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace inferd {

template <typename Item>
class AdmissionFront {
 public:
  struct Stages {
    // Prepares `item` (tokenization, template, compiled grammar). An error
    // is the item's final answer (through `answer`).
    std::function<absl::Status(Item&)> prepare;
    // OK, or why the item must not go on (CANCELLED, DEADLINE_EXCEEDED).
    std::function<absl::Status(const Item&)> dropped;
    // Moves a prepared item downstream (the scheduler, the loop's inbox).
    // Runs under the front's lock, in the same step that takes the item off
    // the front's count, so admission never sees a request in neither
    // place. On error the item is left as it was and answered.
    std::function<absl::Status(Item&)> hand_off;
    // The final answer of an item that does not go downstream (shutdown,
    // dropped, refused by prepare or hand_off).
    std::function<void(Item&, const absl::Status&)> answer;
    // Requests admitted and waiting downstream; called under the front's
    // lock (the downstream's own locks nest inside it).
    std::function<int64_t()> downstream_waiting;
  };

  // `prep_threads` = 0 prepares on the submitting thread (errors then
  // return from Submit).
  AdmissionFront(int max_queue_requests, int prep_threads, Stages stages)
      : max_queue_(max_queue_requests),
        prep_threads_(prep_threads),
        stages_(std::move(stages)) {}
  ~AdmissionFront() { Stop(); }
  AdmissionFront(const AdmissionFront&) = delete;
  AdmissionFront& operator=(const AdmissionFront&) = delete;

  // Starts the prep workers (once the stages' owner is fully built).
  void Start() {
    for (int i = 0; i < prep_threads_; ++i) {
      workers_.emplace_back([this] { WorkerLoop(); });
    }
  }

  // Admits `item`, or says why not (then `answer` is never called for it).
  // Once admitted, the item reaches `hand_off` or `answer` exactly once.
  absl::Status Submit(Item item) {
    if (prep_threads_ == 0) {
      if (absl::Status s = stages_.prepare(item); !s.ok()) return s;
      absl::MutexLock lock(&mu_);
      if (absl::Status s = CheckRoom(); !s.ok()) return s;
      return stages_.hand_off(item);
    }
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckRoom(); !s.ok()) return s;
    ++in_prep_;
    queue_.push_back(std::move(item));
    return absl::OkStatus();
  }

  // Refuses new requests; the workers answer what they have not started
  // (UNAVAILABLE) and hand the ones they are preparing downstream, which
  // must still be running; returns when they have exited.
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ && workers_.empty()) return;
      stopping_ = true;
    }
    for (std::thread& t : workers_) {
      if (t.joinable()) t.join();
    }
    workers_.clear();
  }

  // Admitted requests not yet handed off (queued or being prepared).
  int64_t in_prep() const {
    absl::MutexLock lock(&mu_);
    return in_prep_;
  }

 private:
  absl::Status CheckRoom() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stopping_) return absl::UnavailableError("the model is shutting down");
    const int64_t waiting = in_prep_ + stages_.downstream_waiting();
    if (waiting >= max_queue_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the model's queue is full (", waiting,
          " requests waiting, --max-queue-requests=", max_queue_,
          "); retry later"));
    }
    return absl::OkStatus();
  }

  void Leave(Item& item, const absl::Status& why) {
    {
      absl::MutexLock lock(&mu_);
      --in_prep_;
    }
    stages_.answer(item, why);
  }

  void WorkerLoop() {
    while (true) {
      bool stopping = false;
      Item item;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](AdmissionFront* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(f->mu_) {
              return f->stopping_ || !f->queue_.empty();
            },
            this));
        if (queue_.empty()) return;  // stopping, nothing left
        item = std::move(queue_.front());
        queue_.pop_front();
        stopping = stopping_;
      }
      if (stopping) {
        Leave(item, absl::UnavailableError("the model is shutting down"));
        continue;
      }
      Prepare(item);
    }
  }

  void Prepare(Item& item) {
    // Cancelled or expired while queued: no preparation either.
    if (absl::Status s = stages_.dropped(item); !s.ok()) {
      Leave(item, s);
      return;
    }
    if (absl::Status s = stages_.prepare(item); !s.ok()) {
      Leave(item, s);
      return;
    }
    // Cancelled while being prepared: it never reaches the scheduler.
    if (absl::Status s = stages_.dropped(item); !s.ok()) {
      Leave(item, s);
      return;
    }
    absl::Status handed;
    {
      absl::MutexLock lock(&mu_);
      --in_prep_;
      handed = stages_.hand_off(item);
    }
    if (!handed.ok()) stages_.answer(item, handed);
  }

  const int64_t max_queue_;
  const int prep_threads_;
  const Stages stages_;
  mutable absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  int64_t in_prep_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_ADMISSION_FRONT_H_
