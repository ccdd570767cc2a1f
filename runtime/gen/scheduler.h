// ContinuousBatchingScheduler: picks, once per engine step, which generation
// requests run and how many tokens each computes: a token budget and a
// sequence cap per step, decodes first (every running decode is scheduled
// every step, never behind a prompt), then chunked prefill of running and
// waiting requests, first come first served, within a smaller prefill budget
// while any sequence decodes (so a step, and the gap between two tokens of
// a stream, stays short; with none decoding, the first prompt in line goes
// in whole), prefix-cache hits, and preemption by recompute when KV blocks
// run out.
// Not thread-safe; owned by the engine loop, which calls Add / Abort /
// Schedule / Update between steps, never while a step's plan executes.
#ifndef INFERD_RUNTIME_GEN_SCHEDULER_H_
#define INFERD_RUNTIME_GEN_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/gen/kv_cache_manager.h"
#include "runtime/gen/sampling_params.h"
#include "runtime/gen/speculative.h"
#include "runtime/model/batch_plan.h"

namespace inferd {

// Replaces *out with at most `max` tokens a request's output format forces
// next (SequenceState::forced_tokens).
using ForcedTokenSource =
    std::function<void(int32_t max, std::vector<int32_t>* out)>;

enum class SequenceStatus : uint8_t {
  kWaiting,
  kRunning,
  kPreempted,
  kFinished
};

// One generation request as the scheduler tracks it.
struct SequenceState {
  int64_t seq_id = 0;
  // Prompt followed by the generated tokens.
  std::vector<int32_t> token_ids;
  int32_t num_prompt_tokens = 0;
  // Tokens whose KV is written (or scheduled to be in the current step).
  int32_t num_computed_tokens = 0;
  // Prompt tokens served by the prefix cache at first admission; -1 before.
  int32_t num_cached_tokens = -1;
  SequenceStatus status = SequenceStatus::kWaiting;
  const SamplingParams* sampling = nullptr;  // not owned; may be null
  uint64_t arrival = 0;                      // Add order
  bool disable_prefix_cache = false;
  // Prompt + most generated tokens; reaching it finishes with kLength.
  int32_t max_total_len = 0;
  int32_t num_preemptions = 0;
  // Speculative decoding (resolved; num_draft_tokens 0 = off).
  SpeculativeParams speculative;
  // Tokens the request's output format forces next (structured output's
  // fast-forward; may be null): asked before each decoding step, they are
  // fed as that step's drafts (instead of prompt-lookup ones), verified
  // like any draft, so they cost one forward pass together.
  ForcedTokenSource forced_tokens;
  // Drafts proposed for the current step, fed after the last known token;
  // not part of token_ids until Update accepts them.
  std::vector<int32_t> draft_token_ids;
  // The drafts are forced tokens (forced_tokens), not guesses: they need no
  // logits of their own (unless the request asks for logprobs).
  bool drafts_forced = false;
  // Scheduled in the current step with kLastLogits (or kAllLogits with
  // drafts): Update expects a token.
  bool awaiting_sample = false;
  // Scheduled in the step being planned (Schedule's scratch).
  bool in_step = false;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  absl::Span<const int32_t> prompt_token_ids() const {
    return absl::MakeConstSpan(token_ids).first(num_prompt_tokens);
  }
  absl::Span<const int32_t> output_token_ids() const {
    return absl::MakeConstSpan(token_ids).subspan(num_prompt_tokens);
  }
};

struct SchedulerConfig {
  int32_t max_batched_tokens = 2048;  // token budget of one step
  // Prefill (prompt) tokens of one step while at least one sequence of the
  // step decodes; 0 = no limit beyond max_batched_tokens (and a step with
  // no decode prefills as much as the budget holds). Decodes never count
  // against it. A step with no decode takes the first prompt in line whole
  // (within max_batched_tokens), or this many tokens if more: a burst of
  // prompts is then staggered instead of prefilled in one long step.
  int32_t max_prefill_tokens_while_decoding = 0;
  int32_t max_seqs = 64;              // sequences in one step
  int32_t max_model_len = 2048;       // prompt + output limit
  // Bounds on the waiting queue; 0 = unbounded. Add answers
  // RESOURCE_EXHAUSTED beyond them.
  int32_t max_waiting_requests = 0;
  int64_t max_waiting_tokens = 0;
  KVCacheConfig kv_cache;
};

struct ScheduledSequence {
  int64_t seq_id = 0;
  int32_t start_pos = 0;          // = num_computed_tokens before this step
  int32_t num_new_tokens = 0;     // tokens computed this step
  int32_t num_cached_tokens = 0;  // prefix-cache hit taken at admission
  bool samples = false;           // the step ends at its last known token
  // A running sequence's next token (one generated token fed back), as
  // opposed to a prompt chunk or a recomputation after a preemption.
  bool decode = false;
  // Draft tokens fed after the decode token (included in num_new_tokens);
  // the plan then asks for kAllLogits: one row per new token. A chunk of
  // prompt tokens of a request with SamplingParams.prompt_logprobs asks for
  // kAllLogits too (with or without `samples`).
  int32_t num_draft_tokens = 0;
  // The drafts are the request's forced tokens (SequenceState::
  // drafts_forced) and the plan asks for the last row only (kLastLogits):
  // they are accepted without verification, the row samples the token
  // after them.
  bool forced_drafts = false;
};

struct SchedulerOutput {
  BatchPlan plan;
  std::vector<ScheduledSequence> scheduled;  // parallel to plan.seqs
  // Sent back to the waiting queue this step (their KV is dropped).
  std::vector<int64_t> preempted_seq_ids;
  int32_t num_scheduled_tokens = 0;
  // num_scheduled_tokens split into decode tokens (one per decoding
  // sequence) and prefill tokens (prompt chunks, recomputation).
  int32_t num_decode_tokens = 0;
  int32_t num_prefill_tokens = 0;
  // Draft tokens among the decode tokens.
  int32_t num_draft_tokens = 0;

