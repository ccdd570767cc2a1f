#include "runtime/engine/generate_engine.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/common/field_error.h"
#include "absl/time/clock.h"
#include "runtime/common/status_macros.h"
#include "runtime/tokenizer/token_bytes.h"

namespace inferd {

// The callback and bookkeeping the samples of one request share: the call
// ends with the last sample's final chunk, or with the first error (which
// also aborts the other samples).
struct GenerateEngine::SampleGroup {
  GenerateCallback on_chunk;
  std::shared_ptr<RequestHandle> handle;
  absl::Mutex mu;
  int32_t num_samples ABSL_GUARDED_BY(mu) = 1;  // SamplingParams.n
  int32_t finished ABSL_GUARDED_BY(mu) = 0;
  bool ended ABSL_GUARDED_BY(mu) = false;
};

struct GenerateEngine::Request {
  int64_t id = 0;
  GenerateParams params;
  std::shared_ptr<SampleGroup> group;
  int32_t sample_index = 0;
  // Sample 0 of a request with n > 1: the other samples, prepared, until
  // the loop forks them off at this one's first token.
  std::vector<std::unique_ptr<Request>> children;
  std::shared_ptr<RequestHandle> handle;
  // SamplingParams.prompt_logprobs: entries for prompt positions 1..
  // prompt_logprobs_done, filled by the loop as prompt chunks run; handed
  // to the output side with the first token.
  std::vector<TokenLogprobs> prompt_logprobs;
  int32_t prompt_logprobs_done = 0;
  bool prompt_logprobs_sent = false;
  // GenerateParams.return_prompt_token_ids: sent with the first token.
  bool prompt_ids_sent = false;
  // Sample 0: PreparePrompt made the other samples (into `children`).
  bool samples_created = false;
  std::vector<int32_t> prompt;
  std::unique_ptr<SamplingState> sampling;
  // The request's stop rules. The output side (the output worker once
  // admitted) streams text through it (Append: stop strings included); the
  // loop decides EOS, stop ids and max_tokens from the ids alone
  // (TokenFinish, with `generated` counting its tokens).
  std::unique_ptr<StopChecker> stop;
  int32_t generated = 0;  // engine thread
  // Output side.
  std::unique_ptr<IncrementalDecoder> decoder;
  bool final_sent = false;
  // Set by the output side when it sent the final chunk of a request the
  // loop still holds (a stop string); the loop then frees it.
  std::atomic<bool> output_finished{false};
  absl::Time arrival;
  absl::Time first_scheduled = absl::InfiniteFuture();
  absl::Time first_token = absl::InfiniteFuture();
  int32_t cached_tokens = 0;
  int32_t completion_tokens = 0;
  bool admitted = false;
  SpeculativeParams speculative;  // resolved against the server default
  // Draft tokens verified / accepted so far: the loop's counts, and the
  // output side's copy as of the last token it streamed.
  int64_t draft_tokens = 0;
  int64_t accepted_drafts = 0;
  int64_t out_draft_tokens = 0;
  int64_t out_accepted_drafts = 0;

