// The outbox of a call: its answers, in order, from the threads that make
// them (engine threads) to the transport, which takes one write at a time;
// then the call's end status. Both front ends use it:
// - push mode (gRPC reactors): SetWriter names the transport's write and
//   finish; the outbox starts the next write when none is in flight and the
//   reactor reports WriteDone; once the end is set and every answer before
//   it was written, finish runs once.
// - pull mode (an HTTP worker thread that writes the response body): Pull
//   waits for the next answer or the end.
// Cancel (a client that left or cancelled, a failed write) runs the cancel
// callback once (aborting the engine request), drops what is queued and
// ends the call.
//
// Thread-safe. In push mode the write and finish callbacks run under the
// outbox's mutex: they must not call back into the outbox (gRPC's StartWrite
// and Finish do not: inferd's reactors are not inlineable). A reactor may
// call the outbox while holding its own mutex (lock order: the reactor's,
// then the outbox's).
#ifndef INFERD_SERVICE_REQUEST_OUTBOX_H_
#define INFERD_SERVICE_REQUEST_OUTBOX_H_

#include <deque>
#include <functional>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace inferd {

template <typename T>
class Outbox {
 public:
  using Write = std::function<void(const T&)>;
  using Finish = std::function<void(const absl::Status&)>;

  // Push mode: the transport's write (one in flight until WriteDone) and
  // finish (once, with the end status).
  void SetWriter(Write write, Finish finish) {
    absl::MutexLock lock(&mu_);
    write_ = std::move(write);
    finish_ = std::move(finish);
    PumpLocked();
  }
  // Runs once, on the first Cancel or failed write (at once if that came
  // first).
  void SetCancel(std::function<void()> cancel) {
    std::function<void()> run_now;
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) {
        run_now = std::move(cancel);
      } else {
        cancel_ = std::move(cancel);
      }
    }
    if (run_now) run_now();
  }

  // Queues an answer; dropped once the call has ended.
  void Push(T item) {
    absl::MutexLock lock(&mu_);
    if (end_.has_value()) return;
    queue_.push_back(std::move(item));
    PumpLocked();
  }
  // The call ends with `status` after what is queued (`abandon`: what is not
  // being written yet is dropped). The first end wins.
  void End(const absl::Status& status, bool abandon = false) {
    absl::MutexLock lock(&mu_);
    EndLocked(status, abandon);
  }
  // Ends the call now with `why`: the cancel callback runs (once) and what
  // is queued is dropped.
  void Cancel(const absl::Status& why) {
    std::function<void()> cancel;
    {
      absl::MutexLock lock(&mu_);
      cancel = CancelLocked(why);
    }
    if (cancel) cancel();
  }

  // Push mode: the write in flight is done (`ok` false: the client is gone).
  void WriteDone(bool ok) {
    std::function<void()> cancel;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!queue_.empty()) queue_.pop_front();
      if (!ok) {
        cancel = CancelLocked(absl::CancelledError("the stream was closed"));
      } else {
        PumpLocked();
      }
    }
    if (cancel) cancel();
  }

  // Pull mode: the next answer, or the end status once everything before it
  // was pulled; nothing when `timeout` passed first.
  struct Next {
    std::optional<T> item;
    std::optional<absl::Status> end;
  };
  Next Pull(absl::Duration timeout = absl::InfiniteDuration()) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return !queue_.empty() || end_.has_value();
    };
    if (timeout == absl::InfiniteDuration()) {
      mu_.Await(absl::Condition(&ready));
    } else if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) {
      return {};
    }
    Next next;
    if (!queue_.empty()) {
      next.item = std::move(queue_.front());
      queue_.pop_front();
    } else {
      next.end = *end_;
    }
    return next;
  }

  // Orders the caller after every section under the outbox's mutex (a
  // reactor's OnDone, before it deletes itself: see AwaitReactions in
  // reactor_link.h).
  void AwaitCallbacks() const {
    mu_.Lock();
    mu_.Unlock();
  }

  // Answers queued and not written (or pulled) yet.
  size_t queued() const {
    absl::MutexLock lock(&mu_);
    return queue_.size();
  }
  bool ended() const {
    absl::MutexLock lock(&mu_);
    return end_.has_value();
  }

 private:
  // Marks the call cancelled and ends it with `why` (dropping what is
  // queued); the cancel callback to run outside the mutex, once.
  std::function<void()> CancelLocked(const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    cancelled_ = true;
    std::function<void()> cancel = std::move(cancel_);
    cancel_ = nullptr;
    EndLocked(why, /*abandon=*/true);
    return cancel;
  }

  void EndLocked(const absl::Status& status, bool abandon)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!end_.has_value()) end_ = status;
    if (abandon) {
      // The front answer stays while its write is in flight.
      while (queue_.size() > (writing_ ? 1u : 0u)) queue_.pop_back();
    }
    PumpLocked();
  }

  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!write_ || writing_ || finished_) return;
    if (!queue_.empty()) {
      writing_ = true;
      write_(queue_.front());
      return;
    }
    if (end_.has_value()) {
      finished_ = true;
      finish_(*end_);
    }
  }

  mutable absl::Mutex mu_;
  std::deque<T> queue_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> end_ ABSL_GUARDED_BY(mu_);
  Write write_ ABSL_GUARDED_BY(mu_);
  Finish finish_ ABSL_GUARDED_BY(mu_);
  std::function<void()> cancel_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace inferd

#endif  // INFERD_SERVICE_REQUEST_OUTBOX_H_
