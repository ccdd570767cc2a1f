#include "service/metrics.h"

#include <algorithm>
#include <exception>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/support/status.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"
#include "runtime/gen/sampling_params.h"

namespace inferd {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildHistogram;
using prometheus::ClientMetric;
using prometheus::Histogram;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Latency buckets from 1 ms (tiny models on CPU) to minutes (long
// generations), close to vLLM's so dashboards carry over.
const Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,  0.25, 0.5,  0.75, 1.0,
      1.5,   2.0,    2.5,   5.0,  10.0,  15.0, 20.0, 30.0, 60.0, 120.0};
  return *b;
}

const Histogram::BucketBoundaries& TtftBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
      0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
  return *b;
}

const Histogram::BucketBoundaries& TpotBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
      0.15,  0.2,    0.3,   0.4,  0.5,   0.75, 1.0,   2.5};
  return *b;
}

const Histogram::BucketBoundaries& TokenCountBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000};
  return *b;
}

const Histogram::BucketBoundaries& BatchSizeBuckets() {
  static const auto* b =
      new Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  return *b;
}

const Histogram::BucketBoundaries& StepTokenBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  return *b;
}

// Prefill / decode tokens of one step; 0 (none of that kind) is a bucket
// of its own.
const Histogram::BucketBoundaries& StepSplitBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
  return *b;
}

// The code's name as gRPC spells it (absl's codes are gRPC's).
std::string CodeName(absl::StatusCode code) {
  std::string name = absl::StatusCodeToString(code);
  return name.empty() ? "UNKNOWN" : name;
}

// Observes `values` into `h` with one lock (ObserveMultiple).
void ObserveAll(Histogram& h, const Histogram::BucketBoundaries& bounds,
                absl::Span<const double> values) {
  if (values.empty()) return;
  std::vector<double> increments(bounds.size() + 1, 0.0);
  double sum = 0;
  for (double v : values) {
    const size_t i = static_cast<size_t>(
        std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin());
    increments[i] += 1;
    sum += v;
  }
  h.ObserveMultiple(increments, sum);
}

