#include "runtime/engine/prefill_engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/common/field_error.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "runtime/common/status_macros.h"

namespace inferd {

PrefillEngine::PrefillEngine(PrefillEngineOptions options,
                             PrefillComponents components)
    : options_(std::move(options)),
      components_(std::move(components)),
      scheduler_(*components_.scheduler),
      front_(std::make_unique<AdmissionFront<PrefillRequest>>(
          options_.max_queue_requests, options_.prep_threads, FrontStages())) {}

AdmissionFront<PrefillEngine::PrefillRequest>::Stages
PrefillEngine::FrontStages() {
  AdmissionFront<PrefillRequest>::Stages s;
  s.prepare = [this](PrefillRequest& request) -> absl::Status {
    ASSIGN_OR_RETURN(request.work, BuildWork(request));
    return absl::OkStatus();
  };
  s.dropped = [](const PrefillRequest& request) -> absl::Status {
    if (request.handle->aborted()) {
      return absl::CancelledError("the request was cancelled");
    }
    if (absl::Now() > request.deadline) {
      return absl::DeadlineExceededError(
          "the deadline passed while the request was queued");
    }
    return absl::OkStatus();
  };
  // Refused by the scheduler (e.g. --max-queue-tokens, or closed): the work
  // never ran, so its done was not called; `answer` gives the error.
  s.hand_off = [this](PrefillRequest& request) {
    return scheduler_.Submit(request.work);
  };
  s.answer = [](PrefillRequest& request, const absl::Status& why) {
    PrefillOutcome o;
    o.timings.total_seconds =
        absl::ToDoubleSeconds(absl::Now() - request.arrival);
    o.total_tokens = request.work != nullptr ? request.work->num_tokens() : 0;
    request.sink(why, o);
  };
  s.downstream_waiting = [this] { return scheduler_.waiting_requests(); };
  return s;
}

absl::StatusOr<std::unique_ptr<PrefillEngine>> PrefillEngine::Create(
    PrefillEngineOptions options, PrefillComponents components,
    const std::function<absl::StatusOr<std::unique_ptr<StepRunner>>(int)>&
        make_runner) {
  if (options.replicas < 1) options.replicas = 1;
  if (components.input == nullptr || components.scheduler == nullptr ||
      components.output == nullptr) {
    return absl::InvalidArgumentError(
        "prefill_loop needs an input processor, a scheduler and an output "
        "processor");
  }
  if (components.stages.empty()) {
    Workflow w;
    w.tasks = options.tasks;
    ASSIGN_OR_RETURN(
        components.stages,
        CreateOutputStages(DefaultOutputStages(w), OutputStageContext{}));
  }
  DeviceOptions one_thread;
  one_thread.num_threads = 1;
  ASSIGN_OR_RETURN(std::unique_ptr<Device> stage_device,
                   DeviceRegistry::Create("cpu", one_thread));
  std::unique_ptr<PrefillEngine> e(
      new PrefillEngine(std::move(options), std::move(components)));
  e->stage_device_ = std::move(stage_device);
  e->stage_ctx_.device = e->stage_device_.get();
  for (int i = 0; i < e->options_.replicas; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<StepRunner> r, make_runner(i));
    e->runners_.push_back(std::move(r));
  }
  for (auto& r : e->runners_) {
    StepRunner* runner = r.get();
    PrefillEngine* self = e.get();
    e->loops_.emplace_back([self, runner] { self->Loop(runner); });
  }
  e->front_->Start();
  return e;
}

absl::Status PrefillEngine::CheckTask(Task task) const {
  if (std::find(options_.tasks.begin(), options_.tasks.end(), task) !=
      options_.tasks.end()) {
    return absl::OkStatus();
  }
  std::vector<std::string> tasks;
  for (Task t : options_.tasks) tasks.emplace_back(TaskName(t));
  return absl::FailedPreconditionError(absl::StrCat(
      "this model's workflow (", options_.workflow, ") cannot ", TaskName(task),
      "; it serves: ", absl::StrJoin(tasks, ", ")));
}

