// CreateEngine: builds the engine a model's workflow names, with its model
// runner(s), scheduler and input/output processors.
#include <algorithm>
#include <thread>

#include "absl/hash/hash.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "device/bf16.h"
#include "runtime/loader/safetensors.h"
#include "runtime/common/status_macros.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/generate_engine.h"
#include "runtime/engine/model_manager.h"
#include "runtime/engine/prefill_engine.h"
#include "runtime/model/model_runner.h"
#include "runtime/tokenizer/tokenizer.h"

namespace inferd {
namespace {

class ModelStepRunner : public StepRunner {
 public:
  explicit ModelStepRunner(std::unique_ptr<ModelRunnerBase> runner)
      : runner_(std::move(runner)) {}
  absl::StatusOr<BatchResult> Execute(const BatchPlan& plan) override {
    return runner_->Execute(plan);
  }
  ModelRunnerBase& runner() { return *runner_; }

 private:
  std::unique_ptr<ModelRunnerBase> runner_;
};

int NumCores() {
  return std::max(1u, std::thread::hardware_concurrency());
}

// EOS ids: config.json's eos_token_id(s), plus the tokenizer config's EOS
// token when it names one the vocabulary has.
std::vector<int32_t> EosIds(const ServedModel& model) {
  std::vector<int32_t> ids;
  for (int64_t id : model.config().eos_token_ids) {
    ids.push_back(static_cast<int32_t>(id));
  }
  if (model.tokenizer_config().eos_token) {
    auto id = model.tokenizer().TokenToId(*model.tokenizer_config().eos_token);
    if (id && std::find(ids.begin(), ids.end(), *id) == ids.end()) {
      ids.push_back(*id);
    }
  }
  return ids;
}

// Reads a sentence-transformers Dense module (<dir>/<path>/model.safetensors:
// linear.weight [out, in], optional linear.bias) into F32.
absl::StatusOr<DenseLayer> LoadDense(const std::string& dir,
                                     const StDenseConfig& d) {
  const std::string file = absl::StrCat(dir, "/", d.path, "/model.safetensors");
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> st,
                   SafetensorsFile::Open(file));
  auto to_floats = [&](const TensorView& t) -> absl::StatusOr<std::vector<float>> {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < out.size(); ++i) {
      switch (t.dtype) {
        case DType::kF32: out[i] = t.as<const float>()[i]; break;
        case DType::kBF16: out[i] = Bf16ToFloat(t.as<const uint16_t>()[i]); break;
        case DType::kF16: out[i] = F16ToFloat(t.as<const uint16_t>()[i]); break;
        default:
          return absl::InvalidArgumentError(absl::StrCat(
              file, ": Dense weights must be float32, bfloat16 or float16"));
      }
    }
    return out;
  };
  DenseLayer layer;
  ASSIGN_OR_RETURN(TensorView w, st->Get("linear.weight"));
  if (w.rank != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": linear.weight must be 2-D"));
  }
  layer.out_features = w.dim(0);
  layer.in_features = w.dim(1);
  ASSIGN_OR_RETURN(layer.weight, to_floats(w));
  if (st->Has("linear.bias")) {
    ASSIGN_OR_RETURN(TensorView b, st->Get("linear.bias"));
    ASSIGN_OR_RETURN(layer.bias, to_floats(b));
    if (static_cast<int64_t>(layer.bias.size()) != layer.out_features) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": linear.bias does not match linear.weight"));
    }
  }
  // sentence-transformers' Dense defaults to Tanh when the config names no
  // activation.
  const std::string& act = d.activation_function;
  if (act.empty() || absl::EndsWith(act, "Tanh")) {
    layer.tanh = true;
  } else if (!act.empty() && !absl::EndsWith(act, "Identity")) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": Dense activation '", act,
        "' is not supported (Tanh or Identity)"));
  }
  return layer;
}

absl::StatusOr<ModelRunnerOptions> RunnerOptions(
    const ServedModel& model, int threads,
    std::shared_ptr<const WeightStore> weights) {
  ModelRunnerOptions ro;
  ro.model_dir = model.spec().path;
  ro.weights = std::move(weights);
  ro.threads = threads;
  ASSIGN_OR_RETURN(ro.dtype, ParseComputeDType(model.spec().engine.dtype));
  const Workflow& w = model.workflow();
  if (w.kind == WorkflowKind::kCausalGenerate) {
    ro.attention = AttentionBackendKind::kCausalPaged;
    ro.bidirectional = false;
  } else {
    ro.attention = AttentionBackendKind::kBidirectionalPrefill;
    if (w.kind == WorkflowKind::kDecoderEmbed) ro.bidirectional = w.bidirectional;
  }
  return ro;
}

