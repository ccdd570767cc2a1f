#include "runtime/gen/scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace inferd {

ContinuousBatchingScheduler::ContinuousBatchingScheduler(SchedulerConfig config)
    : config_(std::move(config)), kv_(config_.kv_cache) {}

absl::Status ContinuousBatchingScheduler::Add(
    int64_t seq_id, std::vector<int32_t> prompt_token_ids,
    const SamplingParams* sampling, bool disable_prefix_cache,
    SpeculativeParams speculative, ForcedTokenSource forced_tokens) {
  if (seqs_.contains(seq_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("sequence ", seq_id, " is already scheduled"));
  }
  const int32_t prompt_len = static_cast<int32_t>(prompt_token_ids.size());
  if (prompt_len == 0) {
    return absl::InvalidArgumentError("the prompt has no tokens");
  }
  const int32_t max_tokens = sampling != nullptr ? sampling->max_tokens : 0;
  if (max_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens (", max_tokens, ") is negative"));
  }
  const int32_t max_len = config_.max_model_len;
  if (prompt_len >= max_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("the prompt (", prompt_len,
                     " tokens) leaves no room to generate "
                     "within the max model length (",
                     max_len, " tokens)"));
  }
  if (max_tokens > 0 &&
      static_cast<int64_t>(prompt_len) + max_tokens > max_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prompt (", prompt_len, " tokens) + max_tokens (", max_tokens,
        ") exceeds the max model length (", max_len, " tokens)"));
  }
  // The last generated token is never fed back, so a request holds KV for
  // at most max_total_len - 1 tokens.
  const int64_t capacity =
      static_cast<int64_t>(kv_.num_blocks()) * kv_.block_size();
  int32_t max_total = max_tokens > 0 ? prompt_len + max_tokens : max_len;
  if (max_tokens == 0) {
    // "Until the context is full": the cache capacity may be the tighter
    // limit.
    max_total =
        static_cast<int32_t>(std::min<int64_t>(max_total, capacity + 1));
  }
  if (max_total - 1 > capacity || prompt_len >= max_total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prompt (", prompt_len, " tokens) + max_tokens (", max_tokens,
        ") can never fit the KV cache capacity (", kv_.num_blocks(),
        " blocks x ", kv_.block_size(), " = ", capacity, " tokens)"));
  }
  if (config_.max_waiting_requests > 0 &&
      num_waiting() >= config_.max_waiting_requests) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the waiting queue is full (",
                     config_.max_waiting_requests, " requests)"));
  }
  if (config_.max_waiting_tokens > 0 &&
      waiting_tokens_ + prompt_len > config_.max_waiting_tokens) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the waiting queue is full (", config_.max_waiting_tokens, " tokens)"));
  }

  auto seq = std::make_unique<SequenceState>();
  seq->seq_id = seq_id;
  seq->num_prompt_tokens = prompt_len;
  seq->token_ids = std::move(prompt_token_ids);
  seq->token_ids.reserve(static_cast<size_t>(max_total));
  seq->sampling = sampling;
  seq->arrival = next_arrival_++;
  seq->disable_prefix_cache = disable_prefix_cache;
  seq->max_total_len = max_total;
  seq->speculative = speculative;
  seq->forced_tokens = std::move(forced_tokens);
  waiting_.push_back(seq.get());
  waiting_tokens_ += seq->num_tokens();
  seqs_.emplace(seq_id, std::move(seq));
  return absl::OkStatus();
}

void ContinuousBatchingScheduler::Preempt(SequenceState* seq,
                                          SchedulerOutput* out) {
  kv_.Free(seq->seq_id);
  seq->status = SequenceStatus::kPreempted;
  seq->num_computed_tokens = 0;
  seq->awaiting_sample = false;
  seq->draft_token_ids.clear();
  ++seq->num_preemptions;
  waiting_.push_front(seq);
  waiting_tokens_ += seq->num_tokens();
  out->preempted_seq_ids.push_back(seq->seq_id);
}