MetricFamily NewFamily(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

void AddValue(MetricFamily* f, std::vector<ClientMetric::Label> labels,
              double value) {
  ClientMetric m;
  m.label = std::move(labels);
  if (f->type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f->metric.push_back(std::move(m));
}

}  // namespace

// The engine-state families of one scrape (engine and model state read
// when /metrics is scraped, so gauges are never stale and counters equal
// the engines' own totals).
struct EngineFamilies {
  MetricFamily running = NewFamily(
      "inferd_num_requests_running",
      "Requests the engine is running (scheduled in the current batch).",
      MetricType::Gauge);
  MetricFamily waiting = NewFamily(
      "inferd_num_requests_waiting",
      "Requests queued in the engine, not yet scheduled.", MetricType::Gauge);
  MetricFamily kv_usage =
      NewFamily("inferd_kv_cache_usage_perc",
                "Fraction of KV cache blocks in use (0 to 1; 1 = full).",
                MetricType::Gauge);
  MetricFamily kv_blocks =
      NewFamily("inferd_kv_cache_blocks", "KV cache blocks of the model.",
                MetricType::Gauge);
  MetricFamily kv_bytes = NewFamily(
      "inferd_kv_cache_bytes",
      "KV cache memory of the model: reserved, and resident (committed "
      "as blocks are first written).",
      MetricType::Gauge);
  MetricFamily prefix_queries = NewFamily(
      "inferd_prefix_cache_queries_total",
      "Prompt tokens looked up in the prefix cache.", MetricType::Counter);
  MetricFamily prefix_hits = NewFamily(
      "inferd_prefix_cache_hits_total",
      "Prompt tokens found in the prefix cache.", MetricType::Counter);
  MetricFamily preemptions =
      NewFamily("inferd_num_preemptions_total",
                "Sequences preempted (KV cache full; recomputed later).",
                MetricType::Counter);
  MetricFamily spec_drafts =
      NewFamily("inferd_spec_decode_draft_tokens_total",
                "Speculative decoding: prompt-lookup draft tokens verified.",
                MetricType::Counter);
  MetricFamily spec_accepted = NewFamily(
      "inferd_spec_decode_accepted_tokens_total",
      "Speculative decoding: draft tokens accepted (each saved a forward "
      "pass).",
      MetricType::Counter);
  MetricFamily forward_passes = NewFamily(
      "inferd_model_forward_passes_total",
      "Forward passes (engine steps) the model ran.", MetricType::Counter);
  MetricFamily batched_tokens = NewFamily(
      "inferd_batched_tokens_total",
      "Tokens processed across every forward pass.", MetricType::Counter);
  MetricFamily state = NewFamily(
      "inferd_model_state",
      "1 for the model's current state (loading, ready, failed, unloaded, "
      "unloading), else 0.",
      MetricType::Gauge);
  MetricFamily download_bytes = NewFamily(
      "inferd_model_download_bytes",
      "A Hugging Face Hub download of the model: bytes fetched (state=done) "
      "and to fetch (state=total).",
      MetricType::Gauge);
  MetricFamily active = NewFamily(
      "inferd_model_active_requests",
      "Requests holding the model (an unload waits for them).",
      MetricType::Gauge);
  MetricFamily load_seconds = NewFamily(
      "inferd_model_load_seconds",
      "Wall time the model took to load (tokenizer, weights, engine).",
      MetricType::Gauge);
  MetricFamily weight_bytes = NewFamily(
      "inferd_model_weight_bytes",
      "Bytes of the model's weight files (memory-mapped).", MetricType::Gauge);
  // The model-server protocol of the Gateway API Inference Extension:
  // its endpoint picker reads these names (vLLM's) by default to route
  // by queue depth, KV cache use and prefix affinity. Same values as the
  // inferd_ gauges above; label model_name.
  MetricFamily gie_waiting = NewFamily(
      "vllm:num_requests_waiting",
      "Requests queued in the engine (= inferd_num_requests_waiting), for "
      "the inference gateway's endpoint picker.",
      MetricType::Gauge);
  MetricFamily gie_running = NewFamily(
      "vllm:num_requests_running",
      "Requests the engine is running (= inferd_num_requests_running), for "
      "the inference gateway's endpoint picker.",
      MetricType::Gauge);
  MetricFamily gie_kv_usage = NewFamily(
      "vllm:kv_cache_usage_perc",
      "Fraction of KV cache blocks in use, 0 to 1 (= "
      "inferd_kv_cache_usage_perc; 0 for models without a KV cache), for "
      "the inference gateway's endpoint picker.",
      MetricType::Gauge);
  MetricFamily gie_cache_config = NewFamily(
      "vllm:cache_config_info",
      "1, labelled with the KV cache's block_size (tokens) and "
      "num_gpu_blocks (blocks), for the inference gateway's prefix-cache "
      "scorer.",
      MetricType::Gauge);

  // Adds the values of one model.
  // `m`: the model when READY, else null.
  void AddModel(const ServedModelInfo& info, const ServedModel* m) {
    std::vector<ClientMetric::Label> model = {{"model", info.name}};
    for (ModelState s :
         {ModelState::kLoading, ModelState::kReady, ModelState::kFailed,
          ModelState::kUnloaded, ModelState::kUnloading}) {
      AddValue(&state,
               {{"model", info.name}, {"state", ModelStateName(s)}},
               info.state == s ? 1 : 0);
    }
    if (info.download_bytes_total > 0) {
      AddValue(&download_bytes, {{"model", info.name}, {"state", "done"}},
               static_cast<double>(info.download_bytes_done));
      AddValue(&download_bytes, {{"model", info.name}, {"state", "total"}},
               static_cast<double>(info.download_bytes_total));
    }
    if (info.state != ModelState::kReady || m == nullptr) return;
    AddValue(&active, model, static_cast<double>(info.active_requests));
    AddValue(&load_seconds, model, info.load_seconds);
    AddValue(&weight_bytes, model, static_cast<double>(info.weight_bytes));
    const EngineStats st = m->engine().Stats();
    AddValue(&running, model, static_cast<double>(st.running_requests));
    AddValue(&waiting, model, static_cast<double>(st.waiting_requests));
    const std::vector<ClientMetric::Label> model_name = {
        {"model_name", info.name}};
    AddValue(&gie_running, model_name,
             static_cast<double>(st.running_requests));
    AddValue(&gie_waiting, model_name,
             static_cast<double>(st.waiting_requests));
    AddValue(&gie_kv_usage, model_name,
             st.kv_blocks_total > 0
                 ? 1.0 - static_cast<double>(st.kv_blocks_free) /
                             static_cast<double>(st.kv_blocks_total)
                 : 0.0);
    const Engine::KvCacheSummary& kv = m->engine().kv_cache_summary();
    if (kv.blocks > 0) {
      AddValue(&gie_cache_config,
               {{"model_name", info.name},
                {"block_size", std::to_string(kv.block_size)},
                {"num_gpu_blocks", std::to_string(kv.blocks)}},
               1);
    }
    AddValue(&forward_passes, model, static_cast<double>(st.model_calls));
    AddValue(&batched_tokens, model, static_cast<double>(st.batched_tokens));
    if (st.kv_blocks_total > 0) {
      AddValue(&kv_usage, model,
               1.0 - static_cast<double>(st.kv_blocks_free) /
                         static_cast<double>(st.kv_blocks_total));
      AddValue(&kv_blocks, {{"model", info.name}, {"state", "free"}},
               static_cast<double>(st.kv_blocks_free));
      AddValue(&kv_blocks, {{"model", info.name}, {"state", "used"}},
               static_cast<double>(st.kv_blocks_total - st.kv_blocks_free));
      AddValue(&kv_bytes, {{"model", info.name}, {"state", "reserved"}},
               static_cast<double>(st.kv_cache_bytes));
      AddValue(&kv_bytes, {{"model", info.name}, {"state", "resident"}},
               static_cast<double>(st.kv_cache_resident_bytes));
      AddValue(&prefix_queries, model,
               static_cast<double>(st.prefix_cache_queries));
      AddValue(&prefix_hits, model, static_cast<double>(st.prefix_cache_hits));
      AddValue(&preemptions, model, static_cast<double>(st.preemptions));
      AddValue(&spec_drafts, model, static_cast<double>(st.spec_draft_tokens));
      AddValue(&spec_accepted, model,
               static_cast<double>(st.spec_accepted_tokens));
    }
  }

  // The families that got values, in a fixed order.
  std::vector<MetricFamily> Take() {
    std::vector<MetricFamily> out;
    for (MetricFamily* f :
         {&running, &waiting, &kv_usage, &kv_blocks, &kv_bytes, &prefix_queries,
          &prefix_hits, &preemptions, &spec_drafts, &spec_accepted,
          &forward_passes, &batched_tokens, &state, &download_bytes, &active,
          &load_seconds,
          &weight_bytes, &gie_waiting, &gie_running, &gie_kv_usage,
          &gie_cache_config}) {
      if (!f->metric.empty()) out.push_back(std::move(*f));
    }
    return out;
  }
};

class Metrics::EngineCollector : public prometheus::Collectable {
 public:
  EngineCollector(const ModelManager* models,
                  std::function<int64_t()> in_flight)
      : models_(models), in_flight_(std::move(in_flight)) {}

  std::vector<MetricFamily> Collect() const override {
    EngineFamilies f;
    const std::vector<std::shared_ptr<ServedModel>> loaded = models_->Loaded();
    for (const ServedModelInfo& info : models_->List()) {
      const ServedModel* model = nullptr;
      for (const auto& m : loaded) {
        if (m->name() == info.name) model = m.get();
      }
      f.AddModel(info, model);
    }
    std::vector<MetricFamily> out = f.Take();
    if (in_flight_) {
      MetricFamily rpcs =
          NewFamily("inferd_rpc_in_flight", "inferd.v1 calls in flight.",
                    MetricType::Gauge);
      AddValue(&rpcs, {}, static_cast<double>(in_flight_()));
      out.push_back(std::move(rpcs));
    }
    return out;
  }

 private:
  const ModelManager* models_;
  std::function<int64_t()> in_flight_;
};

class Metrics::ModelStepObserver : public StepObserver {
 public:
  ModelStepObserver(Histogram& batch_size, Histogram& tokens,
                    Histogram& prefill_tokens, Histogram& decode_tokens,
                    Histogram& seconds)
      : batch_size_(batch_size),
        tokens_(tokens),
        prefill_tokens_(prefill_tokens),
        decode_tokens_(decode_tokens),
        seconds_(seconds) {}
  void OnStep(const StepInfo& step) override {
    batch_size_.Observe(static_cast<double>(step.num_seqs));
    tokens_.Observe(static_cast<double>(step.num_tokens));
    // Generation steps tell prompt from decode tokens.
    if (step.num_prefill_tokens + step.num_decode_tokens > 0) {
      prefill_tokens_.Observe(static_cast<double>(step.num_prefill_tokens));
      decode_tokens_.Observe(static_cast<double>(step.num_decode_tokens));
    }
    if (step.seconds > 0) seconds_.Observe(step.seconds);
  }

 private:
  Histogram& batch_size_;
  Histogram& tokens_;
  Histogram& prefill_tokens_;
  Histogram& decode_tokens_;
  Histogram& seconds_;
};

Metrics::Metrics(const ModelManager* models, std::function<int64_t()> in_flight)
    : registry_(std::make_shared<prometheus::Registry>()),
      engine_collector_(
          std::make_shared<EngineCollector>(models, std::move(in_flight))),
      model_loads_(BuildCounter()
                       .Name("inferd_model_loads_total")
                       .Help("Model loads (at start and while serving) by "
                             "model and result (ready, failed).")
                       .Register(*registry_)),
      model_unloads_(BuildCounter()
                         .Name("inferd_model_unloads_total")
                         .Help("Model unloads (UnloadModel, keep_alive, "
                               "--max-loaded-models) by model.")
                         .Register(*registry_)),
      model_load_duration_(BuildHistogram()
                               .Name("inferd_model_load_duration_seconds")
                               .Help("Wall time of successful model loads "
                                     "(tokenizer, weights, engine; not the "
                                     "download).")
                               .Register(*registry_)),
      rpc_requests_(BuildCounter()
                        .Name("inferd_rpc_requests_total")
                        .Help("inferd.v1 calls by RPC, model and gRPC status "
                              "code.")
                        .Register(*registry_)),
      rpc_duration_(BuildHistogram()
                        .Name("inferd_rpc_duration_seconds")
                        .Help("Duration of inferd.v1 calls, from the handler "
                              "to the final status.")
                        .Register(*registry_)),
      request_success_(BuildCounter()
                           .Name("inferd_request_success_total")
                           .Help("Generations that reached a final chunk, by "
                                 "finish reason.")
                           .Register(*registry_)),
      prompt_tokens_(BuildCounter()
                         .Name("inferd_prompt_tokens_total")
                         .Help("Prompt tokens of finished generations.")
                         .Register(*registry_)),
      generation_tokens_(BuildCounter()
                             .Name("inferd_generation_tokens_total")
                             .Help("Tokens generated by finished generations.")
                             .Register(*registry_)),
      request_prompt_tokens_(BuildHistogram()
                                 .Name("inferd_request_prompt_tokens")
                                 .Help("Prompt tokens per generation.")
                                 .Register(*registry_)),
      request_generation_tokens_(BuildHistogram()
                                     .Name("inferd_request_generation_tokens")
                                     .Help("Generated tokens per generation.")
                                     .Register(*registry_)),
      time_to_first_token_(BuildHistogram()
                               .Name("inferd_time_to_first_token_seconds")
                               .Help("Arrival to first generated token.")
                               .Register(*registry_)),
      time_per_output_token_(BuildHistogram()
                                 .Name("inferd_time_per_output_token_seconds")
                                 .Help("Time between consecutive generated "
                                       "tokens of a sequence.")
                                 .Register(*registry_)),
      e2e_latency_(BuildHistogram()
                       .Name("inferd_e2e_request_latency_seconds")
                       .Help("Arrival to final token of a generation.")
                       .Register(*registry_)),
      queue_time_(BuildHistogram()
                      .Name("inferd_request_queue_time_seconds")
                      .Help("Arrival to first scheduled, every request kind.")
                      .Register(*registry_)),
      iteration_batch_size_(BuildHistogram()
                                .Name("inferd_iteration_batch_size")
                                .Help("Sequences per engine step.")
                                .Register(*registry_)),
      iteration_tokens_(BuildHistogram()
                            .Name("inferd_iteration_tokens")
                            .Help("Tokens per engine step (forward pass).")
                            .Register(*registry_)),
      iteration_prefill_tokens_(
          BuildHistogram()
              .Name("inferd_iteration_prefill_tokens")
              .Help("Prompt (prefill) tokens per generation engine step, "
                    "recomputation after preemption included.")
              .Register(*registry_)),
      iteration_decode_tokens_(
          BuildHistogram()
              .Name("inferd_iteration_decode_tokens")
              .Help("Decode tokens (= decoding sequences) per generation "
                    "engine step.")
              .Register(*registry_)),
      iteration_seconds_(BuildHistogram()
                             .Name("inferd_iteration_duration_seconds")
                             .Help("Wall time of a generation engine step: "
                                   "scheduling, forward pass, sampling.")
                             .Register(*registry_)),
      embed_requests_(BuildCounter()
                          .Name("inferd_embed_request_count")
                          .Help("Successful embed / rerank / classify "
                                "requests.")
                          .Register(*registry_)),
      embed_inputs_(BuildCounter()
                        .Name("inferd_embed_input_count")
                        .Help("Inputs (texts, documents, pairs) of successful "
                              "embed / rerank / classify requests.")
                        .Register(*registry_)),
      embed_tokens_(BuildCounter()
                        .Name("inferd_embed_token_count")
                        .Help("Tokens of successful embed / rerank / classify "
                              "requests.")
                        .Register(*registry_)),
      embed_duration_(BuildHistogram()
                          .Name("inferd_embed_request_duration_seconds")
                          .Help("Arrival to answer of embed / rerank / "
                                "classify requests (tokenization excluded).")
                          .Register(*registry_)),
      embed_tokenization_(
          BuildHistogram()
              .Name("inferd_embed_tokenization_duration_seconds")
              .Help("Tokenization time of embed / rerank / "
                    "classify requests.")
              .Register(*registry_)),
      embed_inference_(BuildHistogram()
                           .Name("inferd_embed_inference_duration_seconds")
                           .Help("First scheduled to answer (forward passes "
                                 "and pooling) of embed / rerank / classify "
                                 "requests.")
                           .Register(*registry_)) {}

Metrics::~Metrics() { StopServing(); }

absl::Status Metrics::Serve(const std::string& listen) {
  absl::MutexLock lock(&mu_);
  if (exposer_ != nullptr) return absl::OkStatus();
  try {
    // Civetweb wants "host:port"; one thread per concurrent scrape.
    exposer_ = std::make_unique<prometheus::Exposer>(listen, 2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("--metrics-listen=", listen, ": cannot serve metrics (",
                     e.what(), "); is the port in use?"));
  }
  exposer_->RegisterCollectable(registry_);
  exposer_->RegisterCollectable(engine_collector_);
  return absl::OkStatus();
}

void Metrics::StopServing() {
  std::unique_ptr<prometheus::Exposer> exposer;
  {
    absl::MutexLock lock(&mu_);
    exposer = std::move(exposer_);
  }
  exposer.reset();  // joins the HTTP threads, without mu_ held
}

int Metrics::port() const {
  absl::MutexLock lock(&mu_);
  if (exposer_ == nullptr) return 0;
  std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports[0];
}

std::string Metrics::Render() const {
  std::vector<MetricFamily> families = registry_->Collect();
  for (MetricFamily& f : engine_collector_->Collect()) {
    families.push_back(std::move(f));
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

void Metrics::OnModelChange(const ServedModelInfo& info) {
  switch (info.state) {
    case ModelState::kReady:
      model_loads_.Add({{"model", info.name}, {"result", "ready"}}).Increment();
      model_load_duration_
          .Add({{"model", info.name}},
               Histogram::BucketBoundaries{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
                                           60, 120, 300})
          .Observe(info.load_seconds);
      break;
    case ModelState::kFailed:
      model_loads_.Add({{"model", info.name}, {"result", "failed"}})
          .Increment();
      break;
    case ModelState::kUnloaded:
      model_unloads_.Add({{"model", info.name}}).Increment();
      break;
    default:
      break;
  }
}

StepObserver* Metrics::StepObserverFor(const std::string& model) {
  absl::MutexLock lock(&mu_);
  auto& slot = step_observers_[model];
  if (slot == nullptr) {
    slot = std::make_unique<ModelStepObserver>(
        iteration_batch_size_.Add({{"model", model}}, BatchSizeBuckets()),
        iteration_tokens_.Add({{"model", model}}, StepTokenBuckets()),
        iteration_prefill_tokens_.Add({{"model", model}}, StepSplitBuckets()),
        iteration_decode_tokens_.Add({{"model", model}}, StepSplitBuckets()),
        iteration_seconds_.Add({{"model", model}}, LatencyBuckets()));
  }
  return slot.get();
}

void Metrics::OnRpcDone(absl::string_view rpc, absl::string_view model,
                        const absl::Status& status, double seconds) {
  const std::string r(rpc);
  const std::string m(model);
  rpc_requests_
      .Add({{"rpc", r},
            {"model", m},
            {"code", CodeName(status.code())}})
      .Increment();
  rpc_duration_.Add({{"rpc", r}, {"model", m}}, LatencyBuckets())
      .Observe(seconds);
}

void Metrics::OnGenerateDone(absl::string_view model,
                             const GenerateChunk& final_chunk,
                             absl::Span<const double> inter_token_seconds) {
  const std::string m(model);
  const prometheus::Labels labels = {{"model", m}};
  const RequestTimings& t = final_chunk.timings;
  request_success_
      .Add({{"model", m},
            {"finished_reason",
             std::string(FinishReasonName(final_chunk.finish))}})
      .Increment();
  prompt_tokens_.Add(labels).Increment(
      static_cast<double>(final_chunk.usage.prompt_tokens));
  generation_tokens_.Add(labels).Increment(
      static_cast<double>(final_chunk.usage.completion_tokens));
  request_prompt_tokens_.Add(labels, TokenCountBuckets())
      .Observe(static_cast<double>(final_chunk.usage.prompt_tokens));
  request_generation_tokens_.Add(labels, TokenCountBuckets())
      .Observe(static_cast<double>(final_chunk.usage.completion_tokens));
  if (final_chunk.usage.completion_tokens > 0) {
    // A generation that never got scheduled (cancelled while queued) has
    // no first token and no queue time.
    time_to_first_token_.Add(labels, TtftBuckets())
        .Observe(t.time_to_first_token_seconds);
    queue_time_.Add(labels, LatencyBuckets()).Observe(t.queue_seconds);
  }
  e2e_latency_.Add(labels, LatencyBuckets()).Observe(t.total_seconds);
  ObserveAll(time_per_output_token_.Add(labels, TpotBuckets()), TpotBuckets(),
             inter_token_seconds);
}

void Metrics::OnPrefillDone(absl::string_view task, absl::string_view model,
                            int64_t inputs, int64_t tokens,
                            const RequestTimings& timings) {
  const prometheus::Labels labels = {{"model", std::string(model)},
                                     {"task", std::string(task)}};
  embed_requests_.Add(labels).Increment();
  embed_inputs_.Add(labels).Increment(static_cast<double>(inputs));
  embed_tokens_.Add(labels).Increment(static_cast<double>(tokens));
  embed_duration_.Add(labels, LatencyBuckets()).Observe(timings.total_seconds);
  embed_tokenization_.Add(labels, LatencyBuckets())
      .Observe(timings.tokenization_seconds);
  embed_inference_.Add(labels, LatencyBuckets())
      .Observe(timings.inference_seconds);
  queue_time_.Add({{"model", std::string(model)}}, LatencyBuckets())
      .Observe(timings.queue_seconds);
}

}  // namespace inferd
