#include "runtime/engine/generate_engine.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/common/status_macros.h"
#include "runtime/tokenizer/token_bytes.h"

namespace inferd {

struct GenerateEngine::Request {
  int64_t id = 0;
  GenerateParams params;
  GenerateCallback on_chunk;
  std::shared_ptr<RequestHandle> handle;
  std::vector<int32_t> prompt;
  std::unique_ptr<SamplingState> sampling;
  std::unique_ptr<IncrementalDecoder> decoder;
  std::unique_ptr<StopChecker> stop;
  absl::Time arrival;
  absl::Time first_scheduled = absl::InfiniteFuture();
  absl::Time first_token = absl::InfiniteFuture();
  int32_t cached_tokens = 0;
  int32_t completion_tokens = 0;
  bool admitted = false;
};

GenerateEngine::GenerateEngine(GenerateEngineOptions options,
                               const Tokenizer* tokenizer,
                               GenerateComponents components,
                               std::unique_ptr<StepRunner> runner)
    : options_(std::move(options)),
      tokenizer_(tokenizer),
      input_(std::move(components.input)),
      runner_(std::move(runner)),
      scheduler_owner_(std::move(components.scheduler)),
      sampler_owner_(std::move(components.sampler)),
      scheduler_(*scheduler_owner_),
      sampler_(*sampler_owner_),
      grammars_(std::make_unique<GrammarCompiler>([tokenizer] {
        return std::make_shared<const TokenVocabulary>(
            TokenByteStrings(*tokenizer));
      })) {
  {
    absl::MutexLock lock(&mu_);
    stats_.kv_blocks_total = options_.scheduler.kv_cache.num_blocks;
    stats_.kv_blocks_free = options_.scheduler.kv_cache.num_blocks;
  }
  loop_ = std::thread([this] { Loop(); });
  for (int i = 0; i < options_.prep_threads; ++i) {
    prep_threads_.emplace_back([this] { PrepLoop(); });
  }
}

GenerateEngine::~GenerateEngine() { Stop(); }

void GenerateEngine::Stop() {
  if (stopped_.exchange(true)) return;
  // Prep workers first: they answer what they have not prepared yet
  // (UNAVAILABLE) and hand the request they are preparing to the loop,
  // which is still running; then the loop answers everything it holds.
  {
    absl::MutexLock lock(&mu_);
    prep_stop_ = true;
  }
  for (std::thread& t : prep_threads_) {
    if (t.joinable()) t.join();
  }
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (loop_.joinable()) loop_.join();
}

EngineStats GenerateEngine::Stats() const {
  absl::MutexLock lock(&mu_);
  EngineStats s = stats_;
  s.waiting_requests += in_prep_ + static_cast<int64_t>(incoming_.size());
  return s;
}

absl::Status GenerateEngine::PreparePrompt(Request* r) const {
  ASSIGN_OR_RETURN(r->prompt, input_->ProcessPrompt(r->params));
  if (r->prompt.empty()) {
    return absl::InvalidArgumentError("prompt: it has no tokens");
  }
  for (int32_t id : r->prompt) {
    if (id < 0 || id >= options_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt_token_ids: id ", id, " is outside the vocabulary [0, ",
          options_.vocab_size, ")"));
    }
  }
  const SamplingParams& sampling = r->params.sampling;
  const int32_t max_len = options_.scheduler.max_model_len;
  const int32_t prompt_len = static_cast<int32_t>(r->prompt.size());
  if (prompt_len >= max_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prompt has ", prompt_len, " tokens; the model's context is ",
        max_len, " tokens, which must also hold at least one generated token"));
  }
  if (sampling.max_tokens > 0 && prompt_len + sampling.max_tokens > max_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", prompt_len, " tokens) + max_tokens (", sampling.max_tokens,
        ") exceed the model's context of ", max_len, " tokens"));
  }
  const int32_t max_new =
      sampling.max_tokens > 0 ? sampling.max_tokens : max_len - prompt_len;
  r->sampling = std::make_unique<SamplingState>(sampling, r->prompt,
                                                options_.eos_token_ids);
  if (sampling.response_format.type != ResponseFormat::Type::kText) {
    ASSIGN_OR_RETURN(std::unique_ptr<TokenConstraint> constraint,
                     grammars_->NewConstraint(sampling.response_format));
    r->sampling->set_constraint(std::move(constraint));
  }
  r->decoder = std::make_unique<IncrementalDecoder>(
      *tokenizer_, sampling.skip_special_tokens, r->prompt);
  r->stop =
      std::make_unique<StopChecker>(sampling, options_.eos_token_ids, max_new);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<RequestHandle>> GenerateEngine::SubmitGenerate(
    GenerateParams params, GenerateCallback on_chunk) {
  // What needs no tokenizer is checked here, so it returns from Submit.
  RETURN_IF_ERROR(params.sampling.Validate());
  auto r = std::make_unique<Request>();
  r->arrival = absl::Now();
  r->params = std::move(params);
  r->on_chunk = std::move(on_chunk);
  r->handle = std::make_shared<RequestHandle>();
  std::shared_ptr<RequestHandle> handle = r->handle;
  const bool prepare_inline = prep_threads_.empty();
  // Inline: errors return from Submit (the callback never fires).
  if (prepare_inline) RETURN_IF_ERROR(PreparePrompt(r.get()));
  absl::MutexLock lock(&mu_);
  if (prep_stop_ || stopping_) {
    return absl::UnavailableError("the model is shutting down");
  }
  const int64_t waiting = in_prep_ +
                          static_cast<int64_t>(incoming_.size()) +
                          stats_.waiting_requests;
  if (waiting >= options_.max_queue_requests) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the model's queue is full (", waiting,
        " requests waiting, --max-queue-requests=",
        options_.max_queue_requests, "); retry later"));
  }
  r->id = next_id_++;
  if (prepare_inline) {
    incoming_.push_back(std::move(r));
  } else {
    ++in_prep_;
    prep_queue_.push_back(std::move(r));
  }
  return handle;
}