bool ContinuousBatchingScheduler::AllocateOrPreempt(SequenceState* seq,
                                                    int32_t num_tokens,
                                                    SchedulerOutput* out) {
  while (!kv_.AllocateSlots(seq->seq_id, num_tokens)) {
    // Out of blocks: the most recently admitted request not scheduled this
    // step gives its blocks back. `seq` itself qualifies, so one is found.
    auto victim = std::find_if(running_.rbegin(), running_.rend(),
                               [](const SequenceState* s) { return !s->in_step; });
    SequenceState* v = *victim;
    running_.erase(std::next(victim).base());
    Preempt(v, out);
    if (v == seq) return false;
  }
  return true;
}

void ContinuousBatchingScheduler::ScheduleChunk(SequenceState* seq,
                                                int32_t num_new,
                                                int32_t num_hit, bool decode,
                                                SchedulerOutput* out) {
  const int32_t start = seq->num_computed_tokens;
  const bool samples = start + num_new == seq->num_tokens();
  if (!decode) seq->draft_token_ids.clear();
  const int32_t drafts = static_cast<int32_t>(seq->draft_token_ids.size());
  // Forced drafts need no rows of their own, unless logprobs are asked for.
  const bool forced = drafts > 0 && seq->drafts_forced &&
                      (seq->sampling == nullptr || seq->sampling->logprobs == 0);
  SequencePlan plan;
  plan.seq_id = seq->seq_id;
  plan.token_ids.assign(seq->token_ids.begin() + start,
                        seq->token_ids.begin() + start + num_new);
  plan.token_ids.insert(plan.token_ids.end(), seq->draft_token_ids.begin(),
                        seq->draft_token_ids.end());
  plan.start_pos = start;
  absl::Span<const int32_t> table = kv_.BlockTable(seq->seq_id);
  plan.block_table.assign(table.begin(), table.end());
  // Prompt logprobs: every row of a chunk of prompt tokens.
  const bool prompt_rows = !decode && seq->sampling != nullptr &&
                           seq->sampling->prompt_logprobs > 0 &&
                           start < seq->num_prompt_tokens;
  plan.output = prompt_rows    ? StepOutput::kAllLogits
                : !samples     ? StepOutput::kNone
                : drafts > 0 && !forced ? StepOutput::kAllLogits
                               : StepOutput::kLastLogits;
  out->plan.seqs.push_back(std::move(plan));

  ScheduledSequence s;
  s.seq_id = seq->seq_id;
  s.start_pos = start;
  s.num_new_tokens = num_new + drafts;
  s.num_cached_tokens = num_hit;
  s.samples = samples;
  s.decode = decode;
  s.num_draft_tokens = drafts;
  s.forced_drafts = forced;
  out->scheduled.push_back(s);
  out->num_scheduled_tokens += s.num_new_tokens;
  (s.decode ? out->num_decode_tokens : out->num_prefill_tokens) +=
      s.num_new_tokens;
  out->num_draft_tokens += drafts;

  seq->num_computed_tokens += s.num_new_tokens;
  seq->awaiting_sample = samples;
  seq->in_step = true;
  last_scheduled_.push_back(seq->seq_id);
}

