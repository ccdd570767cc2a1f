#include "runtime/model/model_runner.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/registry.h"
#include "runtime/common/status_macros.h"
#include "runtime/loader/model_dir.h"
#include "runtime/model/model_registry.h"

namespace inferd {
namespace {

TensorView I32View(std::vector<int32_t>& v) {
  return TensorView::Contiguous(v.data(), DType::kI32,
                                {static_cast<int64_t>(v.size())});
}

}  // namespace

absl::StatusOr<DType> ParseComputeDType(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "float32" || n == "f32" || n == "fp32") return DType::kF32;
  if (n == "bfloat16" || n == "bf16") return DType::kBF16;
  // Weights quantized at load; activations stay float32.
  if (n == "q8_0") return DType::kQ8_0;
  if (n == "q4_0") return DType::kQ4_0;
  if (n == "q4_1") return DType::kQ4_1;
  // Encoders: int8 weights (Q8_0: a scale per block of 32 inputs) and, where
  // the CPU has AVX512_VNNI, int8 activations per block of 32 for prefill.
  if (n == "int8") return DType::kI8;
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported compute dtype \"", name,
                   "\" (float32, bfloat16, q8_0, q4_0, q4_1 or int8)"));
}

namespace {
std::atomic<int64_t> process_kv_bytes{0};
}  // namespace

int64_t ProcessKvCacheBytes() {
  return process_kv_bytes.load(std::memory_order_relaxed);
}

int64_t KvCachePlan::Headroom(int64_t limit_bytes) {
  return std::max<int64_t>(int64_t{256} << 20, limit_bytes / 20);
}

ModelRunnerBase::~ModelRunnerBase() { ReleaseDeviceMemory(); }

void ModelRunnerBase::ReleaseKvCache() {
  process_kv_bytes.fetch_sub(kv_cache_bytes(), std::memory_order_relaxed);
  kv_views_ = KvCacheViews();
  kv_buffers_.clear();
}

void ModelRunnerBase::ReleaseDeviceMemory() {
  backend_.reset();
  ReleaseKvCache();
  workspace_.reset();
  model_.reset();
}

