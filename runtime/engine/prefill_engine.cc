#include "runtime/engine/prefill_engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "runtime/common/status_macros.h"

namespace inferd {

PrefillEngine::PrefillEngine(PrefillEngineOptions options,
                             PrefillComponents components)
    : options_(std::move(options)),
      components_(std::move(components)),
      scheduler_(*components_.scheduler),
      front_(std::make_unique<AdmissionFront<PrepTask>>(
          options_.max_queue_requests, options_.prep_threads,
          FrontStages())) {}

AdmissionFront<PrefillEngine::PrepTask>::Stages PrefillEngine::FrontStages() {
  AdmissionFront<PrepTask>::Stages s;
  s.prepare = [this](PrepTask& task) -> absl::Status {
    ASSIGN_OR_RETURN(task.work, BuildWork(task));
    return absl::OkStatus();
  };
  s.dropped = [](const PrepTask& task) -> absl::Status {
    if (task.handle->aborted()) {
      return absl::CancelledError("the request was cancelled");
    }
    if (absl::Now() > task.deadline) {
      return absl::DeadlineExceededError(
          "the deadline passed while the request was queued");
    }
    return absl::OkStatus();
  };
  // Refused by the scheduler (e.g. --max-queue-tokens, or closed): the work
  // never ran, so its done was not called; `answer` gives the error.
  s.hand_off = [this](PrepTask& task) { return scheduler_.Submit(task.work); };
  s.answer = [](PrepTask& task, const absl::Status& why) {
    RequestTimings t;
    t.total_seconds = absl::ToDoubleSeconds(absl::Now() - task.arrival);
    task.finish(why, t, task.work != nullptr ? task.work->num_tokens() : 0);
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
  std::unique_ptr<PrefillEngine> e(
      new PrefillEngine(std::move(options), std::move(components)));
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
      "this model's workflow (", options_.workflow, ") cannot ",
      TaskName(task), "; it serves: ", absl::StrJoin(tasks, ", ")));
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
    PrepTask task) {
  task.handle = std::make_shared<RequestHandle>();
  task.arrival = absl::Now();
  std::shared_ptr<RequestHandle> handle = task.handle;
  RETURN_IF_ERROR(front_->Submit(std::move(task)));
  return handle;
}

absl::StatusOr<std::shared_ptr<PrefillWork>> PrefillEngine::BuildWork(
    const PrepTask& task) {
  const absl::Time tokenize_start = absl::Now();
  absl::StatusOr<std::vector<PrefillSequence>> seqs = task.tokenize();
  if (!seqs.ok()) return seqs.status();
  const double tokenization_seconds =
      absl::ToDoubleSeconds(absl::Now() - tokenize_start);

  auto work = std::make_shared<PrefillWork>();
  std::vector<OutputRequest> requests;
  for (const PrefillSequence& s : *seqs) {
    OutputRequest r;
    r.pool_start = s.pool_start;
    r.raw_scores = task.raw_scores;
    requests.push_back(r);
  }
  work->seqs = std::move(seqs).value();
  work->output = task.step_output.value_or(task.output->step_output());
  work->handle = task.handle;
  work->arrival = task.arrival;
  work->deadline = task.deadline;
  {
    absl::MutexLock lock(&work->mu);
    work->results.resize(work->seqs.size());
  }
  const int64_t tokens = work->num_tokens();
  PrefillWork* raw = work.get();
  work->done = [raw, output = task.output, requests = std::move(requests),
                inspect = task.inspect, finish = task.finish, tokens,
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
    if (!r.ok()) {
      finish(r.status(), t, tokens);
      return;
    }
    std::vector<std::vector<float>> out;
    out.reserve(r->size());
    for (size_t i = 0; i < r->size(); ++i) {
      if (inspect) {
        if (absl::Status s = inspect(i, raw->seqs[i], (*r)[i]); !s.ok()) {
          finish(s, t, tokens);
          return;
        }
      }
      absl::StatusOr<std::vector<float>> v = output->Process((*r)[i], requests[i]);
      if (!v.ok()) {
        finish(v.status(), t, tokens);
        return;
      }
      out.push_back(std::move(v).value());
    }
    finish(std::move(out), t, tokens);
  };
  return work;
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

absl::StatusOr<std::shared_ptr<RequestHandle>> PrefillEngine::SubmitEmbed(
    EmbedParams params, ResultCallback<EmbedResult> done) {
  RETURN_IF_ERROR(CheckTask(Task::kEmbed));
  if (params.dimensions > 0 && options_.embedding_dims > 0 &&
      params.dimensions > options_.embedding_dims) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dimensions: ", params.dimensions, " is larger than the model's ",
        options_.embedding_dims));
  }
  ASSIGN_OR_RETURN(const OutputProcessor* pooling,
                   ResolvePooling(params.pooling));
  RETURN_IF_ERROR(options_.m3.Check(params));
  EmbedOutputOptions o;
  o.normalize = params.normalize.value_or(options_.default_normalize);
  o.dimensions = params.dimensions;
  o.dense = &options_.dense;
  auto shared = std::make_shared<const EmbedParams>(std::move(params));
  // Sparse / multi-vector outputs: they need every token's hidden state.
  auto m3 = std::make_shared<M3Collector>(options_.m3, *shared, o.normalize);
  // Token counts per input, filled by the prep worker before the request
  // is queued (read by the finish callback after it).
  auto lengths = std::make_shared<std::vector<int32_t>>();
  PrepTask task;
  task.deadline = shared->deadline;
  task.output = pooling;
  if (m3->wanted()) {
    task.step_output = StepOutput::kHiddenStates;
    task.inspect = [m3](size_t i, const PrefillSequence& seq,
                        const SequenceResult& r) {
      return m3->Add(i, seq.ids, r);
    };
  }
  task.tokenize = [this, shared, lengths]()
      -> absl::StatusOr<std::vector<PrefillSequence>> {
    ASSIGN_OR_RETURN(std::vector<PrefillSequence> seqs,
                     components_.input->ProcessEmbed(*shared));
    for (const PrefillSequence& s : seqs) {
      lengths->push_back(static_cast<int32_t>(s.ids.size()));
    }
    return seqs;
  };
  task.finish = [o, lengths, m3, want_dense = shared->want_dense,
                 done = std::move(done)](
                    absl::StatusOr<std::vector<std::vector<float>>> pooled,
                    const RequestTimings& t, int64_t tokens) {
    if (!pooled.ok()) {
      done(pooled.status());
      return;
    }
    EmbedResult result;
    result.total_tokens = tokens;
    result.tokens = *lengths;
    result.timings = t;
    m3->MoveInto(&result);
    for (const std::vector<float>& p : *pooled) {
      if (!want_dense) {
        result.embeddings.emplace_back();
        continue;
      }
      absl::StatusOr<std::vector<float>> e = FinishEmbedding(p, o);
      if (!e.ok()) {
        done(e.status());
        return;
      }
      result.embeddings.push_back(std::move(e).value());
    }
    done(std::move(result));
  };
  return Admit(std::move(task));
}