SchedulerOutput ContinuousBatchingScheduler::Schedule() {
  SchedulerOutput out;
  last_scheduled_.clear();
  int32_t budget = config_.max_batched_tokens;
  const size_t max_seqs = static_cast<size_t>(std::max(config_.max_seqs, 0));
  auto room = [&] { return budget > 0 && out.scheduled.size() < max_seqs; };
  // A preemption means the pool is full: nothing more is scheduled after a
  // request preempts itself, and no waiting request is admitted (admitting
  // would only thrash).
  bool stop = false;
  // Preemption edits running_; walk a snapshot, skipping what left it.
  const std::vector<SequenceState*> running(running_.begin(), running_.end());

  // 1. Every running decode (one generated token fed back), in admission
  // order, each with its prompt-lookup drafts when it speculates.
  auto decodes = [](const SequenceState* seq) {
    return seq->status == SequenceStatus::kRunning &&
           seq->num_tokens() - seq->num_computed_tokens == 1 &&
           seq->num_computed_tokens >= seq->num_prompt_tokens;
  };
  // Decodes not yet scheduled: drafts never take their share of the budget.
  int32_t decodes_left = 0;
  for (const SequenceState* seq : running) decodes_left += decodes(seq);
  for (SequenceState* seq : running) {
    if (!room()) break;
    if (!decodes(seq)) continue;
    --decodes_left;
    seq->draft_token_ids.clear();
    // Drafts never take the sequence past its length limit: every accepted
    // one and the token after it must fit.
    const int32_t room_for_drafts = std::min(
        seq->max_total_len - seq->num_tokens() - 1, budget - 1 - decodes_left);
    // Forced tokens first (they are certain), else prompt lookup.
    if (seq->forced_tokens != nullptr && room_for_drafts > 0) {
      seq->forced_tokens(std::min(room_for_drafts, kMaxForcedTokens),
                         &seq->draft_token_ids);
    }
    seq->drafts_forced = !seq->draft_token_ids.empty();
    const int32_t max_drafts =
        std::min(seq->speculative.num_draft_tokens, room_for_drafts);
    if (seq->draft_token_ids.empty() && max_drafts > 0) {
      ProposeNgramDrafts(seq->token_ids, seq->speculative.min_ngram,
                         seq->speculative.max_ngram, max_drafts,
                         &seq->draft_token_ids);
    }
    // Drafts only take free blocks, and leave one for each decode still
    // to schedule: they never cause a preemption.
    const int32_t drafts = static_cast<int32_t>(seq->draft_token_ids.size());
    if (drafts > 0) {
      const int32_t want = seq->num_computed_tokens + 1 + drafts;
      const int32_t extra = std::max(
          kv_.NumBlocksFor(want) -
              static_cast<int32_t>(kv_.BlockTable(seq->seq_id).size()),
          0);
      if (kv_.num_free_blocks() - extra < decodes_left ||
          !kv_.AllocateSlots(seq->seq_id, want)) {
        seq->draft_token_ids.clear();
      }
    }
    if (!AllocateOrPreempt(seq, seq->num_computed_tokens + 1, &out)) {
      stop = true;
      break;
    }
    ScheduleChunk(seq, 1, 0, /*decode=*/true, &out);
    budget -= 1 + static_cast<int32_t>(seq->draft_token_ids.size());
  }

  // 2. Prefill, first come first served: running requests in chunked
  // prefill (admitted earlier), then waiting ones, within the prefill
  // budget, which is smaller while sequences decode.
  int32_t prefill_budget = budget;
  const int32_t limit = config_.max_prefill_tokens_while_decoding;
  if (limit > 0 && out.num_decode_tokens > 0) {
    prefill_budget = std::min(prefill_budget, limit);
  } else if (limit > 0 && !stop) {
    // Nothing decodes: the first prompt in line goes in whole (within the
    // step budget) so it starts decoding at once; the others follow in
    // chunks alongside it. Prefilling a burst of prompts in one step
    // instead would give all of them the same late first token, and then
    // finish them together, so the next burst arrives at once again.
    int32_t head = 0;
    for (SequenceState* seq : running) {
      if (seq->status == SequenceStatus::kRunning && !seq->in_step) {
        head = seq->num_tokens() - seq->num_computed_tokens;
        break;
      }
    }
    if (head == 0 && !waiting_.empty()) head = waiting_.front()->num_tokens();
    prefill_budget = std::min(prefill_budget, std::max(limit, head));
  }
  auto prefill_room = [&] { return prefill_budget > 0 && room(); };
  for (SequenceState* seq : running) {
    if (stop || !prefill_room()) break;
    if (seq->status != SequenceStatus::kRunning || seq->in_step) continue;
    const int32_t num_new = std::min(
        seq->num_tokens() - seq->num_computed_tokens, prefill_budget);
    if (num_new <= 0) continue;
    if (!AllocateOrPreempt(seq, seq->num_computed_tokens + num_new, &out)) {
      stop = true;
      break;
    }
    ScheduleChunk(seq, num_new, 0, /*decode=*/false, &out);
    budget -= num_new;
    prefill_budget -= num_new;
  }

  while (!stop && out.preempted_seq_ids.empty() && !waiting_.empty() &&
         prefill_room()) {
    SequenceState* seq = waiting_.front();
    const bool use_cache =
        config_.kv_cache.enable_prefix_caching && !seq->disable_prefix_cache;
    PrefixHit hit;
    if (use_cache) hit = kv_.FindCachedPrefix(seq->token_ids);
    const int32_t computed = hit.num_tokens;
    const int32_t num_new =
        std::min(seq->num_tokens() - computed, prefill_budget);
    if (!kv_.AllocateSlots(seq->seq_id, computed + num_new,
                           use_cache ? &hit : nullptr)) {
      break;
    }
    waiting_.pop_front();
    waiting_tokens_ -= seq->num_tokens();
    seq->status = SequenceStatus::kRunning;
    seq->num_computed_tokens = computed;
    if (seq->num_cached_tokens < 0) {
      seq->num_cached_tokens = std::min(computed, seq->num_prompt_tokens);
    }
    running_.push_back(seq);
    ScheduleChunk(seq, num_new, computed, /*decode=*/false, &out);
    budget -= num_new;
    prefill_budget -= num_new;
  }

  for (int64_t id : last_scheduled_) seqs_.at(id)->in_step = false;
  return out;
}

