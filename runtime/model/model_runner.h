// ModelRunnerBase: runs one model on one device, step by step. It owns the
// model, the activation arena and (for causal_paged attention) the per-layer
// paged KV cache, turns a BatchPlan into the flat token batch plus attention
// metadata, runs the forward pass and returns what each sequence asked for.
// Device-specific runners (CpuModelRunner) subclass it for sizing and
// threads. CreateModelRunner() builds the right one.
// Not thread-safe: owned by one engine loop; Execute() calls must not
// overlap.
#ifndef INFERD_RUNTIME_MODEL_MODEL_RUNNER_H_
#define INFERD_RUNTIME_MODEL_MODEL_RUNNER_H_

#include <cstdint>
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
  // (Re)allocates num_blocks blocks of block_size tokens per layer, zeroed.
  // FAILED_PRECONDITION when the backend uses no cache.
  absl::Status AllocateKvCache(int64_t num_blocks, int block_size);
  // Blocks that fit in `bytes` (> 0) or else in `fraction` of the device's
  // free memory, after the activations of a `max_batched_tokens` step.
  virtual absl::StatusOr<int64_t> NumKvBlocksForMemory(
      double fraction, int64_t bytes, int block_size,
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

  Device* device() const { return device_; }

 protected:
  ModelRunnerBase() = default;
  // Loads the model described by `options` onto `device` (which must
  // outlive the runner).
  absl::Status Init(Device* device, const ModelRunnerOptions& options);
  // Frees the model, KV cache and activations; for subclasses that own the
  // device and must free them before it goes. The runner is unusable after.
  void ReleaseDeviceMemory();

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
  ForwardBatch batch_;
};

// Builds the runner for options.device (one registration line per device in
// model_runner.cc).
absl::StatusOr<std::unique_ptr<ModelRunnerBase>> CreateModelRunner(
    const ModelRunnerOptions& options);

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_MODEL_RUNNER_H_