absl::Status ModelRunnerBase::Init(Device* device,
                                   const ModelRunnerOptions& options) {
  device_ = device;
  if (!device->host_accessible()) {
    // Step metadata and results are exchanged through host memory; a device
    // without host-addressable memory needs copy support first.
    return absl::UnimplementedError(
        absl::StrCat("model runner needs a host-accessible device; ",
                     device->name(), " is not"));
  }
  const bool quantized =
      options.dtype == DType::kQ8_0 || options.dtype == DType::kQ4_0 ||
      options.dtype == DType::kQ4_1 || options.dtype == DType::kI8;
  if (options.dtype != DType::kF32 && options.dtype != DType::kBF16 &&
      !quantized) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compute dtype must be float32, bfloat16, q8_0, q4_0, q4_1 or int8, "
        "not ",
        DTypeName(options.dtype)));
  }
  compute_dtype_ = options.dtype;
  activations_ = options.activations;
  kv_dtype_ = options.kv_cache_dtype.value_or(quantized ? DType::kF32
                                                        : options.dtype);
  if (kv_dtype_ != DType::kF32 && kv_dtype_ != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache dtype must be float32 or bfloat16, not ",
                     DTypeName(kv_dtype_)));
  }

  ModelConfig config;
  if (options.config.has_value()) {
    config = *options.config;
  } else {
    if (options.model_dir.empty()) {
      return absl::InvalidArgumentError(
          "model runner: neither model_dir nor config given");
    }
    ASSIGN_OR_RETURN(ModelDirectory dir,
                     OpenModelDirectory(options.model_dir,
                                        /*load_weights=*/false));
    config = std::move(dir.config);
  }
  weights_ = options.weights;
  if (weights_ == nullptr) {
    if (options.model_dir.empty()) {
      return absl::InvalidArgumentError(
          "model runner: neither model_dir nor weights given");
    }
    ASSIGN_OR_RETURN(std::unique_ptr<WeightStore> store,
                     OpenModelWeights(options.model_dir));
    weights_ = std::move(store);
  }

  // The attention backend decides the mask: a named one fixes it (a
  // decoder under bidirectional_prefill drops its causal mask); "auto"
  // follows `bidirectional` / config.json and picks causal_paged for a
  // causal LM, else a prefill backend with the model's mask.
  const bool auto_backend =
      options.attention.empty() || options.attention == "auto";
  absl::optional<AttentionBackendRegistration> named;
  if (!auto_backend) {
    ASSIGN_OR_RETURN(named, FindAttentionBackend(options.attention));
  }
  bool bidirectional = options.bidirectional.value_or(
      config.is_causal.has_value() && !*config.is_causal);
  if (named.has_value()) {
    const bool backend_bidirectional =
        named->mask == AttentionMask::kBidirectional;
    if (options.bidirectional.has_value() &&
        *options.bidirectional != backend_bidirectional) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.attention, " attention is ",
          backend_bidirectional ? "bidirectional" : "causal",
          "; it cannot run ", config.architectures[0],
          *options.bidirectional ? " bidirectionally" : " causally"));
    }
    bidirectional = backend_bidirectional;
  }
  if (config.IsEncoder()) {
    if (named.has_value() && named->mask == AttentionMask::kCausal) {
      return absl::InvalidArgumentError(absl::StrCat(
          config.architectures[0], " is an encoder (always bidirectional); ",
          options.attention, " attention is causal"));
    }
    bidirectional = true;
  }

  ModelLoadOptions load;
  load.device = device;
  load.compute_dtype = compute_dtype_;
  load.bidirectional = bidirectional;
  load.activations = activations_;
  ASSIGN_OR_RETURN(model_, CreateModel(config, *weights_, load, options.model_class));

  std::string backend_name = options.attention;
  if (auto_backend) {
    backend_name = !model_->info().causal ? "bidirectional_prefill"
                   : model_->info().has_lm_head ? "causal_paged"
                                                : "causal_prefill";
    ASSIGN_OR_RETURN(named, FindAttentionBackend(backend_name));
  }
  backend_ = named->create(&kv_views_);
  if (backend_ == nullptr) {
    return absl::InternalError(absl::StrCat("attention backend ", backend_name,
                                            " returned no instance"));
  }
  workspace_ = std::make_unique<Workspace>(device);
  return absl::OkStatus();
}

int64_t ModelRunnerBase::KvCacheBytesPerBlock(int block_size) const {
  if (!uses_kv_cache()) return 0;
  const ModelInfo& m = info();
  return 2 * m.num_layers * int64_t{block_size} * m.num_kv_heads * m.head_dim *
         static_cast<int64_t>(DTypeSize(kv_dtype_));
}

int64_t ModelRunnerBase::kv_cache_bytes() const {
  int64_t total = 0;
  for (const DeviceBuffer& b : kv_buffers_)
    total += static_cast<int64_t>(b.size());
  return total;
}

int64_t ModelRunnerBase::kv_cache_resident_bytes() const {
  int64_t total = 0;
  for (const DeviceBuffer& b : kv_buffers_) {
    total += device_->ResidentBytes(b.data(), b.size());
  }
  return total;
}

absl::Status ModelRunnerBase::AllocateKvCache(int64_t num_blocks,
                                              int block_size) {
  if (!uses_kv_cache()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "attention backend ", attention_backend(),
        " uses no KV cache"));
  }
  if (num_blocks <= 0 || block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache needs num_blocks > 0 and block_size > 0; got ",
                     num_blocks, " and ", block_size));
  }
  const ModelInfo& m = info();
  ReleaseKvCache();
  const size_t layer_bytes = static_cast<size_t>(num_blocks) * block_size *
                             m.num_kv_heads * m.head_dim * DTypeSize(kv_dtype_);
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      ASSIGN_OR_RETURN(DeviceBuffer buffer,
                       DeviceBuffer::CreateZeroed(device_, layer_bytes, 64));
      process_kv_bytes.fetch_add(static_cast<int64_t>(layer_bytes),
                                 std::memory_order_relaxed);
      TensorView view;
      view.data = buffer.data();
      view.dtype = kv_dtype_;
      view.rank = 4;
      view.shape = {num_blocks, block_size, m.num_kv_heads, m.head_dim};
      view.strides = {block_size * m.num_kv_heads * m.head_dim,
                      m.num_kv_heads * m.head_dim, m.head_dim, 1};
      (kv == 0 ? kv_views_.k : kv_views_.v).push_back(view);
      kv_buffers_.push_back(std::move(buffer));
    }
  }
  kv_views_.num_blocks = num_blocks;
  kv_views_.block_size = block_size;
  return absl::OkStatus();
}