absl::StatusOr<std::vector<FinishedSequence>>
ContinuousBatchingScheduler::Update(const std::vector<SampledToken>& sampled) {
  // Validate first so an error applies nothing.
  absl::flat_hash_set<int64_t> got;
  for (const SampledToken& t : sampled) {
    auto it = seqs_.find(t.seq_id);
    if (it == seqs_.end()) continue;  // aborted since Schedule
    if (!it->second->awaiting_sample || !got.insert(t.seq_id).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence ", t.seq_id, " did not expect a sampled token"));
    }
    if (t.num_accepted_drafts < 0 ||
        t.num_accepted_drafts >
            static_cast<int32_t>(it->second->draft_token_ids.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence ", t.seq_id, ": ", t.num_accepted_drafts,
          " accepted drafts of ", it->second->draft_token_ids.size()));
    }
  }
  for (int64_t id : last_scheduled_) {
    auto it = seqs_.find(id);
    if (it != seqs_.end() && it->second->awaiting_sample && !got.contains(id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("no sampled token for sequence ", id));
    }
  }

  // Tokens first: accepted drafts, then the sampled token; rejected drafts
  // leave the computed length (their KV slots get rewritten later) and the
  // blocks allocated for them go back to the pool.
  for (const SampledToken& t : sampled) {
    auto it = seqs_.find(t.seq_id);
    if (it == seqs_.end()) continue;
    SequenceState* seq = it->second.get();
    const int32_t drafts = static_cast<int32_t>(seq->draft_token_ids.size());
    const int32_t accepted = std::clamp(t.num_accepted_drafts, 0, drafts);
    seq->token_ids.insert(seq->token_ids.end(), seq->draft_token_ids.begin(),
                          seq->draft_token_ids.begin() + accepted);
    seq->token_ids.push_back(t.token_id);
    seq->awaiting_sample = false;
    if (drafts > 0) {
      seq->num_computed_tokens -= drafts - accepted;
      seq->draft_token_ids.clear();
      kv_.Truncate(seq->seq_id, seq->num_computed_tokens + 1);
    }
  }

  // The step ran: blocks fully covered by computed (verified) tokens hold
  // valid KV.
  for (int64_t id : last_scheduled_) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) continue;
    SequenceState& seq = *it->second;
    if (!seq.disable_prefix_cache) {
      kv_.CacheFullBlocks(id, seq.token_ids, seq.num_computed_tokens);
    }
  }
  last_scheduled_.clear();

  std::vector<FinishedSequence> finished;
  for (const SampledToken& t : sampled) {
    auto it = seqs_.find(t.seq_id);
    if (it == seqs_.end()) continue;
    SequenceState* seq = it->second.get();
    FinishReason reason = t.finish_reason;
    if (reason == FinishReason::kNone &&
        seq->num_tokens() >= seq->max_total_len) {
      reason = FinishReason::kLength;
    }
    if (reason == FinishReason::kNone) continue;
    FinishedSequence f;
    f.seq_id = seq->seq_id;
    f.reason = reason;
    f.num_prompt_tokens = seq->num_prompt_tokens;
    f.num_output_tokens = seq->num_output_tokens();
    f.num_cached_tokens = std::max(seq->num_cached_tokens, 0);
    f.num_preemptions = seq->num_preemptions;
    finished.push_back(f);
    Remove(seq);
  }
  return finished;
}