  bool empty() const { return plan.seqs.empty(); }
};

// The token sampled for a sequence, and whether the sampler / stop checker
// ended it there. With speculative decoding, the first num_accepted_drafts
// drafts of the step come before token_id (which may itself be the next
// draft, accepted, when a stop ended the sequence on it); the other drafts
// are rejected and their KV dropped.
struct SampledToken {
  int64_t seq_id = 0;
  int32_t token_id = 0;
  FinishReason finish_reason = FinishReason::kNone;
  int32_t num_accepted_drafts = 0;
};

struct FinishedSequence {
  int64_t seq_id = 0;
  FinishReason reason = FinishReason::kNone;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  int32_t num_cached_tokens = 0;
  int32_t num_preemptions = 0;
};

// KV cache figures a generation scheduler reports (EngineStats).
struct SchedulerKvStats {
  int64_t free_blocks = 0;
  int64_t prefix_query_tokens = 0;  // prompt tokens looked up
  int64_t prefix_hit_tokens = 0;    // prompt tokens found
};

// The generate workflow's scheduler: which sequences run in the next step
// and with how many tokens, over the KV cache it manages. The built-in is
// ContinuousBatchingScheduler ("continuous_batching"); a plug-in registers
// its own (PluginRegistrar::AddBatchingScheduler) and a workflow names it.
// Its contracts are the built-in's, documented there. Not thread-safe;
// owned by the engine loop.
class GenerationScheduler {
 public:
  virtual ~GenerationScheduler() = default;
  virtual absl::Status Add(int64_t seq_id, std::vector<int32_t> prompt_token_ids,
                           const SamplingParams* sampling,
                           bool disable_prefix_cache,
                           SpeculativeParams speculative,
                           ForcedTokenSource forced_tokens) = 0;
  virtual SchedulerOutput Schedule() = 0;
  virtual absl::StatusOr<std::vector<FinishedSequence>> Update(
      const std::vector<SampledToken>& sampled) = 0;
  virtual absl::StatusOr<bool> Fork(int64_t parent_id, int64_t child_id,
                                    int32_t first_token,
                                    const SamplingParams* sampling,
                                    SpeculativeParams speculative,
                                    ForcedTokenSource forced_tokens) = 0;
  virtual bool Abort(int64_t seq_id) = 0;
  virtual int32_t num_waiting() const = 0;
  virtual int32_t num_running() const = 0;
  virtual SchedulerKvStats kv_stats() const = 0;
};

class ContinuousBatchingScheduler : public GenerationScheduler {
 public:
  explicit ContinuousBatchingScheduler(SchedulerConfig config);

  ContinuousBatchingScheduler(const ContinuousBatchingScheduler&) = delete;
  ContinuousBatchingScheduler& operator=(const ContinuousBatchingScheduler&) =
      delete;

