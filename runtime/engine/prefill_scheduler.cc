#include "runtime/engine/prefill_scheduler.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace inferd {

int64_t PrefillWork::num_tokens() const {
  int64_t n = 0;
  for (const PrefillSequence& s : seqs) n += static_cast<int64_t>(s.ids.size());
  return n;
}

int64_t PrefillWork::tokens_from(size_t first) const {
  int64_t n = 0;
  for (size_t i = first; i < seqs.size(); ++i) {
    n += static_cast<int64_t>(seqs[i].ids.size());
  }
  return n;
}

bool PrefillWork::FinishSeqs(size_t n, const absl::Status& status) {
  absl::StatusOr<std::vector<SequenceResult>> out;
  {
    absl::MutexLock lock(&mu);
    if (!status.ok() && error.ok()) error = status;
    finished_seqs += n;
    if (finished_seqs < seqs.size()) return false;
    if (error.ok()) {
      out = std::move(results);
    } else {
      out = error;
    }
  }
  done(std::move(out));
  return true;
}

PrefillOnlyScheduler::PrefillOnlyScheduler(PrefillSchedulerOptions options)
    : options_(options) {}

absl::Status PrefillOnlyScheduler::Submit(std::shared_ptr<PrefillWork> work) {
  const int64_t tokens = work->num_tokens();
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("the model is shutting down");
  if (static_cast<int64_t>(queue_.size()) >= options_.max_queue_requests) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the model's queue is full (", queue_.size(),
        " requests waiting, --max-queue-requests=",
        options_.max_queue_requests, "); retry later"));
  }
  if (!queue_.empty() && queued_tokens_ + tokens > options_.max_queue_tokens) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the model's queue is full (", queued_tokens_,
        " tokens waiting, --max-queue-tokens=", options_.max_queue_tokens,
        "); retry later"));
  }
  queued_tokens_ += tokens;
  queue_.push_back(std::move(work));
  return absl::OkStatus();
}

std::vector<PrefillBatchItem> PrefillOnlyScheduler::NextBatch() {
  // Requests whose undispatched sequences were dropped: answered outside
  // the lock.
  struct Dropped {
    std::shared_ptr<PrefillWork> work;
    size_t count;
    absl::Status status;
  };
  std::vector<PrefillBatchItem> batch;
  std::vector<Dropped> dropped;
  // A pass that only dropped requests answers them and looks again: the
  // result is empty only once the scheduler is closed.
  while (batch.empty()) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](PrefillOnlyScheduler* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
            return s->closed_ || !s->queue_.empty();
          },
          this));
      if (closed_) return batch;
      const absl::Time now = absl::Now();
      int64_t tokens = 0;
      while (!queue_.empty() &&
             static_cast<int>(batch.size()) < options_.max_seqs) {
        std::shared_ptr<PrefillWork>& front = queue_.front();
        // A cancelled or expired request stops here, also when part of it
        // already ran: its remaining sequences cost no compute.
        absl::Status drop;
        if (front->handle->aborted()) {
          drop = absl::CancelledError("the request was cancelled");
        } else if (now > front->deadline) {
          drop = absl::DeadlineExceededError(
              front->next_seq == 0
                  ? "the deadline passed while the request was queued"
                  : "the deadline passed before every input was processed");
        }
        if (!drop.ok()) {
          queued_tokens_ -= front->tokens_from(front->next_seq);
          const size_t left = front->seqs.size() - front->next_seq;
          dropped.push_back({std::move(front), left, drop});
          queue_.pop_front();
          continue;
        }
        if (front->next_seq == 0) front->first_scheduled = now;
        const int64_t len =
            static_cast<int64_t>(front->seqs[front->next_seq].ids.size());
        if (!batch.empty() && tokens + len > options_.max_batched_tokens) break;
        tokens += len;
        queued_tokens_ -= len;
        batch.push_back({front, front->next_seq});
        if (++front->next_seq == front->seqs.size()) queue_.pop_front();
      }
    }
    for (Dropped& d : dropped) d.work->FinishSeqs(d.count, d.status);
    dropped.clear();
  }
  return batch;
}

void PrefillOnlyScheduler::Close() {
  std::deque<std::shared_ptr<PrefillWork>> pending;
  std::vector<size_t> undispatched;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    pending.swap(queue_);
    queued_tokens_ = 0;
    for (const auto& work : pending) {
      undispatched.push_back(work->seqs.size() - work->next_seq);
    }
  }
  // A request partly running is answered by the loop that finishes its last
  // running sequence (with this error); the others are answered here.
  for (size_t i = 0; i < pending.size(); ++i) {
    pending[i]->FinishSeqs(undispatched[i],
                           absl::UnavailableError("the model is shutting down"));
  }
}

int64_t PrefillOnlyScheduler::waiting_requests() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(queue_.size());
}

int64_t PrefillOnlyScheduler::waiting_tokens() const {
  absl::MutexLock lock(&mu_);
  return queued_tokens_;
}

}  // namespace inferd