absl::StatusOr<bool> ContinuousBatchingScheduler::Fork(
    int64_t parent_id, int64_t child_id, int32_t first_token,
    const SamplingParams* sampling, SpeculativeParams speculative,
    ForcedTokenSource forced_tokens) {
  auto it = seqs_.find(parent_id);
  if (it == seqs_.end() || !it->second->awaiting_sample ||
      it->second->num_output_tokens() != 0 ||
      it->second->num_computed_tokens != it->second->num_prompt_tokens) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sequence ", parent_id,
        " is not sampling its first token; it cannot be forked"));
  }
  if (seqs_.contains(child_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("sequence ", child_id, " is already scheduled"));
  }
  const SequenceState& parent = *it->second;
  const int32_t prompt_len = parent.num_prompt_tokens;
  if (prompt_len + 1 >= parent.max_total_len) return false;
  const int32_t shared = prompt_len / kv_.block_size();
  if (!kv_.Fork(parent_id, child_id, shared)) {
    return absl::InternalError(absl::StrCat(
        "sequence ", parent_id, " holds fewer than ", shared, " KV blocks"));
  }
  auto seq = std::make_unique<SequenceState>();
  seq->seq_id = child_id;
  seq->num_prompt_tokens = prompt_len;
  seq->token_ids.reserve(static_cast<size_t>(parent.max_total_len));
  seq->token_ids.assign(parent.token_ids.begin(),
                        parent.token_ids.begin() + prompt_len);
  seq->token_ids.push_back(first_token);
  seq->num_computed_tokens = shared * kv_.block_size();
  seq->num_cached_tokens = parent.num_cached_tokens;
  seq->status = SequenceStatus::kRunning;
  seq->sampling = sampling;
  seq->arrival = parent.arrival;
  seq->disable_prefix_cache = parent.disable_prefix_cache;
  seq->max_total_len = parent.max_total_len;
  seq->speculative = speculative;
  seq->forced_tokens = std::move(forced_tokens);
  running_.push_back(seq.get());
  seqs_.emplace(child_id, std::move(seq));
  return true;
}

void ContinuousBatchingScheduler::Remove(SequenceState* seq) {
  if (seq->status == SequenceStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), seq));
  } else {
    auto it = std::find(waiting_.begin(), waiting_.end(), seq);
    if (it != waiting_.end()) {
      waiting_.erase(it);
      waiting_tokens_ -= seq->num_tokens();
    }
  }
  const int64_t id = seq->seq_id;
  kv_.Free(id);
  seqs_.erase(id);  // destroys *seq
}

bool ContinuousBatchingScheduler::Abort(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return false;
  Remove(it->second.get());
  return true;
}

const SequenceState* ContinuousBatchingScheduler::Get(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

}  // namespace inferd