absl::StatusOr<std::unique_ptr<Engine>> CreatePrefillEngine(
    const ServedModel& model, std::shared_ptr<const WeightStore> weights) {
  const EngineOptions& eo = model.spec().engine;
  const Workflow& w = model.workflow();
  const ServedModelInfo info = model.info();
  PrefillEngineOptions po;
  po.workflow = w.kind;
  // Data parallelism: small encoders run faster as one single-threaded
  // replica per core than as one replica whose GEMMs are split across
  // cores (bench/README.md); large models use one replica with every core.
  const int cores = NumCores();
  int replicas = eo.replicas;
  if (replicas <= 0) {
    const int64_t h = model.config().hidden_size;
    replicas = h <= 512 ? cores : 1;
  }
  int threads = eo.threads > 0 ? eo.threads : std::max(1, cores / replicas);
  po.replicas = replicas;
  po.scheduler.max_batched_tokens =
      std::max<int64_t>(eo.max_batched_tokens, info.max_input_tokens);
  po.scheduler.max_seqs = eo.max_seqs;
  po.scheduler.max_queue_requests = eo.max_queue_requests;
  po.scheduler.max_queue_tokens = eo.max_queue_tokens;
  po.embedding_dims = info.embedding_dims;
  for (const StDenseConfig& d : model.st_config().dense) {
    ASSIGN_OR_RETURN(DenseLayer layer, LoadDense(model.spec().path, d));
    po.dense.push_back(std::move(layer));
  }
  if (!info.pooling.empty()) {
    ASSIGN_OR_RETURN(po.default_pooling, ParsePooling(info.pooling));
  }
  const SentenceTransformersConfig& st = model.st_config();
  po.default_normalize = st.present ? st.has_normalize : true;
  po.classify_scores =
      model.config().problem_type == "multi_label_classification"
          ? ScoreFunction::kSigmoid
          : (model.config().num_labels == 1 ? ScoreFunction::kSigmoid
                                            : ScoreFunction::kSoftmax);

  InputProcessorOptions io;
  io.max_input_tokens = info.max_input_tokens;
  io.include_prompt_in_pooling = st.include_prompt;
  io.prompts = st.prompts;
  io.default_prompt_name = st.default_prompt_name;
  if (w.kind == WorkflowKind::kDecoderEmbed) {
    std::vector<int32_t> eos = EosIds(model);
    if (!eos.empty()) io.append_eos = eos[0];
  }
  ASSIGN_OR_RETURN(ModelRunnerOptions ro,
                   RunnerOptions(model, threads, std::move(weights)));
  auto make_runner = [&ro](int) -> absl::StatusOr<std::unique_ptr<StepRunner>> {
    ASSIGN_OR_RETURN(std::unique_ptr<ModelRunnerBase> r, CreateModelRunner(ro));
    return std::unique_ptr<StepRunner>(new ModelStepRunner(std::move(r)));
  };
  ASSIGN_OR_RETURN(
      std::unique_ptr<PrefillEngine> e,
      PrefillEngine::Create(po, InputProcessor(&model.tokenizer(), io),
                            make_runner));
  return std::unique_ptr<Engine>(std::move(e));
}

absl::StatusOr<std::unique_ptr<Engine>> CreateGenerateEngine(
    const ServedModel& model, std::shared_ptr<const WeightStore> weights) {
  const EngineOptions& eo = model.spec().engine;
  const int threads = eo.threads > 0 ? eo.threads : 0;
  ASSIGN_OR_RETURN(ModelRunnerOptions ro,
                   RunnerOptions(model, threads, std::move(weights)));
  ASSIGN_OR_RETURN(std::unique_ptr<ModelRunnerBase> runner,
                   CreateModelRunner(ro));
  const int block_size = eo.block_size;
  int32_t max_model_len =
      static_cast<int32_t>(std::min<int64_t>(model.info().max_input_tokens,
                                             runner->max_positions()));
  ASSIGN_OR_RETURN(int64_t blocks,
                   runner->NumKvBlocksForMemory(eo.kv_cache_fraction,
                                                eo.kv_cache_bytes, block_size,
                                                eo.max_batched_tokens));
  const int64_t min_blocks = (max_model_len + block_size - 1) / block_size;
  if (blocks < min_blocks) {
    // Long-context checkpoints (e.g. 128k positions) would need more KV
    // memory than the budget for one full-length sequence: serve a shorter
    // context (what the cache holds) rather than refuse the model. The new
    // limit shows in ModelInfo.max_input_tokens.
    const int64_t fit = blocks * block_size;
    if (fit < 2 * block_size) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the KV cache budget fits only ", blocks, " blocks of ", block_size,
          " tokens; raise --kv-cache-memory"));
    }
    max_model_len = static_cast<int32_t>(fit);
  }
  // Never more blocks than max_seqs full-length sequences could use, so a
  // small model does not take a quarter of the machine's memory.
  const int64_t useful =
      static_cast<int64_t>(eo.max_seqs) *
          ((max_model_len + block_size - 1) / block_size) + 1;
  blocks = std::min(blocks, useful);
  RETURN_IF_ERROR(runner->AllocateKvCache(blocks, block_size));

  GenerateEngineOptions go;
  go.vocab_size = static_cast<int32_t>(runner->vocab_size());
  go.eos_token_ids = EosIds(model);
  go.max_queue_requests = eo.max_queue_requests;
  SchedulerConfig& sc = go.scheduler;
  sc.max_batched_tokens = eo.max_batched_tokens;
  sc.max_seqs = eo.max_seqs;
  sc.max_model_len = max_model_len;
  sc.max_waiting_requests = eo.max_queue_requests;
  sc.max_waiting_tokens = eo.max_queue_tokens;
  sc.kv_cache.num_blocks = static_cast<int32_t>(blocks);
  sc.kv_cache.block_size = block_size;
  sc.kv_cache.enable_prefix_caching = eo.enable_prefix_caching;
  sc.kv_cache.hash_salt =
      absl::HashOf(model.spec().path, model.spec().engine.dtype);
  return std::unique_ptr<Engine>(new GenerateEngine(
      std::move(go), &model.tokenizer(),
      std::make_unique<ModelStepRunner>(std::move(runner))));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(
    const ServedModel& model, std::shared_ptr<const WeightStore> weights) {
  if (model.workflow().kind == WorkflowKind::kCausalGenerate) {
    return CreateGenerateEngine(model, std::move(weights));
  }
  return CreatePrefillEngine(model, std::move(weights));
}

}  // namespace inferd