  // The counts a final chunk reports (the output side's).
  GenerateUsage Usage() const {
    GenerateUsage u;
    u.prompt_tokens = static_cast<int64_t>(prompt.size());
    u.completion_tokens = completion_tokens;
    u.cached_prompt_tokens = cached_tokens;
    u.draft_tokens = out_draft_tokens;
    u.accepted_draft_tokens = out_accepted_drafts;
    return u;
  }
};

struct GenerateEngine::OutputEvent {
  // A token of `request`, which the loop still owns...
  Request* request = nullptr;
  SampleResult sample;
  // With the first token of a request with prompt logprobs.
  std::vector<TokenLogprobs> prompt_logprobs;
  // With the first token, when the request asked for its prompt's ids.
  std::vector<int32_t> prompt_token_ids;
  // The request's draft counts after the step of this token.
  int64_t draft_tokens = 0;
  int64_t accepted_drafts = 0;
  // ... or the loop is done with `release`: finish it with reason / error
  // unless the output side has, then free it.
  std::unique_ptr<Request> release;
  FinishReason reason = FinishReason::kNone;
  absl::Status error;
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
      step_sampling_(sampler_owner_.get(), options_.vocab_size),
      grammars_(std::make_unique<ConstraintCompiler>(
          [tokenizer, vocab = options_.vocab_size,
           eos = options_.eos_token_ids, bytes = options_.token_bytes] {
            ConstraintVocabulary v;
            v.token_bytes = bytes ? bytes() : TokenByteStrings(*tokenizer);
            // The model's logits may have more rows than the tokenizer has
            // tokens (padding): those are never allowed.
            if (static_cast<int32_t>(v.token_bytes.size()) < vocab) {
              v.token_bytes.resize(static_cast<size_t>(vocab));
            }
            v.eos_ids = eos;
            v.tokenize = [tokenizer](absl::string_view text) {
              auto ids = tokenizer->Encode(text,
                                           /*add_special_tokens=*/false);
              return ids.ok() ? ids->ids : std::vector<int32_t>();
            };
            return v;
          })),
      front_(std::make_unique<AdmissionFront<std::unique_ptr<Request>>>(
          options_.max_queue_requests, options_.prep_threads,
          FrontStages())) {
  {
    absl::MutexLock lock(&mu_);
    stats_.kv_blocks_total = options_.scheduler.kv_cache.num_blocks;
    stats_.kv_blocks_free = options_.scheduler.kv_cache.num_blocks;
  }
  if (options_.overlap_output) {
    output_thread_ = std::thread([this] { OutputLoop(); });
  }
  loop_ = std::thread([this] { Loop(); });
  front_->Start();
}

GenerateEngine::~GenerateEngine() { Stop(); }

void GenerateEngine::Stop() {
  if (stopped_.exchange(true)) return;
  // Prep workers first: they answer what they have not prepared yet
  // (UNAVAILABLE) and hand the request they are preparing to the loop,
  // which is still running; then the loop answers everything it holds.
  front_->Stop();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (loop_.joinable()) loop_.join();
  // The loop has released every request: drain the output worker.
  {
    absl::MutexLock lock(&out_mu_);
    out_stop_ = true;
  }
  if (output_thread_.joinable()) output_thread_.join();
}

EngineStats GenerateEngine::Stats() const {
  EngineStats s;
  const int64_t in_prep = front_->in_prep();
  {
    absl::MutexLock lock(&mu_);
    s = stats_;
    s.waiting_requests += in_prep + static_cast<int64_t>(incoming_.size());
  }
  // The runner's KV buffers do not change after construction.
  s.kv_cache_bytes = kv_cache_summary().bytes;
  s.kv_cache_resident_bytes = runner_->kv_cache_resident_bytes();
  return s;
}

absl::Status GenerateEngine::PreparePrompt(Request* r) const {
  ASSIGN_OR_RETURN(r->prompt, input_->ProcessPrompt(r->params));
  if (r->prompt.empty()) {
    return FieldError("prompt", ": it has no tokens");
  }
  for (int32_t id : r->prompt) {
    if (id < 0 || id >= options_.vocab_size) {
      return FieldError("prompt_token_ids", absl::StrCat(
          ": id ", id, " is outside the vocabulary [0, ",
          options_.vocab_size, ")"));
    }
  }
  const SamplingParams& sampling = r->params.sampling;
  const int32_t max_len = options_.scheduler.max_model_len;
  const int32_t prompt_len = static_cast<int32_t>(r->prompt.size());
  if (prompt_len >= max_len) {
    return FieldErrorMessage("prompt", absl::StrCat(
        "the prompt has ", prompt_len, " tokens; the model's context is ",
        max_len, " tokens, which must also hold at least one generated token"));
  }
  if (sampling.max_tokens > 0 && prompt_len + sampling.max_tokens > max_len) {
    return FieldErrorMessage("sampling.max_tokens", absl::StrCat(
        "prompt (", prompt_len, " tokens) + max_tokens (", sampling.max_tokens,
        ") exceed the model's context of ", max_len, " tokens"));
  }
  // Prompt logprobs need logits of every prompt token: no prefix cache.
  if (sampling.prompt_logprobs > 0) r->params.disable_prefix_cache = true;
  RETURN_IF_ERROR(InitDecoding(r));
  // Samples 1..n-1: sample i draws from seed + i (or a random seed of its
  // own); only sample 0 reports prompt logprobs.
  for (int32_t i = 1; i < sampling.n; ++i) {
    auto c = std::make_unique<Request>();
    c->params = r->params;
    SamplingParams& cs = c->params.sampling;
    if (cs.seed.has_value()) cs.seed = *cs.seed + static_cast<uint64_t>(i);
    cs.prompt_logprobs = 0;
    c->group = r->group;
    c->sample_index = i;
    c->handle = r->handle;
    c->prompt = r->prompt;
    c->arrival = r->arrival;
    RETURN_IF_ERROR(InitDecoding(c.get()));
    r->children.push_back(std::move(c));
  }
  r->samples_created = true;
  return absl::OkStatus();
}

// The fast-forward tokens of a request's structured output (null without
// one): the scheduler feeds them as drafts.
ForcedTokenSource GenerateEngine::ForcedTokens(const Request& r) {
  if (!r.sampling->has_constraint()) return nullptr;
  return [state = r.sampling.get()](int32_t max, std::vector<int32_t>* out) {
    state->ForcedTokens(max, out);
  };
}

absl::Status GenerateEngine::InitDecoding(Request* r) const {
  const SamplingParams& sampling = r->params.sampling;
  const int32_t max_len = options_.scheduler.max_model_len;
  const int32_t prompt_len = static_cast<int32_t>(r->prompt.size());
  const int32_t max_new =
      sampling.max_tokens > 0 ? sampling.max_tokens : max_len - prompt_len;
  r->sampling = std::make_unique<SamplingState>(sampling, r->prompt,
                                                options_.eos_token_ids);
  r->speculative =
      r->params.speculative.Resolved(options_.speculative_draft_tokens);
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
  RETURN_IF_ERROR(params.speculative.Validate());
  auto r = std::make_unique<Request>();
  r->arrival = absl::Now();
  r->params = std::move(params);
  r->handle = std::make_shared<RequestHandle>();
  r->group = std::make_shared<SampleGroup>();
  r->group->on_chunk = std::move(on_chunk);
  r->group->handle = r->handle;
  {
    absl::MutexLock lock(&r->group->mu);
    r->group->num_samples = r->params.sampling.n;
  }
  r->id = next_id_.fetch_add(1);
  std::shared_ptr<RequestHandle> handle = r->handle;
  // Inline preparation (no prep workers): errors return from here and the
  // callback never fires.
  RETURN_IF_ERROR(front_->Submit(std::move(r)));
  return handle;
}

AdmissionFront<std::unique_ptr<GenerateEngine::Request>>::Stages
GenerateEngine::FrontStages() {
  AdmissionFront<std::unique_ptr<Request>>::Stages s;
  s.prepare = [this](std::unique_ptr<Request>& r) {
    return PreparePrompt(r.get());
  };
  s.dropped = [](const std::unique_ptr<Request>& r) {
    return DropReason(*r, absl::Now(),
                      "the deadline passed while the request was queued");
  };
  // The loop is still running: Stop stops the front first.
  s.hand_off = [this](std::unique_ptr<Request>& r) {
    absl::MutexLock lock(&mu_);
    incoming_.push_back(std::move(r));
    return absl::OkStatus();
  };
  s.answer = [this](std::unique_ptr<Request>& r, const absl::Status& why) {
    AnswerEnded(r.get(), why);
  };
  s.downstream_waiting = [this] {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(incoming_.size()) + stats_.waiting_requests;
  };
  return s;
}

bool GenerateEngine::Dropped(const Request& r, absl::Time now) {
  return r.handle->aborted() || now > r.params.deadline;
}

absl::Status GenerateEngine::DropReason(const Request& r, absl::Time now,
                                        const char* deadline_message) {
  if (r.handle->aborted()) {
    return absl::CancelledError("the request was cancelled");
  }
  if (now > r.params.deadline) {
    return absl::DeadlineExceededError(deadline_message);
  }
  return absl::OkStatus();
}

void GenerateEngine::AnswerEnded(Request* r, const absl::Status& why) {
  if (absl::IsCancelled(why)) {
    FinishRequest(r, FinishReason::kCancelled);
  } else {
    FinishRequest(r, FinishReason::kCancelled, why);
  }
}

void GenerateEngine::Deliver(Request* r, const absl::Status& error,
                             GenerateChunk* chunk) {
  SampleGroup& g = *r->group;
  absl::MutexLock lock(&g.mu);
  if (g.ended) return;
  if (!error.ok()) {
    g.ended = true;
    if (g.num_samples > 1) g.handle->Abort();  // the other samples stop too
    g.on_chunk(error);
    return;
  }
  chunk->sample_index = r->sample_index;
  if (chunk->finish != FinishReason::kNone) {
    ++g.finished;
    chunk->more_samples = g.finished < g.num_samples;
    g.ended = !chunk->more_samples;
  }
  g.on_chunk(*chunk);
}

void GenerateEngine::FinishRequest(Request* r, FinishReason reason,
                                   const absl::Status& error) {
  if (r->final_sent) return;
  r->final_sent = true;
  // Samples never forked off end with this one (before their first step).
  std::vector<std::unique_ptr<Request>> children = std::move(r->children);
  r->children.clear();
  FinishOwnSample(r, reason, error);
  for (auto& c : children) FinishRequest(c.get(), reason, error);
  // Dropped before its prompt was prepared: the other samples were never
  // made, but each still gets its final chunk.
  if (r->sample_index == 0 && !r->samples_created && error.ok()) {
    for (int32_t i = 1; i < r->params.sampling.n; ++i) {
      Request c;
      c.group = r->group;
      c.sample_index = i;
      c.arrival = r->arrival;
      FinishOwnSample(&c, reason, error);
    }
  }
}

void GenerateEngine::FinishOwnSample(Request* r, FinishReason reason,
                                     const absl::Status& error) {
  if (!error.ok()) {
    Deliver(r, error, nullptr);
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
  c.usage = r->Usage();
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
  Deliver(r, absl::OkStatus(), &c);
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
    if (absl::Status why = DropReason(
            *r, now, "the deadline passed while the request was queued");
        !why.ok()) {
      AnswerEnded(r.get(), why);
      continue;
    }
    absl::Status s = scheduler_.Add(r->id, r->prompt, &r->params.sampling,
                                    r->params.disable_prefix_cache,
                                    r->speculative, ForcedTokens(*r));
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
    if (r->output_finished.load(std::memory_order_acquire) ||
        Dropped(*r, now)) {
      drop.push_back(id);
    }
  }
  for (int64_t id : drop) {
    std::unique_ptr<Request> r = std::move(active_[id]);
    active_.erase(id);
    scheduler_.Abort(id);  // frees its KV blocks now
    if (r->output_finished.load(std::memory_order_acquire)) {
      // A stop string ended it; its final chunk is out.
      Release(std::move(r), FinishReason::kStop);
    } else if (r->handle->aborted()) {
      Release(std::move(r), FinishReason::kCancelled);
    } else {
      Release(std::move(r), FinishReason::kCancelled,
              absl::DeadlineExceededError(
                  "the deadline passed before the generation finished"));
    }
  }
}

void GenerateEngine::Release(std::unique_ptr<Request> r, FinishReason reason,
                             absl::Status error) {
  OutputEvent e;
  e.release = std::move(r);
  e.reason = reason;
  e.error = std::move(error);
  PostOutput(std::move(e));
}

void GenerateEngine::PostOutput(OutputEvent event) {
  if (!options_.overlap_output) {
    HandleOutput(event);
    return;
  }
  absl::MutexLock lock(&out_mu_);
  out_queue_.push_back(std::move(event));
}

void GenerateEngine::OutputLoop() {
  while (true) {
    {
      absl::MutexLock lock(&out_mu_);
      out_mu_.Await(absl::Condition(
          +[](GenerateEngine* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->out_mu_) {
            return e->out_stop_ || !e->out_queue_.empty();
          },
          this));
      if (out_queue_.empty()) return;  // stopping, drained
      out_batch_.swap(out_queue_);
    }
    for (OutputEvent& e : out_batch_) HandleOutput(e);
    out_batch_.clear();
  }
}

void GenerateEngine::HandleOutput(OutputEvent& e) {
  if (e.request != nullptr) {
    EmitToken(e.request, e);
    return;
  }
  FinishRequest(e.release.get(), e.reason, e.error);
  e.release.reset();
}

void GenerateEngine::EmitToken(Request* r, OutputEvent& event) {
  // A stop string ended it already: tokens the loop sampled since are
  // dropped.
  if (r->final_sent) return;
  const SampleResult& sample = event.sample;
  r->out_draft_tokens = event.draft_tokens;
  r->out_accepted_drafts = event.accepted_drafts;
  const int32_t token = sample.token_id;
  std::string delta = r->decoder->Push(token);
  StopCheckResult check = r->stop->Append(token, delta);
  const absl::Time now = absl::Now();
  if (r->first_token == absl::InfiniteFuture()) r->first_token = now;
  r->completion_tokens += 1;
  GenerateChunk c;
  c.text = std::move(check.text);
  c.token_ids.push_back(token);
  c.prompt_logprobs = std::move(event.prompt_logprobs);
  c.prompt_token_ids = std::move(event.prompt_token_ids);
  if (r->params.sampling.logprobs > 0) {
    TokenLogprobs lp;
    lp.sampled = {token, sample.logprob};
    for (const TokenLogprob& t : sample.top_logprobs) {
      lp.top.push_back({t.token_id, t.logprob});
    }
    c.logprobs.push_back(std::move(lp));
  }
  if (check.finished()) {
    c.finish = check.finish_reason;
    c.stop_reason = check.stop_token_id ? absl::StrCat(*check.stop_token_id)
                                        : check.stop_string;
    c.usage = r->Usage();
    c.timings.queue_seconds =
        absl::ToDoubleSeconds(r->first_scheduled - r->arrival);
    c.timings.time_to_first_token_seconds =
        absl::ToDoubleSeconds(r->first_token - r->arrival);
    c.timings.total_seconds = absl::ToDoubleSeconds(now - r->arrival);
    r->final_sent = true;
  }
  Deliver(r, absl::OkStatus(), &c);
  // After the chunk is out: the loop frees the sequence before its next
  // step (it may have sampled more tokens for it meanwhile; they are
  // dropped above).
  if (r->final_sent) r->output_finished.store(true, std::memory_order_release);
}

void GenerateEngine::UpdateStats() {
  absl::MutexLock lock(&mu_);
  stats_.waiting_requests = scheduler_.num_waiting();
  stats_.running_requests = scheduler_.num_running();
  const SchedulerKvStats kv = scheduler_.kv_stats();
  stats_.kv_blocks_free = kv.free_blocks;
  stats_.prefix_cache_queries = kv.prefix_query_tokens;
  stats_.prefix_cache_hits = kv.prefix_hit_tokens;
}

SequenceDecoding GenerateEngine::Decoding(Request* r) {
  SequenceDecoding d;
  d.state = r->sampling.get();
  d.stop = r->stop.get();
  d.generated = &r->generated;
  return d;
}

absl::Status GenerateEngine::CollectPromptLogprobs(
    Request* r, const ScheduledSequence& sched, const LogitRows& rows) {
  std::vector<SampleResult> entries;
  RETURN_IF_ERROR(step_sampling_.PromptLogprobs(
      rows, sched.num_new_tokens, r->prompt, sched.start_pos,
      r->params.sampling.prompt_logprobs, &r->prompt_logprobs_done, &entries));
  for (const SampleResult& res : entries) {
    TokenLogprobs lp;
    lp.sampled = {res.token_id, res.logprob};
    for (const TokenLogprob& t : res.top_logprobs) {
      lp.top.push_back({t.token_id, t.logprob});
    }
    r->prompt_logprobs.push_back(std::move(lp));
  }
  return absl::OkStatus();
}

void GenerateEngine::ForkSamples(
    Request* parent, const LogitRows& rows,
    std::vector<Emitted>* emitted,
    std::vector<std::pair<std::unique_ptr<Request>, FinishReason>>* done) {
  std::vector<std::unique_ptr<Request>> children = std::move(parent->children);
  parent->children.clear();
  for (std::unique_ptr<Request>& c : children) {
    {
      absl::MutexLock lock(&mu_);
      c->id = next_id_++;
    }
    c->admitted = true;
    c->first_scheduled = parent->first_scheduled;
    c->cached_tokens = parent->cached_tokens;
    // The parent's first step has no drafts: its last row is the one it
    // sampled from.
    SampleResult res;
    FinishReason reason = FinishReason::kNone;
    absl::Status s =
        step_sampling_.ForkFirstToken(rows, Decoding(c.get()), &res, &reason);
    if (!s.ok()) {
      Release(std::move(c), FinishReason::kError, s);
      continue;
    }
    bool live = false;
    if (reason == FinishReason::kNone) {
      absl::StatusOr<bool> forked =
          scheduler_.Fork(parent->id, c->id, res.token_id,
                          &c->params.sampling, c->speculative,
                          ForcedTokens(*c));
      if (!forked.ok()) {
        Release(std::move(c), FinishReason::kError,
                absl::InternalError(forked.status().message()));
        continue;
      }
      live = *forked;
      if (!live) reason = FinishReason::kLength;  // the context is full
    }
    const size_t begin = samples_.size();
    samples_.push_back(std::move(res));
    emitted->push_back({c.get(), begin, samples_.size(), c->id});
    if (live) {
      active_[c->id] = std::move(c);
    } else {
      done->emplace_back(std::move(c), reason);
    }
  }
}

// One engine step: schedule -> execute -> sample -> update.
void GenerateEngine::RunStep() {
  const absl::Time step_start = absl::Now();
  SchedulerOutput out = ScheduleStep(step_start);
  if (out.empty()) return;
  absl::StatusOr<BatchResult> result = runner_->Execute(out.plan);
  {
    absl::MutexLock lock(&mu_);
    stats_.model_calls += 1;
    stats_.batched_tokens += out.num_scheduled_tokens;
  }
  if (!result.ok()) {
    // The step failed: every scheduled request ends with the error; the
    // others keep going.
    for (const ScheduledSequence& s : out.scheduled) {
      FailRequest(s.seq_id, result.status());
    }
    NotifyStepDone(out, step_start);
    return;
  }
  StepSamples step = SampleStep(out, *result);
  UpdateStep(out, step, step_start);
}

SchedulerOutput GenerateEngine::ScheduleStep(absl::Time step_start) {
  SchedulerOutput out = scheduler_.Schedule();
  {
    absl::MutexLock lock(&mu_);
    stats_.preemptions += static_cast<int64_t>(out.preempted_seq_ids.size());
  }
  for (const ScheduledSequence& s : out.scheduled) {
    Request* r = active_[s.seq_id].get();
    if (r->first_scheduled == absl::InfiniteFuture()) {
      r->first_scheduled = step_start;
      r->cached_tokens = s.num_cached_tokens;
    }
  }
  return out;
}

void GenerateEngine::NotifyStepDone(const SchedulerOutput& out,
                                    absl::Time step_start) {
  StepInfo info;
  info.num_seqs = static_cast<int64_t>(out.scheduled.size());
  info.num_tokens = out.num_scheduled_tokens;
  info.num_prefill_tokens = out.num_prefill_tokens;
  info.num_decode_tokens = out.num_decode_tokens;
  info.seconds = absl::ToDoubleSeconds(absl::Now() - step_start);
  NotifyStep(info);
}

void GenerateEngine::FailRequest(int64_t id, const absl::Status& error) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  std::unique_ptr<Request> r = std::move(it->second);
  active_.erase(it);
  scheduler_.Abort(id);  // the loop's hold first, then the answer
  Release(std::move(r), FinishReason::kError, error);
}

// Samples every sequence that asked for logits (prompt logprobs, drafts,
// forks included); a sampling error ends only its own request (recorded in
// `errors`, applied by UpdateStep).
GenerateEngine::StepSamples GenerateEngine::SampleStep(
    const SchedulerOutput& out, BatchResult& result) {
  StepSamples step;
  samples_.clear();
  sampled_.clear();
  int64_t step_drafts = 0;
  int64_t step_accepted = 0;
  for (size_t i = 0; i < result.seqs.size(); ++i) {
    SequenceResult& sr = result.seqs[i];
    if (sr.output != StepOutput::kLastLogits &&
        sr.output != StepOutput::kAllLogits) {
      continue;
    }
    Request* r = active_[sr.seq_id].get();
    const ScheduledSequence& sched = out.scheduled[i];
    LogitRows rows = LogitRows::Of(sr.values, sr.rows);
    if (!sched.decode && r->params.sampling.prompt_logprobs > 0 &&
        sr.output == StepOutput::kAllLogits) {
      absl::Status s = CollectPromptLogprobs(r, sched, rows);
      if (!s.ok()) {
        step.errors.emplace_back(r->id, s);
        continue;
      }
      // Sampling reads only the chunk's last row.
      if (sched.samples) rows = rows.Row(rows.rows - 1);
    }
    if (!sched.samples) continue;
    absl::Span<const int32_t> drafts =
        absl::MakeConstSpan(out.plan.seqs[i].token_ids)
            .subspan(1, static_cast<size_t>(sched.num_draft_tokens));
    SequenceTokens& got = sequence_tokens_;
    got.sampled.seq_id = r->id;
    absl::Status s = step_sampling_.Tokens(rows, drafts, sched.forced_drafts,
                                           Decoding(r), &got);
    if (!s.ok()) {
      step.errors.emplace_back(r->id, s);
      continue;
    }
    const int32_t accepted = got.accepted;
    r->draft_tokens += sched.num_draft_tokens;
    r->accepted_drafts += accepted;
    step_drafts += sched.num_draft_tokens;
    step_accepted += accepted;
    sampled_.push_back(got.sampled);
    const size_t begin = samples_.size();
    for (SampleResult& res : got.tokens) samples_.push_back(std::move(res));
    step.emitted.push_back({r, begin, samples_.size(), r->id});
    // Its first token: the other samples start from the same logits.
    if (!r->children.empty()) {
      ForkSamples(r, rows, &step.emitted, &step.done_forks);
    }
  }
  if (step_drafts > 0) {
    absl::MutexLock lock(&mu_);
    stats_.spec_draft_tokens += step_drafts;
    stats_.spec_accepted_tokens += step_accepted;
  }
  return step;
}

// Applies the step: failed requests end, the scheduler takes the sampled
// tokens, the tokens go to the output side, finished requests are released.
void GenerateEngine::UpdateStep(const SchedulerOutput& out, StepSamples& step,
                                absl::Time step_start) {
  for (const auto& [id, error] : step.errors) FailRequest(id, error);
  absl::StatusOr<std::vector<FinishedSequence>> finished =
      scheduler_.Update(sampled_);
  // The tokens go out (on the output worker, while the next step runs),
  // before any release of their request.
  for (const Emitted& em : step.emitted) {
    for (size_t k = em.begin; k < em.end; ++k) {
      OutputEvent e;
      e.request = em.request;
      e.sample = std::move(samples_[k]);
      if (em.request->params.sampling.prompt_logprobs > 0 &&
          !em.request->prompt_logprobs_sent) {
        em.request->prompt_logprobs_sent = true;
        e.prompt_logprobs = std::move(em.request->prompt_logprobs);
      }
      if (em.request->params.return_prompt_token_ids &&
          !em.request->prompt_ids_sent) {
        em.request->prompt_ids_sent = true;
        e.prompt_token_ids = em.request->prompt;
      }
      e.draft_tokens = em.request->draft_tokens;
      e.accepted_drafts = em.request->accepted_drafts;
      PostOutput(std::move(e));
    }
  }
  for (auto& [child, reason] : step.done_forks) {
    Release(std::move(child), reason);
  }
  NotifyStepDone(out, step_start);
  if (!finished.ok()) {
    // Inconsistent bookkeeping: fail the sequences of this step loudly
    // rather than stream wrong tokens.
    const absl::Status error = absl::InternalError(finished.status().message());
    for (const Emitted& em : step.emitted) FailRequest(em.id, error);
    return;
  }
  for (const FinishedSequence& f : *finished) {
    auto it = active_.find(f.seq_id);
    if (it == active_.end()) continue;
    std::unique_ptr<Request> r = std::move(it->second);
    active_.erase(it);
    // EOS / stop id / max_tokens: the output side finishes it on the same
    // token; the context limit: the final chunk comes from the release.
    Release(std::move(r), f.reason == FinishReason::kNone ? FinishReason::kLength
                                                          : f.reason);
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
    Release(std::move(r), FinishReason::kCancelled,
            absl::UnavailableError("the model is shutting down"));
  }
  active_.clear();
  UpdateStats();
}

}  // namespace inferd