void GenerateEngine::PrepLoop() {
  while (true) {
    std::unique_ptr<Request> r;
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](GenerateEngine* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) {
            return e->prep_stop_ || !e->prep_queue_.empty();
          },
          this));
      if (prep_queue_.empty()) return;  // stopping, nothing left
      r = std::move(prep_queue_.front());
      prep_queue_.pop_front();
      stopping = prep_stop_;
      if (stopping) --in_prep_;
    }
    if (stopping) {
      FinishRequest(r.get(), FinishReason::kCancelled,
                    absl::UnavailableError("the model is shutting down"));
      continue;
    }
    Prepare(std::move(r));
  }
}

void GenerateEngine::Prepare(std::unique_ptr<Request> r) {
  auto leave = [this] {
    absl::MutexLock lock(&mu_);
    --in_prep_;
  };
  // Cancelled or expired while waiting: no preparation either.
  if (Dropped(*r, absl::Now())) {
    leave();
    AnswerDropped(r.get(), "the deadline passed while the request was queued");
    return;
  }
  absl::Status prepared = PreparePrompt(r.get());
  if (!prepared.ok()) {
    leave();
    r->on_chunk(prepared);
    return;
  }
  // Cancelled while being prepared: it never reaches the scheduler.
  if (Dropped(*r, absl::Now())) {
    leave();
    AnswerDropped(r.get(), "the deadline passed while the request was queued");
    return;
  }
  // Into the loop's inbox and out of in_prep_ in one step (see in_prep_).
  // The loop is still running: Stop joins the prep workers first.
  absl::MutexLock lock(&mu_);
  --in_prep_;
  incoming_.push_back(std::move(r));
}

bool GenerateEngine::Dropped(const Request& r, absl::Time now) {
  return r.handle->aborted() || now > r.params.deadline;
}

void GenerateEngine::AnswerDropped(Request* r, const char* deadline_message) {
  if (r->handle->aborted()) {
    FinishRequest(r, FinishReason::kCancelled);
  } else {
    FinishRequest(r, FinishReason::kCancelled,
                  absl::DeadlineExceededError(deadline_message));
  }
}

void GenerateEngine::FinishRequest(Request* r, FinishReason reason,
                                   const absl::Status& error) {
  if (!error.ok()) {
    r->on_chunk(error);
    return;
  }
  // A request dropped before its prompt was prepared has no decoder yet.
  StopCheckResult res;
  if (r->stop != nullptr && !r->stop->finished()) {
    res = r->stop->Finish(reason, r->decoder->Flush());
  }
  GenerateChunk c;
  c.text = std::move(res.text);
  c.finish = reason;
  c.prompt_tokens = static_cast<int64_t>(r->prompt.size());
  c.completion_tokens = r->completion_tokens;
  c.cached_prompt_tokens = r->cached_tokens;
  const absl::Time now = absl::Now();
  if (r->first_scheduled != absl::InfiniteFuture()) {
    c.timings.queue_seconds =
        absl::ToDoubleSeconds(r->first_scheduled - r->arrival);
  }
  if (r->first_token != absl::InfiniteFuture()) {
    c.timings.time_to_first_token_seconds =
        absl::ToDoubleSeconds(r->first_token - r->arrival);
  }
  c.timings.total_seconds = absl::ToDoubleSeconds(now - r->arrival);
  r->on_chunk(c);
}

