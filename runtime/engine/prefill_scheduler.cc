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
  std::vector<PrefillBatchItem> batch;
  std::vector<std::pair<std::shared_ptr<PrefillWork>, absl::Status>> dropped;
  {
    absl::MutexLock lock(&mu_);
    while (batch.empty()) {
      mu_.Await(absl::Condition(
          +[](PrefillOnlyScheduler* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
            return s->closed_ || !s->queue_.empty();
          },
          this));
      if (closed_) break;
      const absl::Time now = absl::Now();
      int64_t tokens = 0;
      while (!queue_.empty() &&
             static_cast<int>(batch.size()) < options_.max_seqs) {
        std::shared_ptr<PrefillWork>& front = queue_.front();
        if (front->next_seq == 0) {
          absl::Status drop;
          if (front->handle->aborted()) {
            drop = absl::CancelledError("the request was cancelled");
          } else if (now > front->deadline) {
            drop = absl::DeadlineExceededError(
                "the deadline passed while the request was queued");
          }
          if (!drop.ok()) {
            queued_tokens_ -= front->num_tokens();
            dropped.emplace_back(std::move(front), drop);
            queue_.pop_front();
            continue;
          }
          front->first_scheduled = now;
        }
        const int64_t len =
            static_cast<int64_t>(front->seqs[front->next_seq].ids.size());
        if (!batch.empty() && tokens + len > options_.max_batched_tokens) break;
        tokens += len;
        queued_tokens_ -= len;
        batch.push_back({front, front->next_seq});
        if (++front->next_seq == front->seqs.size()) queue_.pop_front();
      }
      if (!dropped.empty()) break;  // answer them outside the lock first
    }
  }
  for (auto& [work, status] : dropped) work->done(status);
  return batch;
}

void PrefillOnlyScheduler::Close() {
  std::deque<std::shared_ptr<PrefillWork>> pending;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    pending.swap(queue_);
    queued_tokens_ = 0;
  }
  for (auto& work : pending) {
    // A request whose sequences are partly running is answered by the loop
    // that finishes them (it sees the failure flag).
    if (work->next_seq == 0) {
      work->done(absl::UnavailableError("the model is shutting down"));
    } else {
      absl::MutexLock lock(&work->mu);
      work->failed = true;
    }
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
