// Metrics: every Prometheus metric inferd exports, in one object. Request
// outcomes arrive through the RpcObserver hooks, engine steps through
// per-model StepObservers, and engine state (queue, running, KV cache,
// prefix cache, preemptions, model state) is read from the engines when
// /metrics is scraped. Names and labels are documented in docs/metrics.md.
// Thread-safe.
#ifndef INFERD_SERVICE_METRICS_H_
#define INFERD_SERVICE_METRICS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/model_manager.h"
#include "service/request/request_layer.h"

namespace inferd {

class Metrics final : public RpcObserver {
 public:
  // `models` is read at scrape time; `in_flight` (may be empty) returns the
  // number of inferd.v1 calls in flight. Both must outlive this object.
  Metrics(const ModelManager* models, std::function<int64_t()> in_flight);
  ~Metrics() override;

  // Serves the metrics over HTTP at http://`listen`/metrics (port 0: any
  // free port, see port()). UNAVAILABLE when the address cannot be bound.
  absl::Status Serve(const std::string& listen);
  // Stops the HTTP endpoint (idempotent).
  void StopServing();
  // The bound port; 0 when not serving.
  int port() const;

  // The Prometheus text exposition of every metric (what /metrics serves).
  std::string Render() const;

  // The step observer of `model`: owned here, lives as long as this object.
  StepObserver* StepObserverFor(const std::string& model);

  // A model's load ended (READY / FAILED) or it was unloaded (UNLOADED).
  void OnModelChange(const ServedModelInfo& info);

  // RpcObserver.
  void OnRpcDone(absl::string_view rpc, absl::string_view model,
                 const absl::Status& status, double seconds) override;
  void OnGenerateDone(absl::string_view model, const GenerateChunk& final_chunk,
                      absl::Span<const double> inter_token_seconds) override;
  void OnPrefillDone(absl::string_view task, absl::string_view model,
                     int64_t inputs, int64_t tokens,
                     const RequestTimings& timings) override;

 private:
  class EngineCollector;
  class ModelStepObserver;

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<EngineCollector> engine_collector_;

  // Model loads and unloads.
  prometheus::Family<prometheus::Counter>& model_loads_;
  prometheus::Family<prometheus::Counter>& model_unloads_;
  prometheus::Family<prometheus::Histogram>& model_load_duration_;
  // RPCs.
  prometheus::Family<prometheus::Counter>& rpc_requests_;
  prometheus::Family<prometheus::Histogram>& rpc_duration_;
  // Generation.
  prometheus::Family<prometheus::Counter>& request_success_;
  prometheus::Family<prometheus::Counter>& prompt_tokens_;
  prometheus::Family<prometheus::Counter>& generation_tokens_;
  prometheus::Family<prometheus::Histogram>& request_prompt_tokens_;
  prometheus::Family<prometheus::Histogram>& request_generation_tokens_;
  prometheus::Family<prometheus::Histogram>& time_to_first_token_;
  prometheus::Family<prometheus::Histogram>& time_per_output_token_;
  prometheus::Family<prometheus::Histogram>& e2e_latency_;
  prometheus::Family<prometheus::Histogram>& queue_time_;
  // Engine steps.
  prometheus::Family<prometheus::Histogram>& iteration_batch_size_;
  prometheus::Family<prometheus::Histogram>& iteration_tokens_;
  prometheus::Family<prometheus::Histogram>& iteration_prefill_tokens_;
  prometheus::Family<prometheus::Histogram>& iteration_decode_tokens_;
  prometheus::Family<prometheus::Histogram>& iteration_seconds_;
  // Embed / rerank / classify.
  prometheus::Family<prometheus::Counter>& embed_requests_;
  prometheus::Family<prometheus::Counter>& embed_inputs_;
  prometheus::Family<prometheus::Counter>& embed_tokens_;
  prometheus::Family<prometheus::Histogram>& embed_duration_;
  prometheus::Family<prometheus::Histogram>& embed_tokenization_;
  prometheus::Family<prometheus::Histogram>& embed_inference_;

  mutable absl::Mutex mu_;
  std::unique_ptr<prometheus::Exposer> exposer_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<ModelStepObserver>> step_observers_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace inferd

#endif  // INFERD_SERVICE_METRICS_H_
