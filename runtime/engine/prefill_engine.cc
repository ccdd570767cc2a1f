#include "runtime/engine/prefill_engine.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/common/status_macros.h"

namespace inferd {
namespace {

bool IsEmbed(WorkflowKind k) {
  return k == WorkflowKind::kEncoderEmbed || k == WorkflowKind::kDecoderEmbed;
}

absl::Status Unsupported(WorkflowKind k, absl::string_view task) {
  return absl::FailedPreconditionError(absl::StrCat(
      "this model (", IsEmbed(k) ? "an embedder" : "a classification head",
      ") cannot ", task));
}

}  // namespace

PrefillEngine::PrefillEngine(PrefillEngineOptions options, InputProcessor input)
    : options_(std::move(options)),
      input_(std::move(input)),
      scheduler_(options_.scheduler) {}

absl::StatusOr<std::unique_ptr<PrefillEngine>> PrefillEngine::Create(
    PrefillEngineOptions options, InputProcessor input,
    const std::function<absl::StatusOr<std::unique_ptr<StepRunner>>(int)>&
        make_runner) {
  if (options.replicas < 1) options.replicas = 1;
  std::unique_ptr<PrefillEngine> e(
      new PrefillEngine(std::move(options), std::move(input)));
  for (int i = 0; i < e->options_.replicas; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<StepRunner> r, make_runner(i));
    e->runners_.push_back(std::move(r));
  }
  for (auto& r : e->runners_) {
    StepRunner* runner = r.get();
    PrefillEngine* self = e.get();
    e->loops_.emplace_back([self, runner] { self->Loop(runner); });
  }
  return e;
}

PrefillEngine::~PrefillEngine() { Stop(); }

void PrefillEngine::Stop() {
  if (stopped_.exchange(true)) return;
  scheduler_.Close();
  for (std::thread& t : loops_) {
    if (t.joinable()) t.join();
  }
}

EngineStats PrefillEngine::Stats() const {
  EngineStats s;
  s.waiting_requests = scheduler_.waiting_requests();
  s.running_requests = running_.load();
  s.model_calls = model_calls_.load();
  s.batched_tokens = batched_tokens_.load();
  return s;
}

void PrefillEngine::Loop(StepRunner* runner) {
  BatchPlan plan;
  while (true) {
    std::vector<PrefillBatchItem> batch = scheduler_.NextBatch();
    if (batch.empty()) return;  // closed
    plan.seqs.resize(batch.size());
    int64_t tokens = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      const PrefillSequence& s = batch[i].work->seqs[batch[i].seq_index];
      SequencePlan& p = plan.seqs[i];
      p.seq_id = static_cast<int64_t>(i);
      p.token_ids = s.ids;
      p.token_type_ids = s.type_ids;
      p.start_pos = 0;
      p.block_table.clear();
      p.output = batch[i].work->output;
      tokens += static_cast<int64_t>(s.ids.size());
    }
    running_.fetch_add(1);
    absl::StatusOr<BatchResult> result = runner->Execute(plan);
    model_calls_.fetch_add(1);
    batched_tokens_.fetch_add(tokens);
    NotifyStep({static_cast<int64_t>(batch.size()), tokens});
    for (size_t i = 0; i < batch.size(); ++i) {
      PrefillWork& w = *batch[i].work;
      if (result.ok()) {
        absl::MutexLock lock(&w.mu);
        w.results[batch[i].seq_index] = std::move(result->seqs[i]);
      }
      w.FinishSeqs(1, result.status());
    }
    running_.fetch_sub(1);
  }
}

absl::StatusOr<std::shared_ptr<RequestHandle>> PrefillEngine::Enqueue(
    std::vector<PrefillSequence> seqs, StepOutput output, absl::Time deadline,
    double tokenization_seconds,
    std::function<void(absl::StatusOr<std::vector<SequenceResult>>,
                       const RequestTimings&, int64_t)>
        finish) {
  if (stopped_.load()) return absl::UnavailableError("the model is shutting down");
  auto work = std::make_shared<PrefillWork>();
  work->seqs = std::move(seqs);
  work->output = output;
  work->handle = std::make_shared<RequestHandle>();
  work->arrival = absl::Now();
  work->deadline = deadline;
  {
    absl::MutexLock lock(&work->mu);
    work->results.resize(work->seqs.size());
  }
  const int64_t tokens = work->num_tokens();
  PrefillWork* raw = work.get();
  work->done = [raw, finish = std::move(finish), tokens,
                tokenization_seconds](
                   absl::StatusOr<std::vector<SequenceResult>> r) {
    RequestTimings t;
    t.tokenization_seconds = tokenization_seconds;
    const absl::Time now = absl::Now();
    if (raw->first_scheduled != absl::InfiniteFuture()) {
      t.queue_seconds = absl::ToDoubleSeconds(raw->first_scheduled - raw->arrival);
      t.inference_seconds = absl::ToDoubleSeconds(now - raw->first_scheduled);
    }
    t.total_seconds = absl::ToDoubleSeconds(now - raw->arrival);
    finish(std::move(r), t, tokens);
  };
  std::shared_ptr<RequestHandle> handle = work->handle;
  RETURN_IF_ERROR(scheduler_.Submit(std::move(work)));
  return handle;
}

