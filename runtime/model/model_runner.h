// ModelRunnerBase: runs one model on one device, step by step. It owns the
// model, the activation arena and (for causal_paged attention) the per-layer
// paged KV cache, turns a BatchPlan into the flat token batch plus attention
// metadata, runs the forward pass and returns what each sequence asked for.
// Device-specific runners subclass it for sizing and threads, each
// registered from its own file for its device kind (registry kind
// "model_runner"); CreateModelRunner() builds the right one.
// Not thread-safe: owned by one engine loop; Execute() calls must not
// overlap.
#ifndef INFERD_RUNTIME_MODEL_MODEL_RUNNER_H_
#define INFERD_RUNTIME_MODEL_MODEL_RUNNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "device/device.h"
#include "device/tensor.h"
#include "runtime/loader/model_config.h"
#include "runtime/loader/weights.h"
#include "runtime/model/attention_backend.h"
#include "runtime/model/batch_plan.h"
#include "runtime/model/forward_batch.h"
#include "runtime/model/model.h"
#include "runtime/model/workspace.h"

namespace inferd {

struct ModelRunnerOptions {
  // A Hugging Face model directory; read unless `config` and `weights` are
  // both given (a pre-opened ModelDirectory provides them).
  std::string model_dir;
  absl::optional<ModelConfig> config;
  std::shared_ptr<const WeightStore> weights;

  std::string device = "cpu";
  // Kernel threads; 0 = the device's shared instance (one per core on CPU).
  int threads = 0;
  // Compute dtype: F32, or BF16 (GEMM weights in BF16, F32 accumulation).
  DType dtype = DType::kF32;
  // KV cache dtype; default F32 for F32 compute, BF16 for BF16 compute.
  absl::optional<DType> kv_cache_dtype;
  // What block-quantized Linear weights do with their activations.
  ActivationPrecision activations = ActivationPrecision::kExact;
  // Decoders: run without the causal mask. Default: config "is_causal":
  // false asks for it, otherwise causal.
  absl::optional<bool> bidirectional;
  // A registered attention backend ("causal_paged", "causal_prefill",
  // "bidirectional_prefill", or one a plug-in adds); "auto" (or empty):
  // causal_paged for a causal LM, else a prefill backend with the model's
  // mask.
  std::string attention = "auto";
  // The registered model class (kind "model") to build; empty = the
  // config's architectures[0].
  std::string model_class;
};

// "float32"/"f32"/"fp32" -> F32, "bfloat16"/"bf16" -> BF16.
absl::StatusOr<DType> ParseComputeDType(absl::string_view name);

// How a runner's KV cache was sized (PlanKvCache), for logs and ModelInfo.
struct KvCachePlan {
  // Memory left for the process besides what it already uses: max(256 MiB,
  // 5% of the limit), for allocator slack, gRPC buffers, tokenizers and
  // requests in flight.
  static int64_t Headroom(int64_t limit_bytes);

  int64_t blocks = 0;
  int64_t block_bytes = 0;     // one block over all layers, K and V
  int64_t budget_bytes = 0;    // what the cache was allowed to take
  int64_t limit_bytes = 0;     // the memory limit found
  std::string limit_source;    // where it was found
  int64_t free_bytes = 0;      // what the process could still use
  // Subtracted from free_bytes before the fraction: memory-mapped weights,
  // other runners' KV caches, activations, headroom.
  int64_t mapped_weight_bytes = 0;
  int64_t other_kv_bytes = 0;
  int64_t activation_bytes = 0;
  int64_t headroom_bytes = 0;
  // free_bytes less the four above (never negative): what the fraction or
  // the absolute size is taken from.
  int64_t left_bytes = 0;
  double fraction = 0;         // 0 when an absolute size was given

  // One line: the budget and how it was computed (MiB), for logs and errors.
  std::string Describe() const;
};

// KV cache bytes the runners of this process hold (reserved, whether
// touched or not).
int64_t ProcessKvCacheBytes();

class ModelRunnerBase {
 public:
  virtual ~ModelRunnerBase();
  ModelRunnerBase(const ModelRunnerBase&) = delete;
  ModelRunnerBase& operator=(const ModelRunnerBase&) = delete;

  // Runs one step. Results come in plan order. INVALID_ARGUMENT for a plan
  // the model cannot run (empty sequence, id out of range, block table too
  // short, output the model has no head for, too many positions);
  // FAILED_PRECONDITION when causal_paged attention has no KV cache yet.
  absl::StatusOr<BatchResult> Execute(const BatchPlan& plan);