  // Queues a request. `sampling` (may be null: defaults) must outlive the
  // request; only max_tokens is read here. `speculative` (resolved) turns on
  // prompt-lookup drafts for its decoding steps. INVALID_ARGUMENT when the prompt
  // is empty or the request can never fit (prompt + max_tokens above the
  // max model length or the KV cache capacity), ALREADY_EXISTS for a live
  // seq_id, RESOURCE_EXHAUSTED when the waiting queue is full.
  // `forced_tokens` (may be null): SequenceState::forced_tokens.
  absl::Status Add(int64_t seq_id, std::vector<int32_t> prompt_token_ids,
                   const SamplingParams* sampling,
                   bool disable_prefix_cache = false,
                   SpeculativeParams speculative = {0, 0, 0},
                   ForcedTokenSource forced_tokens = nullptr) override;

  // Plans the next step. Advances num_computed_tokens of the scheduled
  // requests as if the step ran; call Update after it did.
  SchedulerOutput Schedule() override;

  // Applies the step's sampled tokens (one per sequence scheduled with
  // kLastLogits or kAllLogits; ids aborted since Schedule are ignored),
  // rolls back rejected drafts (the computed length drops to the verified
  // tokens, blocks past what the next token needs go back to the pool),
  // publishes newly full blocks of verified tokens to the prefix cache, and finishes the sequences whose token
  // carries a finish reason or that reached max_total_len (kLength). A
  // finished request's blocks go back to the pool (cached ones stay
  // cached) and its state is dropped. INVALID_ARGUMENT, with nothing
  // applied, when a token is unexpected or an expected one is missing.
  absl::StatusOr<std::vector<FinishedSequence>> Update(
      const std::vector<SampledToken>& sampled) override;

  // Parallel samples (SamplingParams.n): starts `child_id` as another
  // completion of `parent_id`'s prompt, between Schedule and Update of the
  // step in which the parent's prompt was fully computed and its first
  // token is sampled (the child's first token, `first_token`, is sampled
  // from the same logits). The child shares the parent's full prompt
  // blocks by reference count and recomputes only the prompt's last partial
  // block (fewer than block_size tokens) in a block of its own, together
  // with its first token, in its first step. It keeps the parent's
  // disable_prefix_cache, cached-token count and arrival; `sampling` and
  // `speculative` are its own. Returns false, adding nothing, when
  // first_token already reaches the length limit (the caller finishes the
  // child with kLength). FAILED_PRECONDITION when the parent is not at that
  // point; ALREADY_EXISTS for a live child_id.
  absl::StatusOr<bool> Fork(int64_t parent_id, int64_t child_id,
                            int32_t first_token,
                            const SamplingParams* sampling,
                            SpeculativeParams speculative = {0, 0, 0},
                            ForcedTokenSource forced_tokens = nullptr) override;

  // Drops a request (cancel, deadline, error) and frees its blocks at once.
  // Returns false for an unknown or already finished id.
  bool Abort(int64_t seq_id) override;

  // The request's state, or null once finished/aborted. Owned by the
  // scheduler; valid until the next non-const call.
  const SequenceState* Get(int64_t seq_id) const;

  int32_t num_waiting() const override {
    return static_cast<int32_t>(waiting_.size());
  }
  int32_t num_running() const override {
    return static_cast<int32_t>(running_.size());
  }
  SchedulerKvStats kv_stats() const override {
    return {kv_.num_free_blocks(), kv_.prefix_query_tokens(),
            kv_.prefix_hit_tokens()};
  }
  bool HasUnfinished() const { return !seqs_.empty(); }
  const SchedulerConfig& config() const { return config_; }
  const KVCacheManager& kv_cache() const { return kv_; }

 private:
  void Preempt(SequenceState* seq, SchedulerOutput* out);
  // Makes room for `seq` to hold `num_tokens` tokens, preempting the most
  // recently admitted running requests not scheduled this step (possibly
  // `seq` itself: then false).
  bool AllocateOrPreempt(SequenceState* seq, int32_t num_tokens,
                         SchedulerOutput* out);
  // Schedules num_new known tokens of `seq` (plus its drafts when
  // `decode`).
  void ScheduleChunk(SequenceState* seq, int32_t num_new, int32_t num_hit,
                     bool decode, SchedulerOutput* out);
  void Remove(SequenceState* seq);  // from the queues, blocks and map

  const SchedulerConfig config_;
  KVCacheManager kv_;
  absl::flat_hash_map<int64_t, std::unique_ptr<SequenceState>> seqs_;
  std::deque<SequenceState*> waiting_;
  std::vector<SequenceState*> running_;  // admission order
  std::vector<int64_t> last_scheduled_;
  int64_t waiting_tokens_ = 0;
  uint64_t next_arrival_ = 0;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_GEN_SCHEDULER_H_