int64_t ModelRunnerBase::EstimateActivationBytes(int64_t tokens,
                                                 int64_t sampled) const {
  const ModelInfo& m = info();
  const int64_t qkv = (m.num_heads + 2 * m.num_kv_heads) * m.head_dim;
  const int64_t per_token = 3 * m.hidden_size + qkv + m.num_heads * m.head_dim +
                            2 * m.intermediate_size;
  const int64_t head = sampled * (2 * m.hidden_size + m.vocab_size);
  // 1.25: the workspace's growth slack.
  return (tokens * per_token + head) * 4 * 5 / 4;
}

absl::StatusOr<KvCachePlan> ModelRunnerBase::PlanKvCache(
    double fraction, int64_t bytes, int block_size,
    int64_t max_batched_tokens) const {
  KvCachePlan plan;
  plan.block_bytes = KvCacheBytesPerBlock(block_size);
  if (plan.block_bytes == 0) return plan;
  if (bytes <= 0 && !(fraction > 0.0 && fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache fraction must be in (0, 1]; got ", fraction));
  }
  ASSIGN_OR_RETURN(MemoryInfo mem, device_->GetMemoryInfo());
  plan.limit_bytes = mem.total_bytes;
  plan.limit_source = mem.source;
  plan.free_bytes = mem.free_bytes;
  plan.mapped_weight_bytes = weight_bytes_mapped();
  plan.other_kv_bytes = ProcessKvCacheBytes() - kv_cache_bytes();
  plan.activation_bytes =
      EstimateActivationBytes(max_batched_tokens, max_batched_tokens);
  plan.headroom_bytes = KvCachePlan::Headroom(mem.total_bytes);
  plan.left_bytes = std::max<int64_t>(
      mem.free_bytes - plan.mapped_weight_bytes - plan.other_kv_bytes -
          plan.activation_bytes - plan.headroom_bytes,
      0);
  if (bytes > 0) {
    plan.budget_bytes = bytes;
    if (bytes > plan.left_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "--kv-cache-memory asks for ", bytes >> 20, " MiB but only ",
          plan.left_bytes >> 20, " MiB are left: ", plan.Describe()));
    }
  } else {
    plan.fraction = fraction;
    plan.budget_bytes = static_cast<int64_t>(
        static_cast<double>(plan.left_bytes) * fraction);
  }
  plan.blocks = plan.budget_bytes / plan.block_bytes;
  if (plan.blocks <= 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no room for one KV cache block (", plan.block_bytes, " bytes): ",
        plan.Describe()));
  }
  return plan;
}

std::string KvCachePlan::Describe() const {
  auto mib = [](int64_t b) { return b >> 20; };
  return absl::StrCat(
      "KV budget ", mib(budget_bytes), " MiB = ",
      fraction > 0 ? absl::StrCat(fraction, " of ") : std::string("a size within "),
      mib(left_bytes), " MiB left (", limit_source, ": limit ",
      mib(limit_bytes), " MiB, ", mib(free_bytes), " MiB free; less ",
      mib(mapped_weight_bytes), " MiB mapped weights, ", mib(other_kv_bytes),
      " MiB other KV caches, ", mib(activation_bytes), " MiB activations, ",
      mib(headroom_bytes), " MiB headroom)");
}