PrefillParallelism ChoosePrefillParallelism(int64_t hidden_size, int cores,
                                            int threads, int replicas) {
  PrefillParallelism p;
  cores = std::max(1, cores);
  p.replicas = replicas;
  if (p.replicas <= 0) {
    p.replicas =
        hidden_size <= 512 ? std::max(1, cores / std::max(1, threads)) : 1;
  }
  p.threads = threads > 0 ? threads : std::max(1, cores / p.replicas);
  return p;
}

PrefillEngine::~PrefillEngine() { Stop(); }

void PrefillEngine::Stop() {
  if (stopped_.exchange(true)) return;
  // Prep workers answer what they have not tokenized yet (UNAVAILABLE) and
  // exit; then the scheduler answers its queue.
  front_->Stop();
  scheduler_.Close();
  for (std::thread& t : loops_) {
    if (t.joinable()) t.join();
  }
}

EngineStats PrefillEngine::Stats() const {
  EngineStats s;
  s.waiting_requests = front_->in_prep() + scheduler_.waiting_requests();
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
      p.pool_start = s.pool_start;
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

absl::StatusOr<std::shared_ptr<RequestHandle>> PrefillEngine::Admit(
    PrefillRequest request) {
  request.handle = std::make_shared<RequestHandle>();
  request.arrival = absl::Now();
  std::shared_ptr<RequestHandle> handle = request.handle;
  RETURN_IF_ERROR(front_->Submit(std::move(request)));
  return handle;
}

absl::StatusOr<std::shared_ptr<PrefillWork>> PrefillEngine::BuildWork(
    const PrefillRequest& request) {
  const absl::Time tokenize_start = absl::Now();
  ASSIGN_OR_RETURN(std::vector<PrefillSequence> seqs, request.tokenize());
  const double tokenization_seconds =
      absl::ToDoubleSeconds(absl::Now() - tokenize_start);

  auto work = std::make_shared<PrefillWork>();
  work->seqs = std::move(seqs);
  work->output = request.step_output;
  work->handle = request.handle;
  work->arrival = request.arrival;
  work->deadline = request.deadline;
  {
    absl::MutexLock lock(&work->mu);
    work->results.resize(work->seqs.size());
  }
  PrefillOutcome outcome;
  outcome.timings.tokenization_seconds = tokenization_seconds;
  outcome.total_tokens = work->num_tokens();
  for (const PrefillSequence& s : work->seqs) {
    outcome.lengths.push_back(static_cast<int32_t>(s.ids.size()));
  }
  // The request record lives on in `done` (the scheduler's work does not
  // own it otherwise); `raw` breaks the cycle work -> done -> work.
  PrefillWork* raw = work.get();
  work->done = [this, raw, request, outcome](
                   absl::StatusOr<std::vector<SequenceResult>> r) mutable {
    const absl::Time now = absl::Now();
    if (raw->first_scheduled != absl::InfiniteFuture()) {
      outcome.timings.queue_seconds =
          absl::ToDoubleSeconds(raw->first_scheduled - raw->arrival);
      outcome.timings.inference_seconds =
          absl::ToDoubleSeconds(now - raw->first_scheduled);
    }
    outcome.timings.total_seconds = absl::ToDoubleSeconds(now - raw->arrival);
    if (!r.ok()) {
      request.sink(r.status(), outcome);
      return;
    }
    request.sink(RunOutputPlan(request, *raw, *r), outcome);
  };
  return work;
}

absl::StatusOr<OutputRows> PrefillEngine::RunOutputPlan(
    const PrefillRequest& request, const PrefillWork& work,
    const std::vector<SequenceResult>& results) const {
  OutputRows rows;
  rows.rows = static_cast<int64_t>(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    if (request.token_heads) {
      RETURN_IF_ERROR(request.token_heads(i, work.seqs[i], results[i]));
    }
    OutputRequest o;
    o.pool_start = work.seqs[i].pool_start;
    o.raw_scores = request.raw_scores;
    ASSIGN_OR_RETURN(std::vector<float> row,
                     request.head->Process(results[i], o));
    if (i == 0) rows.cols = static_cast<int64_t>(row.size());
    if (static_cast<int64_t>(row.size()) != rows.cols) {
      return absl::InternalError(absl::StrCat(
          "output processor ", request.head->name(), " gave rows of ",
          rows.cols, " and ", row.size(), " values in one request"));
    }
    rows.values.insert(rows.values.end(), row.begin(), row.end());
  }
  RETURN_IF_ERROR(RunOutputStages(stage_ctx_, request.stage_request,
                                  request.stages, &rows));
  return rows;
}

std::vector<std::string> PrefillEngine::EmbedOutputs() const {
  std::vector<std::string> out;
  for (const auto& head : components_.token_heads) {
    if (head->present()) out.push_back(head->output());
  }
  return out;
}

std::vector<const OutputStage*> PrefillEngine::stages() const {
  std::vector<const OutputStage*> out;
  for (const auto& s : components_.stages) out.push_back(s.get());
  return out;
}

absl::StatusOr<const OutputProcessor*> PrefillEngine::ResolvePooling(
    const std::string& pooling) const {
  if (pooling.empty()) return components_.output.get();
  auto it = components_.poolings.find(pooling);
  if (it != components_.poolings.end()) return it->second.get();
  std::vector<std::string> names;
  for (const auto& [name, p] : components_.poolings) names.push_back(name);
  return absl::InvalidArgumentError(absl::StrCat(
      "pooling '", pooling, "': no output processor ",
      PoolingComponent(pooling), " is registered (poolings: ",
      absl::StrJoin(names, ", "), "); a plug-in can add one (--plugin)"));
}

template <typename Params>
PrefillEngine::PrefillRequest PrefillEngine::NewRequest(
    std::shared_ptr<const Params> params,
    absl::StatusOr<std::vector<PrefillSequence>> (InputProcessor::*process)(
        const Params&) const) {
  PrefillRequest request;
  request.deadline = params->deadline;
  request.tokenize = [this, params, process] {
    return (components_.input.get()->*process)(*params);
  };
  return request;
}

absl::StatusOr<std::shared_ptr<RequestHandle>> PrefillEngine::SubmitEmbed(
    EmbedParams params, ResultCallback<EmbedResult> done) {
  RETURN_IF_ERROR(CheckTask(Task::kEmbed));
  if (params.dimensions > 0 && options_.embedding_dims > 0 &&
      params.dimensions > options_.embedding_dims) {
    return FieldError(
        "dimensions", absl::StrCat(": ", params.dimensions,
                     " is larger than the model's ", options_.embedding_dims));
  }
  ASSIGN_OR_RETURN(const OutputProcessor* pooling,
                   ResolvePooling(params.pooling));
  for (const auto& [wanted, output] :
       {std::pair<bool, const char*>{params.want_sparse, "sparse"},
        {params.want_multi_vector, "multi_vector"}}) {
    const bool served = std::any_of(
        components_.token_heads.begin(), components_.token_heads.end(),
        [o = output](const auto& h) { return h->output() == o; });
    if (wanted && !served) {
      return FieldError(absl::StrCat("outputs.", output),
                        absl::StrCat(": workflow ", options_.workflow,
                                     " has no token head for it"),
                        absl::StatusCode::kFailedPrecondition);
    }
  }
  for (const auto& head : components_.token_heads) {
    RETURN_IF_ERROR(head->Check(params));
  }
  auto shared = std::make_shared<const EmbedParams>(std::move(params));
  PrefillRequest request = NewRequest(shared, &InputProcessor::ProcessEmbed);
  request.head = pooling;
  request.step_output = pooling->step_output();
  request.stage_request.normalize =
      shared->normalize.value_or(options_.default_normalize);
  request.stage_request.dimensions = shared->dimensions;
  if (shared->want_dense) request.stages = stages();
  // Token heads' outputs: they need every token's hidden state.
  auto runs = std::make_shared<std::vector<std::unique_ptr<TokenHeadRun>>>();
  for (const auto& head : components_.token_heads) {
    if (!head->Wanted(*shared)) continue;
    runs->push_back(
        head->Start(*shared, request.stage_request.normalize, stage_ctx_));
  }
  if (!runs->empty()) {
    request.step_output = StepOutput::kHiddenStates;
    request.token_heads = [runs](size_t i, const PrefillSequence& seq,
                                 const SequenceResult& r) {
      for (const auto& run : *runs) RETURN_IF_ERROR(run->Add(i, seq.ids, r));
      return absl::OkStatus();
    };
  }
  request.sink = [runs, want_dense = shared->want_dense, done = std::move(done)](
                     absl::StatusOr<OutputRows> rows, const PrefillOutcome& o) {
    if (!rows.ok()) {
      done(rows.status());
      return;
    }
    EmbedResult result;
    result.total_tokens = o.total_tokens;
    result.tokens = o.lengths;
    result.timings = o.timings;
    for (const auto& run : *runs) run->MoveInto(&result);
    for (int64_t r = 0; r < rows->rows; ++r) {
      result.embeddings.push_back(want_dense ? rows->Row(r)
                                             : std::vector<float>());
    }
    done(std::move(result));
  };
  return Admit(std::move(request));
}

template <typename Params, typename Result>
absl::StatusOr<std::shared_ptr<RequestHandle>> PrefillEngine::SubmitScores(
    Task kind, Params params, ResultCallback<Result> done,
    absl::StatusOr<std::vector<PrefillSequence>> (InputProcessor::*process)(
        const Params&) const,
    absl::Status (*fill)(const OutputRows& scores, Result* result)) {
  RETURN_IF_ERROR(CheckTask(kind));
  auto shared = std::make_shared<const Params>(std::move(params));
  PrefillRequest request = NewRequest(shared, process);
  request.head = components_.output.get();
  request.step_output = request.head->step_output();
  request.raw_scores = shared->raw_scores;
  request.stage_request.raw_scores = shared->raw_scores;
  request.stages = stages();
  request.sink = [done = std::move(done), fill](
                     absl::StatusOr<OutputRows> scores,
                     const PrefillOutcome& o) {
    if (!scores.ok()) {
      done(scores.status());
      return;
    }
    Result result;
    result.total_tokens = o.total_tokens;
    result.timings = o.timings;
    if (absl::Status s = fill(*scores, &result); !s.ok()) {
      done(s);
      return;
    }
    done(std::move(result));
  };
  return Admit(std::move(request));
}

absl::StatusOr<std::shared_ptr<RequestHandle>> PrefillEngine::SubmitClassify(
    ClassifyParams params, ResultCallback<ClassifyResult> done) {
  return SubmitScores<ClassifyParams, ClassifyResult>(
      Task::kClassify, std::move(params), std::move(done),
      &InputProcessor::ProcessClassify,
      [](const OutputRows& scores, ClassifyResult* result) {
        for (int64_t r = 0; r < scores.rows; ++r) {
          result->scores.push_back(scores.Row(r));
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<std::shared_ptr<RequestHandle>> PrefillEngine::SubmitRerank(
    RerankParams params, ResultCallback<RerankResult> done) {
  return SubmitScores<RerankParams, RerankResult>(
      Task::kRerank, std::move(params), std::move(done),
      &InputProcessor::ProcessRerank,
      [](const OutputRows& scores, RerankResult* result) {
        // A cross-encoder head has one logit: the relevance.
        if (scores.rows > 0 && scores.cols < 1) {
          return absl::InternalError("the model returned no score");
        }
        for (int64_t r = 0; r < scores.rows; ++r) {
          result->scores.push_back(
              scores.values[static_cast<size_t>(r * scores.cols)]);
        }
        return absl::OkStatus();
      });
}

}  // namespace inferd