  // KV cache: bytes of one block over all layers (keys and values); 0 when
  // the backend uses no cache.
  int64_t KvCacheBytesPerBlock(int block_size) const;
  // (Re)allocates num_blocks blocks of block_size tokens per layer, zeroed
  // and committed lazily (Device::AllocateZeroed): a block costs resident
  // memory once a sequence first writes it, not at load.
  // FAILED_PRECONDITION when the backend uses no cache.
  absl::Status AllocateKvCache(int64_t num_blocks, int block_size);
  // Sizes the KV cache: `bytes` (> 0) or else `fraction` of the memory
  // budget. The budget is what the device says the process may still use
  // (the cgroup limit minus its usage, or MemAvailable) minus memory-mapped
  // weights (page cache counts as available until touched), the KV caches
  // other runners of this process reserved (committed lazily, so not in the
  // usage yet), the activations of a `max_batched_tokens` step and
  // KvCachePlan::kHeadroom. RESOURCE_EXHAUSTED when not one block fits, or
  // when `bytes` exceeds what is left.
  absl::StatusOr<KvCachePlan> PlanKvCache(double fraction, int64_t bytes,
                                          int block_size,
                                          int64_t max_batched_tokens) const;
  // An upper estimate of the activation arena for a step of `tokens` tokens
  // of which `sampled` ask for LM logits.
  int64_t EstimateActivationBytes(int64_t tokens, int64_t sampled) const;

  bool uses_kv_cache() const { return backend_->uses_kv_cache(); }
  int64_t kv_cache_num_blocks() const { return kv_views_.num_blocks; }
  int kv_cache_block_size() const { return kv_views_.block_size; }
  DType kv_cache_dtype() const { return kv_dtype_; }
  // The attention backend's registered name.
  absl::string_view attention_backend() const { return backend_->name(); }

  // Model metadata.
  const ModelInfo& info() const { return model_->info(); }
  int64_t hidden_size() const { return info().hidden_size; }
  int64_t vocab_size() const { return info().vocab_size; }
  int64_t num_labels() const { return info().num_labels; }
  // Longest sequence the model's position table allows.
  int64_t max_positions() const { return info().max_positions; }
  DType compute_dtype() const { return compute_dtype_; }

  // Memory accounting (bytes).
  int64_t weight_bytes_allocated() const {
    return model_->weight_bytes_allocated();
  }
  int64_t weight_bytes_mapped() const { return model_->weight_bytes_mapped(); }
  int64_t activation_bytes() const { return workspace_->bytes_allocated(); }
  int64_t kv_cache_bytes() const;
  // The part of the KV cache committed so far (blocks sequences have
  // written). Thread-safe once the cache is allocated.
  int64_t kv_cache_resident_bytes() const;

  Device* device() const { return device_; }

 protected:
  ModelRunnerBase() = default;
  // Loads the model described by `options` onto `device` (which must
  // outlive the runner).
  absl::Status Init(Device* device, const ModelRunnerOptions& options);
  // Frees the model, KV cache and activations; for subclasses that own the
  // device and must free them before it goes. The runner is unusable after.
  void ReleaseDeviceMemory();
  // Frees the KV cache and takes it out of ProcessKvCacheBytes().
  void ReleaseKvCache();

 private:
  // Fills the host metadata arrays and batch_ from `plan`.
  absl::Status BuildBatch(const BatchPlan& plan);
  // Rows `rows` of `hidden` -> gathered [rows.size(), H] (kGather slot).
  absl::StatusOr<TensorView> GatherRows(const ExecutionContext& ctx,
                                        const TensorView& hidden,
                                        const std::vector<int32_t>& rows);

  Device* device_ = nullptr;
  std::shared_ptr<const WeightStore> weights_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Workspace> workspace_;
  std::unique_ptr<AttentionBackend> backend_;
  DType compute_dtype_ = DType::kF32;
  ActivationPrecision activations_ = ActivationPrecision::kExact;
  DType kv_dtype_ = DType::kF32;

  // KV cache (causal_paged).
  std::vector<DeviceBuffer> kv_buffers_;
  KvCacheViews kv_views_;

  // Per-step metadata; members so their capacity is reused across steps.
  std::vector<int32_t> ids_;
  std::vector<int32_t> positions_;
  std::vector<int32_t> rope_positions_;
  std::vector<int32_t> token_types_;
  std::vector<int32_t> cu_seqlens_;
  std::vector<int32_t> slot_mapping_;
  std::vector<int32_t> seq_lens_;
  std::vector<int32_t> block_tables_;
  std::vector<int32_t> gather_rows_;
  std::vector<int32_t> gather_ids_;
  // kMeanHiddenState: each pooled sequence's row range in the batch.
  std::vector<int32_t> pool_starts_;
  std::vector<int32_t> pool_ends_;
  ForwardBatch batch_;
};

// The registry value of kind "model_runner" (runtime/common/registry.h),
// named by device kind: builds that device's runner.
using ModelRunnerFactory =
    std::function<absl::StatusOr<std::unique_ptr<ModelRunnerBase>>(
        const ModelRunnerOptions& options)>;

// The model_runner kind's registry (device kind -> runner factory). Each
// built-in runner registers itself from its own file (RegisterCpuModelRunner),
// called once by RegisterModelBuiltins.
Registry<ModelRunnerFactory>& ModelRunners();

// Builds the runner registered for options.device's kind (the part before
// any ':'); NOT_FOUND when there is none.
absl::StatusOr<std::unique_ptr<ModelRunnerBase>> CreateModelRunner(
    const ModelRunnerOptions& options);

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_MODEL_RUNNER_H_