absl::Status ModelRunnerBase::BuildBatch(const BatchPlan& plan) {
  const ModelInfo& m = info();
  const bool paged = uses_kv_cache();
  if (plan.seqs.empty()) {
    return absl::InvalidArgumentError("batch plan has no sequences");
  }
  if (paged && kv_views_.num_blocks == 0) {
    return absl::FailedPreconditionError(
        "causal_paged attention: KV cache not allocated (AllocateKvCache)");
  }
  ids_.clear();
  positions_.clear();
  rope_positions_.clear();
  token_types_.clear();
  cu_seqlens_.assign(1, 0);
  slot_mapping_.clear();
  seq_lens_.clear();
  block_tables_.clear();
  int32_t max_query_len = 0;
  int32_t max_seq_len = 0;
  size_t max_blocks = 1;
  for (const SequencePlan& s : plan.seqs) {
    max_blocks = std::max(max_blocks, s.block_table.size());
  }
  const int bs = kv_views_.block_size;

  for (const SequencePlan& s : plan.seqs) {
    const int64_t n = static_cast<int64_t>(s.token_ids.size());
    if (n == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", s.seq_id, " has no tokens"));
    }
    if (!s.token_type_ids.empty() &&
        static_cast<int64_t>(s.token_type_ids.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", s.seq_id, ": ", s.token_type_ids.size(),
                       " token type ids for ", n, " tokens"));
    }
    if (s.start_pos < 0 || (!paged && s.start_pos != 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence ", s.seq_id, ": start_pos ", s.start_pos,
          paged ? " is negative"
                : " must be 0 without a KV cache (whole sequences only)"));
    }
    const int64_t end = s.start_pos + n;
    if (m.is_encoder && end > m.max_positions) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", s.seq_id, " has ", end,
                       " tokens; the model takes at most ", m.max_positions));
    }
    switch (s.output) {
      case StepOutput::kLastLogits:
      case StepOutput::kAllLogits:
        if (!m.has_lm_head) {
          return absl::InvalidArgumentError(
              absl::StrCat("sequence ", s.seq_id, " asks for logits; ",
                           m.architecture, " has no language-model head"));
        }
        break;
      case StepOutput::kClassifierLogits:
        if (!m.has_classifier) {
          return absl::InvalidArgumentError(absl::StrCat(
              "sequence ", s.seq_id, " asks for classifier logits; ",
              m.architecture, " has no classification head"));
        }
        break;
      default:
        break;
    }
    if (paged) {
      const int64_t needed_blocks = (end + bs - 1) / bs;
      if (static_cast<int64_t>(s.block_table.size()) < needed_blocks) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequence ", s.seq_id, ": block table has ", s.block_table.size(),
            " blocks; ", end, " tokens need ", needed_blocks));
      }
      for (int32_t block : s.block_table) {
        if (block < 0 || block >= kv_views_.num_blocks) {
          return absl::InvalidArgumentError(
              absl::StrCat("sequence ", s.seq_id, ": block id ", block,
                           " outside the cache's ", kv_views_.num_blocks));
        }
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      const int32_t id = s.token_ids[static_cast<size_t>(i)];
      if (id < 0 || id >= m.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequence ", s.seq_id, ": token id ", id,
                         " outside the vocabulary [0, ", m.vocab_size, ")"));
      }
      const int32_t pos = static_cast<int32_t>(s.start_pos + i);
      ids_.push_back(id);
      rope_positions_.push_back(pos);
      positions_.push_back(static_cast<int32_t>(pos + m.position_offset));
      const int32_t type = s.token_type_ids.empty()
                               ? 0
                               : s.token_type_ids[static_cast<size_t>(i)];
      if (m.is_encoder &&
          (type < 0 || type >= std::max<int64_t>(m.type_vocab_size, 1))) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequence ", s.seq_id, ": token type id ", type,
                         " outside [0, ", m.type_vocab_size, ")"));
      }
      token_types_.push_back(type);
      if (paged) {
        const int32_t block = s.block_table[static_cast<size_t>(pos / bs)];
        slot_mapping_.push_back(block * bs + pos % bs);
      }
    }
    cu_seqlens_.push_back(static_cast<int32_t>(ids_.size()));
    max_query_len = std::max(max_query_len, static_cast<int32_t>(n));
    max_seq_len = std::max(max_seq_len, static_cast<int32_t>(end));
    if (paged) {
      seq_lens_.push_back(static_cast<int32_t>(end));
      for (size_t b = 0; b < max_blocks; ++b) {
        block_tables_.push_back(b < s.block_table.size() ? s.block_table[b]
                                                         : 0);
      }
    }
  }

  batch_ = ForwardBatch();
  batch_.num_tokens = static_cast<int64_t>(ids_.size());
  batch_.num_seqs = static_cast<int64_t>(plan.seqs.size());
  batch_.token_ids = I32View(ids_);
  batch_.positions = I32View(positions_);
  batch_.token_type_ids = I32View(token_types_);
  batch_.rope_positions = rope_positions_;
  batch_.cu_seqlens = I32View(cu_seqlens_);
  batch_.max_query_len = max_query_len;
  if (paged) {
    batch_.slot_mapping = I32View(slot_mapping_);
    batch_.paged.query_start_loc = batch_.cu_seqlens;
    batch_.paged.seq_lens = I32View(seq_lens_);
    batch_.paged.block_tables = TensorView::Contiguous(
        block_tables_.data(), DType::kI32,
        {batch_.num_seqs, static_cast<int64_t>(max_blocks)});
    batch_.paged.max_query_len = max_query_len;
    batch_.paged.max_seq_len = max_seq_len;
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorView> ModelRunnerBase::GatherRows(
    const ExecutionContext& ctx, const TensorView& hidden,
    const std::vector<int32_t>& rows) {
  gather_ids_ = rows;
  ASSIGN_OR_RETURN(
      TensorView out,
      workspace_->Get(WsSlot::kGather, static_cast<int64_t>(rows.size()),
                      hidden.shape[1]));
  RETURN_IF_ERROR(Embedding(ctx, hidden, I32View(gather_ids_), out));
  return out;
}

absl::StatusOr<BatchResult> ModelRunnerBase::Execute(const BatchPlan& plan) {
  RETURN_IF_ERROR(BuildBatch(plan));
  const ModelInfo& m = info();
  ForwardContext ctx;
  ctx.exec = ExecutionContext{device_, KernelChoice::kOptimized};
  // A decode-only step: every row a sequence's next token.
  ctx.exec.decode_rows = batch_.max_query_len == 1;
  ctx.exec.activations = activations_;
  ctx.batch = &batch_;
  ctx.ws = workspace_.get();
  ctx.attention = backend_.get();
  ASSIGN_OR_RETURN(TensorView hidden, model_->Forward(ctx));

  BatchResult result;
  result.seqs.resize(plan.seqs.size());
  const int64_t h = m.hidden_size;
  auto copy_rows = [](const TensorView& src, int64_t row, int64_t count,
                      std::vector<float>* dst) {
    const int64_t cols = src.shape[1];
    dst->resize(static_cast<size_t>(count * cols));
    for (int64_t r = 0; r < count; ++r) {
      std::memcpy(dst->data() + r * cols,
                  src.as<float>() + (row + r) * src.strides[0],
                  static_cast<size_t>(cols) * sizeof(float));
    }
  };

  // Heads run on the gathered rows of the sequences that asked for them
  // (the LM head on last rows and on every row of kAllLogits sequences).
  auto uses = [](StepOutput head, StepOutput asked) {
    return asked == head || (head == StepOutput::kLastLogits &&
                             asked == StepOutput::kAllLogits);
  };
  for (StepOutput head :
       {StepOutput::kLastLogits, StepOutput::kClassifierLogits}) {
    gather_rows_.clear();
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      if (!uses(head, plan.seqs[i].output)) continue;
      if (plan.seqs[i].output == StepOutput::kAllLogits) {
        for (int32_t r = cu_seqlens_[i]; r < cu_seqlens_[i + 1]; ++r) {
          gather_rows_.push_back(r);
        }
        continue;
      }
      const bool first = head == StepOutput::kClassifierLogits &&
                         m.classifier_token == ClassifierToken::kFirst;
      gather_rows_.push_back(first ? cu_seqlens_[i] : cu_seqlens_[i + 1] - 1);
    }
    if (gather_rows_.empty()) continue;
    ASSIGN_OR_RETURN(TensorView rows,
                     GatherRows(ctx.exec, hidden, gather_rows_));
    const int64_t cols =
        head == StepOutput::kLastLogits ? m.vocab_size : m.num_labels;
    ASSIGN_OR_RETURN(TensorView out,
                     workspace_->Get(WsSlot::kHeadOut, rows.shape[0], cols));
    if (head == StepOutput::kLastLogits) {
      RETURN_IF_ERROR(model_->ComputeLogits(ctx, rows, out));
    } else {
      RETURN_IF_ERROR(model_->Classify(ctx, rows, out));
    }
    RETURN_IF_ERROR(device_->Synchronize());
    int64_t k = 0;
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      if (!uses(head, plan.seqs[i].output)) continue;
      const int64_t n = plan.seqs[i].output == StepOutput::kAllLogits
                            ? cu_seqlens_[i + 1] - cu_seqlens_[i]
                            : 1;
      SequenceResult& r = result.seqs[i];
      r.rows = static_cast<int32_t>(n);
      r.cols = static_cast<int32_t>(cols);
      copy_rows(out, k, n, &r.values);
      k += n;
    }
  }

  // Mean pooling on the device: one row per sequence comes back.
  pool_starts_.clear();
  pool_ends_.clear();
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    if (plan.seqs[i].output != StepOutput::kMeanHiddenState) continue;
    const int32_t n = cu_seqlens_[i + 1] - cu_seqlens_[i];
    pool_starts_.push_back(cu_seqlens_[i] +
                           std::clamp(plan.seqs[i].pool_start, 0, n - 1));
    pool_ends_.push_back(cu_seqlens_[i + 1]);
  }
  TensorView pooled;
  if (!pool_starts_.empty()) {
    ASSIGN_OR_RETURN(
        pooled, workspace_->Get(WsSlot::kGather,
                                static_cast<int64_t>(pool_starts_.size()), h));
    RETURN_IF_ERROR(MeanPool(ctx.exec, hidden, I32View(pool_starts_),
                             I32View(pool_ends_), pooled));
  }

  RETURN_IF_ERROR(device_->Synchronize());
  int64_t next_pooled = 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const SequencePlan& s = plan.seqs[i];
    SequenceResult& r = result.seqs[i];
    r.seq_id = s.seq_id;
    r.output = s.output;
    const int64_t begin = cu_seqlens_[i];
    const int64_t n = cu_seqlens_[i + 1] - begin;
    switch (s.output) {
      case StepOutput::kHiddenStates:
        r.rows = static_cast<int32_t>(n);
        r.cols = static_cast<int32_t>(h);
        copy_rows(hidden, begin, n, &r.values);
        break;
      case StepOutput::kFirstHiddenState:
      case StepOutput::kLastHiddenState:
        r.rows = 1;
        r.cols = static_cast<int32_t>(h);
        copy_rows(hidden,
                  s.output == StepOutput::kFirstHiddenState ? begin
                                                            : begin + n - 1,
                  1, &r.values);
        break;
      case StepOutput::kMeanHiddenState:
        r.rows = 1;
        r.cols = static_cast<int32_t>(h);
        copy_rows(pooled, next_pooled++, 1, &r.values);
        break;
      default:
        break;
    }
  }
  return result;
}

// ---------------------------------------------------------------------------

Registry<ModelRunnerFactory>& ModelRunners() {
  static auto* const registry = new Registry<ModelRunnerFactory>(
      "model_runner", "a device kind's model runner (runs steps on it)");
  return *registry;
}

absl::StatusOr<std::unique_ptr<ModelRunnerBase>> CreateModelRunner(
    const ModelRunnerOptions& options) {
  const absl::string_view kind =
      absl::string_view(options.device).substr(0, options.device.find(':'));
  const ModelRunnerFactory* factory = ModelRunners().Find(kind);
  if (factory == nullptr) {
    const std::vector<std::string> kinds = ModelRunners().Names();
    return absl::NotFoundError(absl::StrCat(
        "no model runner for device \"", options.device, "\" (runners: ",
        kinds.empty() ? std::string("none") : absl::StrJoin(kinds, ", "),
        ")"));
  }
  return (*factory)(options);
}

}  // namespace inferd