absl::StatusOr<std::shared_ptr<RequestHandle>> PrefillEngine::SubmitEmbed(
    EmbedParams params, ResultCallback<EmbedResult> done) {
  if (!IsEmbed(options_.workflow)) return Unsupported(options_.workflow, "embed");
  if (params.dimensions > 0 && options_.embedding_dims > 0 &&
      params.dimensions > options_.embedding_dims) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dimensions: ", params.dimensions, " is larger than the model's ",
        options_.embedding_dims));
  }
  EmbedOutputOptions o;
  o.pooling = options_.default_pooling;
  if (!params.pooling.empty()) {
    ASSIGN_OR_RETURN(o.pooling, ParsePooling(params.pooling));
  }
  o.normalize = params.normalize.value_or(options_.default_normalize);
  o.dimensions = params.dimensions;
  o.dense = &options_.dense;
  const absl::Time tokenize_start = absl::Now();
  ASSIGN_OR_RETURN(std::vector<PrefillSequence> seqs, input_.ProcessEmbed(params));
  const double tokenization_seconds =
      absl::ToDoubleSeconds(absl::Now() - tokenize_start);
  std::vector<int32_t> pool_starts;
  std::vector<int32_t> lengths;
  for (const PrefillSequence& s : seqs) {
    pool_starts.push_back(s.pool_start);
    lengths.push_back(static_cast<int32_t>(s.ids.size()));
  }
  const StepOutput out = o.pooling == Pooling::kLast ? StepOutput::kLastHiddenState
                                                     : StepOutput::kHiddenStates;
  return Enqueue(
      std::move(seqs), out, params.deadline, tokenization_seconds,
      [o, pool_starts, lengths, done = std::move(done)](
          absl::StatusOr<std::vector<SequenceResult>> r,
          const RequestTimings& t, int64_t tokens) {
        if (!r.ok()) {
          done(r.status());
          return;
        }
        EmbedResult result;
        result.total_tokens = tokens;
        result.tokens = lengths;
        result.timings = t;
        for (size_t i = 0; i < r->size(); ++i) {
          auto e = PoolEmbedding((*r)[i], pool_starts[i], o);
          if (!e.ok()) {
            done(e.status());
            return;
          }
          result.embeddings.push_back(std::move(e).value());
        }
        done(std::move(result));
      });
}

absl::StatusOr<std::shared_ptr<RequestHandle>> PrefillEngine::EnqueueHead(
    std::vector<PrefillSequence> seqs, absl::Time deadline,
    double tokenization_seconds, ScoreFunction fn,
    std::function<void(absl::StatusOr<std::vector<std::vector<float>>>,
                       const RequestTimings&, int64_t tokens)>
        finish) {
  return Enqueue(
      std::move(seqs), StepOutput::kClassifierLogits, deadline,
      tokenization_seconds,
      [fn, finish = std::move(finish)](
          absl::StatusOr<std::vector<SequenceResult>> r,
          const RequestTimings& t, int64_t tokens) {
        if (!r.ok()) {
          finish(r.status(), t, tokens);
          return;
        }
        std::vector<std::vector<float>> scores;
        for (const SequenceResult& s : *r) {
          if (s.values.empty()) {
            finish(absl::InternalError("the model returned no score"), t,
                   tokens);
            return;
          }
          scores.push_back(ScoreLogits(s.values, fn));
        }
        finish(std::move(scores), t, tokens);
      });
}

absl::StatusOr<std::shared_ptr<RequestHandle>> PrefillEngine::SubmitClassify(
    ClassifyParams params, ResultCallback<ClassifyResult> done) {
  if (IsEmbed(options_.workflow)) {
    return Unsupported(options_.workflow, "classify");
  }
  const absl::Time tokenize_start = absl::Now();
  ASSIGN_OR_RETURN(std::vector<PrefillSequence> seqs,
                   input_.ProcessClassify(params));
  const double tokenization_seconds =
      absl::ToDoubleSeconds(absl::Now() - tokenize_start);
  const ScoreFunction fn =
      params.raw_scores ? ScoreFunction::kRaw
                        : (options_.workflow == WorkflowKind::kCrossEncoderRerank
                               ? ScoreFunction::kSigmoid
                               : options_.classify_scores);
  return EnqueueHead(
      std::move(seqs), params.deadline, tokenization_seconds, fn,
      [done = std::move(done)](
          absl::StatusOr<std::vector<std::vector<float>>> scores,
          const RequestTimings& t, int64_t tokens) {
        if (!scores.ok()) {
          done(scores.status());
          return;
        }
        ClassifyResult result;
        result.total_tokens = tokens;
        result.timings = t;
        result.scores = std::move(scores).value();
        done(std::move(result));
      });
}

absl::StatusOr<std::shared_ptr<RequestHandle>> PrefillEngine::SubmitRerank(
    RerankParams params, ResultCallback<RerankResult> done) {
  if (options_.workflow != WorkflowKind::kCrossEncoderRerank) {
    return Unsupported(options_.workflow, "rerank");
  }
  const absl::Time tokenize_start = absl::Now();
  ASSIGN_OR_RETURN(std::vector<PrefillSequence> seqs,
                   input_.ProcessRerank(params));
  const double tokenization_seconds =
      absl::ToDoubleSeconds(absl::Now() - tokenize_start);
  const ScoreFunction fn =
      params.raw_scores ? ScoreFunction::kRaw : ScoreFunction::kSigmoid;
  return EnqueueHead(
      std::move(seqs), params.deadline, tokenization_seconds, fn,
      [done = std::move(done)](
          absl::StatusOr<std::vector<std::vector<float>>> scores,
          const RequestTimings& t, int64_t tokens) {
        if (!scores.ok()) {
          done(scores.status());
          return;
        }
        RerankResult result;
        result.total_tokens = tokens;
        result.timings = t;
        // A cross-encoder head has one logit: the relevance.
        for (const std::vector<float>& s : *scores) {
          result.scores.push_back(s[0]);
        }
        done(std::move(result));
      });
}

}  // namespace inferd