void GenerateEngine::AdmitIncoming() {
  std::deque<std::unique_ptr<Request>> batch;
  {
    absl::MutexLock lock(&mu_);
    batch.swap(incoming_);
  }
  const absl::Time now = absl::Now();
  for (auto& r : batch) {
    // Dropped before it was admitted: it never reaches the scheduler.
    if (Dropped(*r, now)) {
      AnswerDropped(r.get(),
                    "the deadline passed while the request was queued");
      continue;
    }
    absl::Status s = scheduler_.Add(r->id, r->prompt, &r->params.sampling,
                                    r->params.disable_prefix_cache);
    if (!s.ok()) {
      FinishRequest(r.get(), FinishReason::kError, s);
      continue;
    }
    r->admitted = true;
    active_[r->id] = std::move(r);
  }
}

void GenerateEngine::ReapAborted() {
  const absl::Time now = absl::Now();
  std::vector<int64_t> drop;
  for (auto& [id, r] : active_) {
    if (Dropped(*r, now)) drop.push_back(id);
  }
  for (int64_t id : drop) {
    std::unique_ptr<Request> r = std::move(active_[id]);
    active_.erase(id);
    scheduler_.Abort(id);  // frees its KV blocks now
    AnswerDropped(r.get(),
                  "the deadline passed before the generation finished");
  }
}

void GenerateEngine::UpdateStats() {
  absl::MutexLock lock(&mu_);
  stats_.waiting_requests = scheduler_.num_waiting();
  stats_.running_requests = scheduler_.num_running();
  stats_.kv_blocks_free = scheduler_.kv_cache().num_free_blocks();
  stats_.prefix_cache_queries = scheduler_.kv_cache().prefix_query_tokens();
  stats_.prefix_cache_hits = scheduler_.kv_cache().prefix_hit_tokens();
}

