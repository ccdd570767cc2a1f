// PrefillOnlyScheduler: the queue and batch packer of prefill-only
// workflows (embed, rerank, classify). Requests are independent and need no
// KV cache, so a batch is simply the next sequences in arrival order up to a
// token budget and a sequence cap; there is no preemption. Aborted or
// expired requests are dropped here, before they cost compute.
// Thread-safe: Submit from any thread, NextBatch from the replica loops.
#ifndef INFERD_RUNTIME_ENGINE_PREFILL_SCHEDULER_H_
#define INFERD_RUNTIME_ENGINE_PREFILL_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/engine/engine.h"
#include "runtime/model/batch_plan.h"

namespace inferd {

// One tokenized input of a prefill request.
struct PrefillSequence {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;  // empty = all 0
  // First token that takes part in pooling (prompt tokens excluded when the
  // model's pooling has include_prompt = false).
  int32_t pool_start = 0;
};

// A request as the scheduler sees it. `done` is called exactly once, with
// the per-sequence results in input order or the first error any part of
// the request met: by the replica loop that finishes its last dispatched
// sequence, or by the scheduler when it drops the part not yet dispatched
// (cancel, deadline, Close) and nothing of the request is still running.
struct PrefillWork {
  std::vector<PrefillSequence> seqs;
  StepOutput output = StepOutput::kHiddenStates;
  std::shared_ptr<RequestHandle> handle;
  absl::Time arrival;
  absl::Time deadline = absl::InfiniteFuture();
  absl::Time first_scheduled = absl::InfiniteFuture();
  std::function<void(absl::StatusOr<std::vector<SequenceResult>>)> done;

  // Progress, owned by the scheduler and the replica loops.
  absl::Mutex mu;
  size_t next_seq = 0;  // first sequence not yet dispatched (scheduler)
  size_t finished_seqs ABSL_GUARDED_BY(mu) = 0;
  absl::Status error ABSL_GUARDED_BY(mu);  // the first failure
  std::vector<SequenceResult> results ABSL_GUARDED_BY(mu);

  int64_t num_tokens() const;
  // Tokens of the sequences from `first` on.
  int64_t tokens_from(size_t first) const;

  // Accounts for `n` sequences that ended, with `status` (OK: their results
  // are already in `results`). When that completes the request, calls
  // `done` (outside `mu`) and returns true.
  bool FinishSeqs(size_t n, const absl::Status& status);
};

struct PrefillBatchItem {
  std::shared_ptr<PrefillWork> work;
  size_t seq_index = 0;
};

struct PrefillSchedulerOptions {
  int64_t max_batched_tokens = 2048;
  int max_seqs = 64;
  int max_queue_requests = 1024;
  int64_t max_queue_tokens = 1 << 20;
};

// The scheduler interface of prefill-only executors (registry kind
// "scheduler", value PrefillSchedulerFactory). Thread-safe.
class PrefillScheduler {
 public:
  virtual ~PrefillScheduler() = default;

  // Queues `work`. RESOURCE_EXHAUSTED (naming the limit) when the queue is
  // full; UNAVAILABLE once closed. Never calls work->done inside.
  virtual absl::Status Submit(std::shared_ptr<PrefillWork> work) = 0;

  // Blocks until there is work (or Close) and returns the next batch.
  // Requests it drops (aborted: CANCELLED, past deadline:
  // DEADLINE_EXCEEDED) are answered through PrefillWork::FinishSeqs before
  // it returns. Empty only once closed.
  virtual std::vector<PrefillBatchItem> NextBatch() = 0;

  // Wakes every waiter; queued requests are answered UNAVAILABLE (a request
  // partly dispatched is answered by the loop finishing its last running
  // sequence).
  virtual void Close() = 0;

  virtual int64_t waiting_requests() const = 0;
  virtual int64_t waiting_tokens() const = 0;
};

// "prefill_only": first come, first served.
class PrefillOnlyScheduler : public PrefillScheduler {
 public:
  explicit PrefillOnlyScheduler(PrefillSchedulerOptions options);

  // RESOURCE_EXHAUSTED (naming the limit) when the queue holds
  // max_queue_requests requests or max_queue_tokens tokens already.
  absl::Status Submit(std::shared_ptr<PrefillWork> work) override;

  // Whole sequences in arrival order while they fit the token budget and
  // the sequence cap (a single sequence longer than the budget runs alone).
  std::vector<PrefillBatchItem> NextBatch() override;

  void Close() override;

  int64_t waiting_requests() const override;
  int64_t waiting_tokens() const override;

 private:
  const PrefillSchedulerOptions options_;
  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<PrefillWork>> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_PREFILL_SCHEDULER_H_