template <typename Params, typename Result>
absl::StatusOr<std::shared_ptr<RequestHandle>> PrefillEngine::SubmitScores(
    Task kind, Params params, ResultCallback<Result> done,
    absl::StatusOr<std::vector<PrefillSequence>> (InputProcessor::*process)(
        const Params&) const,
    absl::Status (*fill)(std::vector<std::vector<float>> scores,
                         Result* result)) {
  RETURN_IF_ERROR(CheckTask(kind));
  auto shared = std::make_shared<const Params>(std::move(params));
  PrepTask task;
  task.deadline = shared->deadline;
  task.output = components_.output.get();
  task.raw_scores = shared->raw_scores;
  task.tokenize = [this, shared, process] {
    return (components_.input.get()->*process)(*shared);
  };
  task.finish =
      [done = std::move(done), fill](
          absl::StatusOr<std::vector<std::vector<float>>> scores,
          const RequestTimings& t, int64_t tokens) {
        if (!scores.ok()) {
          done(scores.status());
          return;
        }
        Result result;
        result.total_tokens = tokens;
        result.timings = t;
        const absl::Status filled = fill(std::move(scores).value(), &result);
        if (!filled.ok()) {
          done(filled);
          return;
        }
        done(std::move(result));
      };
  return Admit(std::move(task));
}

absl::StatusOr<std::shared_ptr<RequestHandle>> PrefillEngine::SubmitClassify(
    ClassifyParams params, ResultCallback<ClassifyResult> done) {
  return SubmitScores<ClassifyParams, ClassifyResult>(
      Task::kClassify, std::move(params), std::move(done),
      &InputProcessor::ProcessClassify,
      [](std::vector<std::vector<float>> scores, ClassifyResult* result) {
        result->scores = std::move(scores);
        return absl::OkStatus();
      });
}

absl::StatusOr<std::shared_ptr<RequestHandle>> PrefillEngine::SubmitRerank(
    RerankParams params, ResultCallback<RerankResult> done) {
  return SubmitScores<RerankParams, RerankResult>(
      Task::kRerank, std::move(params), std::move(done),
      &InputProcessor::ProcessRerank,
      [](std::vector<std::vector<float>> scores, RerankResult* result) {
        // A cross-encoder head has one logit: the relevance.
        for (const std::vector<float>& s : scores) {
          if (s.empty()) return absl::InternalError("the model returned no score");
          result->scores.push_back(s[0]);
        }
        return absl::OkStatus();
      });
}

}  // namespace inferd