void GenerateEngine::RunStep() {
  SchedulerOutput out = scheduler_.Schedule();
  {
    absl::MutexLock lock(&mu_);
    stats_.preemptions += static_cast<int64_t>(out.preempted_seq_ids.size());
  }
  if (out.empty()) return;
  const absl::Time now = absl::Now();
  for (const ScheduledSequence& s : out.scheduled) {
    Request* r = active_[s.seq_id].get();
    if (r->first_scheduled == absl::InfiniteFuture()) {
      r->first_scheduled = now;
      r->cached_tokens = s.num_cached_tokens;
    }
  }
  absl::StatusOr<BatchResult> result = runner_->Execute(out.plan);
  {
    absl::MutexLock lock(&mu_);
    stats_.model_calls += 1;
    stats_.batched_tokens += out.num_scheduled_tokens;
  }
  NotifyStep({static_cast<int64_t>(out.scheduled.size()),
              static_cast<int64_t>(out.num_scheduled_tokens)});
  if (!result.ok()) {
    // The step failed: every scheduled request ends with the error; the
    // others keep going.
    for (const ScheduledSequence& s : out.scheduled) {
      auto it = active_.find(s.seq_id);
      if (it == active_.end()) continue;
      std::unique_ptr<Request> r = std::move(it->second);
      active_.erase(it);
      scheduler_.Abort(s.seq_id);
      FinishRequest(r.get(), FinishReason::kError, result.status());
    }
    return;
  }
  // Gather the rows that sample.
  states_.clear();
  const int32_t v = options_.vocab_size;
  size_t rows = 0;
  for (const SequenceResult& sr : result->seqs) {
    if (sr.output == StepOutput::kLastLogits) ++rows;
  }
  logits_.resize(rows * static_cast<size_t>(v));
  std::vector<int64_t> row_ids;
  row_ids.reserve(rows);
  size_t row = 0;
  for (const SequenceResult& sr : result->seqs) {
    if (sr.output != StepOutput::kLastLogits) continue;
    std::memcpy(logits_.data() + row * v, sr.values.data(),
                sizeof(float) * std::min<size_t>(v, sr.values.size()));
    states_.push_back(active_[sr.seq_id]->sampling.get());
    row_ids.push_back(sr.seq_id);
    ++row;
  }
  sampled_.clear();
  std::vector<StopCheckResult> checks(rows);
  if (rows > 0) {
    absl::Status s = sampler_.Sample(absl::MakeSpan(logits_), states_, &samples_);
    if (!s.ok()) {
      for (int64_t id : row_ids) {
        std::unique_ptr<Request> r = std::move(active_[id]);
        active_.erase(id);
        scheduler_.Abort(id);
        FinishRequest(r.get(), FinishReason::kError, s);
      }
      return;
    }
    for (size_t i = 0; i < rows; ++i) {
      Request* r = active_[row_ids[i]].get();
      const int32_t token = samples_[i].token_id;
      std::string delta = r->decoder->Push(token);
      checks[i] = r->stop->Append(token, delta);
      FinishReason reason = checks[i].finish_reason;
      // A complete structured output ends like a stop token (the final
      // chunk comes from the scheduler's finished list).
      if (reason == FinishReason::kNone && r->sampling->constraint_complete()) {
        reason = FinishReason::kStop;
      }
      sampled_.push_back({row_ids[i], token, reason});
    }
  }
  absl::StatusOr<std::vector<FinishedSequence>> finished =
      scheduler_.Update(sampled_);
  const absl::Time token_time = absl::Now();
  // Stream this step's chunk to every sequence that sampled.
  for (size_t i = 0; i < rows; ++i) {
    Request* r = active_[row_ids[i]].get();
    if (r->first_token == absl::InfiniteFuture()) r->first_token = token_time;
    r->completion_tokens += 1;
    GenerateChunk c;
    c.text = std::move(checks[i].text);
    c.token_ids.push_back(samples_[i].token_id);
    if (r->params.sampling.logprobs > 0) {
      TokenLogprobs lp;
      lp.sampled = {samples_[i].token_id, samples_[i].logprob};
      for (const TokenLogprob& t : samples_[i].top_logprobs) {
        lp.top.push_back({t.token_id, t.logprob});
      }
      c.logprobs.push_back(std::move(lp));
    }
    if (checks[i].finished()) {
      c.finish = checks[i].finish_reason;
      c.stop_reason = checks[i].stop_token_id
                          ? absl::StrCat(*checks[i].stop_token_id)
                          : checks[i].stop_string;
      c.prompt_tokens = static_cast<int64_t>(r->prompt.size());
      c.completion_tokens = r->completion_tokens;
      c.cached_prompt_tokens = r->cached_tokens;
      c.timings.queue_seconds =
          absl::ToDoubleSeconds(r->first_scheduled - r->arrival);
      c.timings.time_to_first_token_seconds =
          absl::ToDoubleSeconds(r->first_token - r->arrival);
      c.timings.total_seconds = absl::ToDoubleSeconds(token_time - r->arrival);
    }
    r->on_chunk(c);
  }
  if (!finished.ok()) {
    // Inconsistent bookkeeping: fail the sequences of this step loudly
    // rather than stream wrong tokens.
    for (int64_t id : row_ids) {
      auto it = active_.find(id);
      if (it == active_.end()) continue;
      std::unique_ptr<Request> r = std::move(it->second);
      active_.erase(it);
      scheduler_.Abort(id);
      FinishRequest(r.get(), FinishReason::kError,
                    absl::InternalError(finished.status().message()));
    }
    return;
  }
  for (const FinishedSequence& f : *finished) {
    auto it = active_.find(f.seq_id);
    if (it == active_.end()) continue;
    std::unique_ptr<Request> r = std::move(it->second);
    active_.erase(it);
    if (!r->stop->finished()) {
      // The scheduler ended it (context or max_tokens): final chunk.
      FinishRequest(r.get(), f.reason == FinishReason::kNone
                                 ? FinishReason::kLength
                                 : f.reason);
    }
  }
}

void GenerateEngine::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (active_.empty()) {
        mu_.Await(absl::Condition(
            +[](GenerateEngine* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) {
              return e->stopping_ || !e->incoming_.empty();
            },
            this));
      }
      if (stopping_) break;
    }
    AdmitIncoming();
    ReapAborted();
    RunStep();
    UpdateStats();
  }
  // Shutdown: answer everything still pending.
  AdmitIncoming();
  for (auto& [id, r] : active_) {
    scheduler_.Abort(id);
    FinishRequest(r.get(), FinishReason::kCancelled,
                  absl::UnavailableError("the model is shutting down"));
  }
  active_.clear();
  UpdateStats();
}

}  // namespace inferd
